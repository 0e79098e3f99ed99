"""RFC 2544 throughput on the ``policer`` test bed lands within 2 % of the configured cap.

On a VM the sender is sometimes descheduled for tens of ms; its catch-up burst then overflows the
policer's bucket and a trial below the cap loses frames. The measurer repeats such trials (lossy
while the tester stalled, ``trial.stall_threshold_ms``), which is what keeps this test honest on a
shared 2-core CI machine.
"""
import os

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]

if os.geteuid() != 0:
    pytest.skip("needs root: builds network namespaces and veth pairs", allow_module_level=True)

try:
    from netrig import run_trial  # noqa: F401
    from netrig.testbed import Testbed  # noqa: F401
except ImportError as e:  # engine or test beds not in this build yet
    pytest.skip(f"engine/test bed API not available: {e}", allow_module_level=True)

from netrig.run.config import config_from_dict
from netrig.run.runner import Runner


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cap_pps", [50_000, 120_000])
def test_throughput_matches_policer_cap(tmp_path, cap_pps):
    cfg = config_from_dict({
        # A 25 ms bucket absorbs the tester's catch-up after VM stalls of up to ~25 ms (seen here: up
        # to 17 ms); over 2 s trials it lets at most 1.25 % more than the cap through.
        "testbed": {"name": "policer", "options": {"cap": f"{cap_pps}pps", "cap_burst": cap_pps // 40}},
        "trial": {"duration_s": 2.0, "drain_s": 0.3},
        "selftest": {"enabled": False},
        "frames": {"sizes": [64]},
        # search 0..1 Mpps (a 64 B 10 G nominal line rate is 14.88 Mpps): 1 % of line, resolution 0.01 % ≈ 1.5 kpps
        "methods": [{"rfc2544_throughput": {"max_rate_pct": 2.0, "initial_rate_pct": 2.0, "resolution_pct": 0.005,
                                            "acceptable_loss_ratio": 0.0}}],
    })
    doc = Runner(cfg, tmp_path / "out").run()
    rate = doc["summary"][0]["results"][0]["headline"]["fps"]
    assert abs(rate - cap_pps) <= 0.02 * cap_pps, f"throughput {rate:.0f} fps vs policer cap {cap_pps} pps"
