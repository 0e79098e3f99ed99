"""Presentation of result documents, shared by every method and the report: a read-only view of a
result (:class:`RunView`), number formatting, tables, the plot kit, and HTML/Markdown pieces.
Reads results only through ``netrig.results``."""
from netrig.view.run_view import RunView, Stat

__all__ = ["RunView", "Stat"]
