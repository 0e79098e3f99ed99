"""Test beds: network namespaces and veth pairs with a real Linux DUT in the middle.

>>> with Testbed.create("router") as tb:            # doctest: +SKIP
...     s = Stream(**tb.stream_defaults(), frame_size=64, rate_pps=10_000)

See ``docs/testbed.md``; tuning knobs (``Knobs``, ``applied_knobs``): ``docs/methodology.md``.
"""
from netrig.errors import TestbedError
from netrig.testbed import state as st
from netrig.testbed.clean import clean
from netrig.testbed.knobs import KnobLayout, Knobs, KnobSet, applied_knobs
from netrig.testbed.options import TestbedOptions, parse_cap, parse_cpus
from netrig.testbed.state import CleanReport
from netrig.testbed.testbed import Testbed, TesterPort
from netrig.testbed.topologies import TOPOLOGIES, list_topologies, topology_options


def status(tb_id: str | None = None) -> list[dict]:
    """Status of one test bed (by id) or of all that have a state file."""
    if tb_id is not None:
        return [Testbed.attach(tb_id).status()]
    out = []
    for s in st.all_states():
        try:
            out.append(Testbed.attach(s.id).status())
        except TestbedError as e:  # another netrig's: listed, not fatal to the others
            out.append({"id": s.id, "topology": s.topology, "status": "foreign", "detached": True,
                        "owner_pid": s.owner_pid, "owner_alive": False, "namespaces": [],
                        "namespaces_present": [], "problems": [str(e)], "foreign": True})
    return out


def down(tb_id: str) -> None:
    """Tear down the test bed ``tb_id`` (e.g. one made by ``netrig testbed up``)."""
    tb = Testbed.attach(tb_id)
    tb.down()


__all__ = ["Testbed", "TesterPort", "TestbedOptions", "TOPOLOGIES", "list_topologies", "topology_options", "clean",
           "status", "down", "CleanReport", "parse_cap", "parse_cpus", "Knobs", "KnobSet", "KnobLayout",
           "applied_knobs"]
