"""Result documents: the incremental trial log (``trials.ndjson``) and ``result.json``.

The format is specified in ``docs/result-format.md``.
"""
from netrig.results.reader import MIGRATIONS, load_result, read_trial_log
from netrig.results.store import SCHEMA_VERSION, TrialLog, write_result

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "TrialLog", "load_result", "read_trial_log", "write_result"]
