"""DUT monitoring: per-CPU load, process CPU/memory, memory/slab, conntrack and interface counters
sampled alongside a trial (see :class:`Monitor`; of a DUT on another host over SSH:
:class:`RemoteMonitor`)."""
from netrig.monitor.monitor import Monitor, MonitorResult, ethtool_stats
from netrig.monitor.remote import RemoteMonitor, RemoteMonitorError

__all__ = ["Monitor", "MonitorResult", "RemoteMonitor", "RemoteMonitorError", "ethtool_stats"]
