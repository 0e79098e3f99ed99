"""Running a test: the configuration (``config``), the composition root that turns it into
sessions (``session``), the recording measurer (``recording``) and the run loop (``runner``)."""
from netrig.run.config import TestConfig, config_from_dict, load_config
from netrig.run.runner import Runner, run_config
from netrig.run.session import Session, open_session

__all__ = ["TestConfig", "config_from_dict", "load_config", "Runner", "run_config", "Session", "open_session"]
