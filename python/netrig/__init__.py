"""netrig — a software network test rig (being written)."""
from netrig.errors import *  # noqa: F401,F403
