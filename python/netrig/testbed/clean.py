"""``netrig testbed clean``: remove what netrig left behind after a crash.

What it removes (and nothing else):

1. every test bed with a state file in ``/run/netrig/testbeds/`` whose owning process is dead (a crash
   leftover): its namespaces (with their interfaces and nftables tables) and its changed global
   sysctls (restored), then the state file;
2. every network namespace called ``nr<4 hex>-<role>`` that no state file claims (a crash between
   creating a namespace and recording it cannot happen — the state file is written first — so these
   come from older runs or deleted state files);
3. every host-namespace interface called ``nr<4 hex>-<suffix>`` that no state file claims (netrig never
   creates interfaces in the host namespace; this only catches damage).

It keeps test beds whose owner process is alive and test beds made by ``netrig testbed up``
(detached; remove them with ``netrig testbed down ID``), unless ``force=True``.
"""
from __future__ import annotations

import os

from netrig.testbed import state as st
from netrig.testbed.links import read_links
from netrig.testbed.nsthread import kill_in_netns, remove_netns
from netrig.testbed.testbed import teardown_state


def clean(force: bool = False) -> st.CleanReport:
    rep = st.CleanReport([], [], [], [], [])
    claimed: set[str] = set()
    for s in st.all_states():
        alive = st.owner_alive(s)
        if (alive or s.detached) and not force:
            why = f"owner pid {s.owner_pid} alive" if alive else "detached (netrig testbed up)"
            rep.kept.append(f"testbed {s.id} ({why})")
            claimed.update(s.namespaces)
            claimed.update(i.ifname for i in s.interfaces)
            continue
        left = teardown_state(s)
        if left:
            rep.errors += left
        else:
            rep.removed_testbeds.append(s.id)
            rep.removed_namespaces += list(s.namespaces)
    try:
        names = os.listdir("/run/netns")
    except FileNotFoundError:
        names = []
    for n in names:
        if st.NAME_RE.match(n) and n not in claimed:
            try:
                kill_in_netns(n)
                remove_netns(n)
                rep.removed_namespaces.append(n)
            except Exception as e:
                rep.errors.append(f"netns {n}: {e}")
    from pyroute2 import IPRoute  # ~0.2 s to import: only when there is something to clean

    with IPRoute() as ipr:
        for name, link in read_links(None).items():
            if name and st.NAME_RE.match(name) and name not in claimed:
                try:
                    ipr.link("del", index=link.index)
                    rep.removed_links.append(name)
                except Exception as e:
                    rep.errors.append(f"link {name}: {e}")
    return rep
