"""Result documents: the incremental trial log (``trials.ndjson``), ``result.json``, and the one
reader every consumer (resume, reports, comparisons) goes through.

The format is specified in ``docs/result-format.md``.
"""
from netrig.results.reader import MIGRATIONS, load_document, load_result, migrate, read_trial_log
from netrig.results.store import SCHEMA_VERSION, TrialLog, dumps, utc_now, write_result

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "TrialLog", "dumps", "load_document", "load_result", "migrate",
           "read_trial_log", "utc_now", "write_result"]
