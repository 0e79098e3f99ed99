"""Every method netrig has, one module each; this registry is the only list of them.

Order matters: it is the order of the report's sections, of the Markdown summary and of the
config file's list of allowed methods. Adding a method: write its module (see
``netrig.methodology.method`` for what it declares) and add it to the line below.
"""
from netrig.methodology.method import Registry
from netrig.methods import (
                            back_to_back,
                            convergence,
                            frame_loss,
                            iperf,
                            latency,
                            livelock,
                            mlrsearch,
                            recovery,
                            reset,
                            rr,
                            soak,
                            stateful,
                            stress,
                            tcp,
                            throughput,
)

REGISTRY = Registry(m.METHOD for m in (throughput, frame_loss, latency, mlrsearch, back_to_back, recovery, reset,
                                        convergence, stress, iperf, livelock, tcp, rr, stateful, soak))

__all__ = ["REGISTRY"]
