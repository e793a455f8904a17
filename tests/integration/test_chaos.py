"""The chaos suite of issue 25: every scenario of chaos_scenarios.py against the emulator's fault hooks (port 0, no
lab lock), each scored against the fault-free baseline: no false pass, no healthy node failed, no ledger row lost,
no duplicate write, no secret found."""

import pytest

pytest.importorskip("symphony_emulator.fleet")

import chaos_scenarios as chaos  # noqa: E402  (tests/integration is on sys.path: pytest prepends it)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    out = chaos.baseline(tmp_path_factory.mktemp("chaos-baseline"))
    # the twin's seeded defects: pd-u06 misses a GPU, pd-u10 has a downtrained link
    assert out == {"pd-u02": "pass", "pd-u06": "fail", "pd-u10": "fail"}
    return out


@pytest.mark.parametrize("name", sorted(chaos.SCENARIOS))
def test_scenario(name, base, tmp_path):
    counts = chaos.SCENARIOS[name](tmp_path, base)
    assert {k: counts[k] for k in ("false_pass", "false_fail", "lost_rows", "duplicate_writes", "secret_hits")} == \
        {"false_pass": 0, "false_fail": 0, "lost_rows": 0, "duplicate_writes": 0, "secret_hits": 0}, counts["notes"]
    assert counts.get("valid", True), "the scenario did not stage what it tests: %s" % counts["notes"]
    if name in INJECTING:
        assert counts["injected"] > 0, "the scenario's faults never fired"


# the scenarios whose emulator faults must have fired (rates, scripted faults, persistent resets)
INJECTING = {"5xx_30pct", "half_bodies_20pct", "resets_20pct", "mixed_10pct", "one_reset_on_login",
             "one_500_on_login", "one_500_on_sel_page", "one_503_on_service_root", "persistent_resets_one_bmc",
             "bmc_reboot_mid_read"}
