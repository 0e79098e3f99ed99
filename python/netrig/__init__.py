"""netrig — a software network test rig: traffic generator, analyzer and benchmarking methodology.

Public API::

    from netrig import Port, Stream, run_trial
    res = run_trial(Port("veth0", netns="a"), Port("veth1", netns="b"),
                    [Stream(frame_size=64, rate_pps=100_000, dst_mac=...)], duration_s=10)
    print(res.frames_lost, res.latency.p99_ns)
"""
from netrig._native import __version__
from netrig.errors import (
    CapabilityError,
    ConfigError,
    EngineError,
    InterfaceError,
    InterruptedTrial,
    MethodologyError,
    NetrigError,
    PermissionError_,
    PortError,
    ResultError,
    TestbedError,
)
from netrig.trial import (
    FlowResult,
    Latency,
    ListenResult,
    Port,
    PortResult,
    Stream,
    StreamResult,
    TrialResult,
    listen,
    run_trial,
)

__all__ = [
    "__version__",
    "Port",
    "Stream",
    "run_trial",
    "listen",
    "TrialResult",
    "ListenResult",
    "StreamResult",
    "FlowResult",
    "PortResult",
    "Latency",
    "NetrigError",
    "ConfigError",
    "CapabilityError",
    "PortError",
    "InterfaceError",
    "PermissionError_",
    "EngineError",
    "InterruptedTrial",
    "TestbedError",
    "ResultError",
    "MethodologyError",
]
