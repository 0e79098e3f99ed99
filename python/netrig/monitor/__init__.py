"""DUT monitoring: per-CPU load, process CPU/memory, memory/slab, conntrack and interface counters
sampled alongside a trial (see :class:`Monitor`)."""
from netrig.monitor.monitor import Monitor, MonitorResult, ethtool_stats

__all__ = ["Monitor", "MonitorResult", "ethtool_stats"]
