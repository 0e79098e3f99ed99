"""Result documents: the incremental trial log (``trials.ndjson``), ``result.json``, and the one
reader every consumer (resume, reports, comparisons) goes through.

The format is specified in ``docs/result-format.md``.
"""
from netrig.results.reader import (
    MAX_RESULT_BYTES,
    MIGRATIONS,
    TORN_FLAG,
    load_document,
    load_result,
    migrate,
    read_text,
    read_trial_log,
)
from netrig.results.store import (
    CONFIG_FILE,
    RESULT_FILE,
    SCHEMA_VERSION,
    TRIAL_LOG,
    TrialLog,
    dumps,
    utc_now,
    write_result,
    write_text_atomic,
)

__all__ = ["CONFIG_FILE", "RESULT_FILE", "TRIAL_LOG", "TORN_FLAG", "write_text_atomic", "SCHEMA_VERSION", "MIGRATIONS",
           "TrialLog", "dumps", "load_document", "load_result", "migrate", "read_text", "read_trial_log", "utc_now",
           "write_result", "MAX_RESULT_BYTES"]
