"""Fixtures for test-bed tests: a leak check on everything a test bed created."""
from __future__ import annotations

import pytest
from testbed_helpers import ROOT, assert_gone, host_links, host_nft

from netrig.testbed import state as st


@pytest.fixture
def tb_ids():
    """Append every test-bed id a test creates; afterwards each must be completely gone."""
    ids: list[str] = []
    links_before, nft_before = (host_links(), host_nft()) if ROOT else (set(), "")
    yield ids
    for i in ids:
        assert_gone(i)
    if ROOT:
        assert host_nft() == nft_before, "the host's nftables ruleset changed"
        new = {n for n in host_links() - links_before if st.NAME_RE.match(n)}
        assert not new, f"links left in the host namespace: {new}"
