"""``netrig ndr-pdr``: MLRsearch for NDR (0 % loss) and PDR (0.5 % loss) at once."""
from __future__ import annotations

from typing import Any

from netrig.cli import shortcuts


def register(subparsers: Any) -> None:
    shortcuts.register(subparsers, "ndr-pdr", summary="MLRsearch: NDR and PDR (conditional throughput) on a test bed",
                       description="Find NDR and PDR at once with MLRsearch (draft-ietf-bmwg-mlrsearch).",
                       sizes_default="64")
    subparsers.choices["ndr-pdr"].add_argument("--size", dest="sizes", help="alias of --sizes")
