"""The symphony.cluster.twin inventory plugin: verify_file, groups, gate groups, constructed options, cache."""

import json
import os
import shutil

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.inventory import twin as twin_plugin
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as _gate
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from timescale import scaled

NAME = "symphony.cluster.twin"


@pytest.fixture(scope="module")
def plugin_factory():
    """Register the plugin's options with Ansible's config the way the plugin loader does, then build plugins."""
    from ansible import constants as C
    from ansible.plugins.loader import fragment_loader, init_plugin_loader, inventory_loader
    from ansible.utils.plugin_docs import add_fragments

    init_plugin_loader()
    doc = yaml.safe_load(twin_plugin.DOCUMENTATION)
    add_fragments(doc, twin_plugin.__file__, fragment_loader=fragment_loader, is_module=False)
    C.config.initialize_plugin_configuration_definitions("inventory", NAME, doc["options"])

    def make():
        plugin = twin_plugin.InventoryModule()
        inventory_loader._update_object(obj=plugin, name=NAME, path=twin_plugin.__file__, resolved=NAME)
        return plugin
    return make


@pytest.fixture
def parse(plugin_factory):
    from ansible.inventory.data import InventoryData
    from ansible.parsing.dataloader import DataLoader

    def run(path, cache=True):
        inventory = InventoryData()
        plugin = plugin_factory()
        plugin.parse(inventory, DataLoader(), str(path), cache=cache)
        if getattr(plugin, "_cache", None):
            plugin.update_cache_if_changed()  # what InventoryManager.parse_source does after parse()
        return inventory
    return run


def fleet_twin():
    """The 18-node fleet these tests expect: site demo, racks r01 (8 nodes) and r02 (8 nodes + 2 spares),
    hgx_h100_supermicro, BMC subnets 10.10.<rack>.0/24 from U (bmc_first_host 10), 8 fabric rails.
    Built here rather than read from inventories/demo so the demo can change without breaking these tests."""
    racks, port = [], 0
    for r, rack in ((1, "r01"), (2, "r02")):
        nodes = []
        for u in [2 + 5 * i for i in range(8)] + ([42, 47] if rack == "r02" else []):
            port += 1
            node = {"hostname": "gpu-%s-u%02d" % (rack, u), "u": u, "sku": "hgx_h100_supermicro",
                    "serial": "C8010MM21A3%04d" % (r * 100 + u), "asset_tag": "DEMO-%s-U%02d" % (rack.upper(), u),
                    "bmc_mac": "3c:ec:ef:%02x:%02x:01" % (0x10 + r, u), "inband_address": "10.20.%d.%d" % (r, 10 + u),
                    "fabric": [{"rail": k, "leaf": "leaf-rail%d" % k, "port": port, "nic": "mlx5_%d" % k}
                               for k in range(8)]}
            if u in (42, 47):
                node["spare"] = True
            nodes.append(node)
        racks.append({"name": rack, "location": "demo hall A, row 1, position %d" % r,
                      "bmc_subnet": "10.10.%d.0/24" % r, "bmc_first_host": 10, "nodes": nodes})
    return {"twin_version": 1, "sites": [{"name": "demo", "racks": racks}]}


@pytest.fixture
def demo(tmp_path, repo_root):
    """An inline twin inventory source in tmp_path with a ledger there (the user's default ledger is never read)."""
    data = dict({"plugin": NAME, "profile": "lab", "strict": False,
                 "keyed_groups": [{"key": "symphony_twin.fabric | map(attribute='leaf') | list", "prefix": "fabric"}],
                 "sku_dir": str(repo_root / "skus"), "ledger": str(tmp_path / "ledger.sqlite")}, **fleet_twin())

    def write(**changes):
        doc = dict(data, **changes)
        path = tmp_path / "demo.twin.yml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path
    return write


def _members(inventory, group):
    return sorted(h.name for h in inventory.groups[group].get_hosts())


def test_verify_file(plugin_factory, tmp_path):
    plugin = plugin_factory()
    for name, ok in (("site.twin.yml", True), ("site.twin.yaml", True), ("site.yml", False), ("twin.yml", False)):
        path = tmp_path / name
        path.write_text("plugin: symphony.cluster.twin\n")
        assert plugin.verify_file(str(path)) is ok, name


def test_demo_groups_and_hostvars(parse, demo, tmp_path, repo_root):
    inventory = parse(demo())
    assert len(inventory.hosts) == 18
    assert _members(inventory, "spares") == ["gpu-r02-u42", "gpu-r02-u47"]
    assert len(_members(inventory, "rack_r01")) == 8 and len(_members(inventory, "rack_r02")) == 10
    assert len(_members(inventory, "site_demo")) == len(_members(inventory, "sku_hgx_h100_supermicro")) == 18
    assert len(_members(inventory, "stage_racked")) == 18  # empty ledger: nobody gated yet
    assert len(_members(inventory, "fabric_leaf_rail3")) == 18  # keyed_groups from the demo file
    host = inventory.get_host("gpu-r01-u12")
    hostvars = host.get_vars()
    assert hostvars["symphony_bmc_address"] == "10.10.1.22" and hostvars["ansible_host"] == "10.20.1.22"
    assert hostvars["symphony_twin"]["serial"] == "C8010MM21A30112" and hostvars["symphony_sku"] == "hgx_h100_supermicro"
    # shared values are group variables: the profile, the not-yet-gated defaults and the ledger read on `all`
    assert inventory.groups["all"].get_vars() == {"symphony_profile": "lab", "symphony_stage": "racked",
                                                  "symphony_gate": None, "symphony_gate_reason": "",
                                                  "symphony_passed": [],
                                                  "symphony_ledger": str(tmp_path / "ledger.sqlite"),
                                                  "symphony_inventory_ledger": str(tmp_path / "ledger.sqlite"),
                                                  "symphony_sku_dir": str(repo_root / "skus")}
    expected = inventory.groups["sku_hgx_h100_supermicro"].get_vars()["symphony_expected"]
    assert expected["system"]["model"] == "SYS-821GE-TNHR" and expected["bom"]["gpus"]["count"] == 8


def test_gate_groups_come_from_the_ledger(parse, demo, ledger_url):
    """On both backends: the plugin reads the gates of a PostgreSQL ledger URL as it reads a SQLite file."""
    ledger = ledger_url
    rec = {"ledger": ledger, "optional": [], "waive": []}
    _gate_ops.gate_record(dict(rec, node="gpu-r01-u02", stage="pre_deployment", run_id="r1",
                               checks=[{"name": "bmc_login", "status": "pass"}]), False)
    _gate_ops.gate_record(dict(rec, node="gpu-r01-u02", stage="provisioning", run_id="r2",
                               checks=[{"name": "firmware", "status": "fail", "reason": "BIOS 1.3 != 1.4"}]), False)
    unreachable = [{"name": "bmc_reachable", "status": "fail", "reason": "timed out"},
                   {"name": "bmc_login", "status": "pass", "depends_on": ["bmc_reachable"]}]
    _gate_ops.gate_record(dict(rec, node="gpu-r01-u07", stage="pre_deployment", run_id="r3", checks=unreachable),
                          False)
    inventory = parse(demo(ledger=ledger))
    assert _members(inventory, "stage_provisioning") == ["gpu-r01-u02"]
    assert _members(inventory, "stage_pre_deployment") == ["gpu-r01-u07"]
    assert _members(inventory, "gate_fail") == ["gpu-r01-u02", "gpu-r01-u07"]
    # passed_<stage>: every stage whose current gate passed, what the next stage's playbook targets
    assert _members(inventory, "passed_pre_deployment") == ["gpu-r01-u02"]
    assert "passed_provisioning" not in inventory.groups
    assert len(_members(inventory, "stage_racked")) == 16
    hostvars = inventory.get_host("gpu-r01-u02").get_vars()
    assert (hostvars["symphony_stage"], hostvars["symphony_gate"]) == ("provisioning", "fail")
    assert hostvars["symphony_gate_reason"] == "firmware: BIOS 1.3 != 1.4"
    assert inventory.groups["all"].get_vars()["symphony_inventory_ledger"] == ledger


def test_a_postgresql_ledger_not_created_yet_reads_empty_and_stays_uncreated(parse, demo, pg_ledger):
    """Reading an inventory never writes: a PostgreSQL ledger whose tables do not exist yet is not migrated."""
    inventory = parse(demo(ledger=pg_ledger))
    assert len(_members(inventory, "stage_racked")) == 18
    assert not _ledger.ledger_exists(pg_ledger)


def test_promoted_spare_leaves_the_pool_and_joins_validation_reruns(parse, demo, tmp_path):
    """A spare cluster_validation promoted (ledger event) is in service: out of ``spares``, in the rerun's target."""
    ledger = _ledger.open_ledger(str(tmp_path / "ledger.sqlite"))
    for node in ("gpu-r01-u02", "gpu-r02-u42"):
        ledger.record_gate(_gate.GateVerdict(node, "burn_in", "pass", "all required checks passed"), "b1")
    ledger.record_gate(_gate.GateVerdict("gpu-r01-u02", "cluster_validation", "fail", "hot GPU 7"), "cv1")
    ledger.record_gate(_gate.GateVerdict("gpu-r02-u42", "cluster_validation", "pass", "MFU met"), "cv1")
    ledger.record_event("gpu-r02-u42", "spare_promoted", {"replaces": "gpu-r01-u02", "attempt": 1})
    ledger.close()
    inventory = parse(demo())
    assert _members(inventory, "spares") == ["gpu-r02-u47"]
    assert _members(inventory, "promoted_spares") == ["gpu-r02-u42"]
    ledger = _ledger.open_ledger(str(tmp_path / "ledger.sqlite"))
    ledger.record_event("gpu-r02-u47", "spare_promoted", {"replaces": "gpu-r01-u07", "attempt": 1})
    ledger.close()
    emptied = parse(demo())
    assert _members(emptied, "spares") == []  # every spare promoted: the group stays, empty
    assert inventory.get_host("gpu-r02-u42").get_vars()["symphony_promoted_for"] == "gpu-r01-u02"
    assert "symphony_promoted_for" not in inventory.get_host("gpu-r02-u47").get_vars()
    # cluster_validation.yml's default target, stage_burn_in:stage_cluster_validation:stage_fleet_audit:&gate_pass:!spares:
    # the promoted spare is in, the evicted node is out.
    target = (set(_members(inventory, "stage_cluster_validation")) & set(_members(inventory, "gate_pass"))) \
        - set(_members(inventory, "spares"))
    assert target == {"gpu-r02-u42"}


def test_compose_groups_keyed_groups(parse, demo):
    inventory = parse(demo(
        compose={"bmc_url": "'https://' ~ symphony_bmc_address", "gpu_count": "symphony_expected.bom.gpus.count"},
        groups={"upper_half": "symphony_twin.u > 20"},
        keyed_groups=[{"key": "symphony_twin.rack_location", "prefix": "loc"}]))
    hostvars = inventory.get_host("gpu-r02-u47").get_vars()
    assert hostvars["bmc_url"] == "https://10.10.2.57" and hostvars["gpu_count"] == 8
    assert len(_members(inventory, "upper_half")) == 8 + 2  # u22..u37 in both racks, plus the two spares
    assert "loc_demo_hall_A__row_1__position_1" in inventory.groups


def test_strict_reports_bad_expressions(parse, demo):
    from ansible.errors import AnsibleError
    parse(demo(compose={"x": "symphony_nope.y"}))  # not strict: skipped
    with pytest.raises(AnsibleError, match="Could not set x for host"):
        parse(demo(compose={"x": "symphony_nope.y"}, strict=True))


def test_separate_twin_file_and_cache(parse, tmp_path, repo_root):
    (tmp_path / "fleet.yml").write_text(yaml.safe_dump(fleet_twin()))
    source = tmp_path / "cached.twin.yml"
    source.write_text(yaml.safe_dump({
        "plugin": NAME, "twin": "fleet.yml", "sku_dir": str(repo_root / "skus"),
        "ledger": str(tmp_path / "ledger.sqlite"), "cache": True, "cache_plugin": "ansible.builtin.jsonfile",
        "cache_connection": str(tmp_path / "cache")}))
    assert len(parse(source, cache=False).hosts) == 18  # cache=False: refresh and write the cache
    assert os.listdir(tmp_path / "cache")
    os.remove(tmp_path / "fleet.yml")  # served from the cache now
    assert len(parse(source, cache=True).hosts) == 18
    shutil.rmtree(tmp_path / "cache")
    from ansible.errors import AnsibleParserError
    with pytest.raises(AnsibleParserError, match="fleet.yml: cannot read file"):
        parse(source, cache=True)


def test_bad_twin_fails_whole_source(parse, demo):
    from ansible.errors import AnsibleParserError
    path = demo()
    data = yaml.safe_load(path.read_text())
    data["sites"][0]["racks"][1]["nodes"][3]["sku"] = "hgx_b300"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(AnsibleParserError) as err:
        parse(path)
    assert "$.sites[0].racks[1].nodes[3] (gpu-r02-u17).sku: unknown SKU 'hgx_b300'" in str(err.value)
    data["sites"][0]["racks"][1]["nodes"][3]["sku"] = "hgx_h100_supermicro"
    data["site"] = "typo"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(AnsibleParserError, match="unknown top-level key.s. site: neither an option"):
        parse(path)


def test_yaml_syntax_error_says_line_and_column(parse, demo):
    """Ansible's own YAML error has no position; the plugin's says where the twin breaks."""
    from ansible.errors import AnsibleParserError
    path = demo()
    lines = path.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if "hostname: gpu-r01-u02" in line)
    lines[row] = lines[row].replace("hostname: gpu-r01-u02", "hostname: [gpu-r01-u02")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AnsibleParserError, match=r"demo.twin.yml: invalid YAML at line %d column \d+" % (row + 2)):
        parse(path)


def test_ansible_inventory_graph_on_the_demo(repo_root, tmp_path):
    """The documented command on the shipped demo twin, end to end (`ansible-inventory -i ... --list`)."""
    demo_twin = yaml.safe_load((repo_root / "inventories" / "demo" / "demo.twin.yml").read_text())
    nodes = [n for site in demo_twin["sites"] for rack in site["racks"] for n in rack["nodes"]]
    spares = [n["hostname"] for n in nodes if n.get("spare")]
    import subprocess
    import sys
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(repo_root / "build" / "collections"),
               SYMPHONY_LEDGER=str(tmp_path / "ledger.sqlite"))
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i",
                          "inventories/demo/demo.twin.yml", "--list"], cwd=repo_root, env=env,
                         capture_output=True, text=True, timeout=scaled(120), check=False)
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    # a spare the demo promoted (when build/demo has run) is in promoted_spares instead
    promoted = listing.get("promoted_spares", {}).get("hosts", [])
    assert spares and sorted(listing.get("spares", {}).get("hosts", []) + promoted) == sorted(spares)
    # the demo file names its own ledger (build/demo, written by make demo): each node is in exactly one stage
    staged = [h for name, group in listing.items() if name.startswith("stage_") for h in group.get("hosts", [])]
    assert sorted(staged) == sorted(n["hostname"] for n in nodes)
    serial = listing["_meta"]["hostvars"][nodes[0]["hostname"]]["symphony_twin"]["serial"]
    # --list marks plugin data that is not a trusted template as unsafe, so it stays unsafe when re-read
    assert serial in (nodes[0]["serial"], {"__ansible_unsafe": nodes[0]["serial"]})
    assert "Failed to parse" not in out.stderr


def test_unknown_profile_fails_instead_of_falling_back(parse, demo):
    from ansible.errors import AnsibleParserError
    with pytest.raises(AnsibleParserError, match="profile: SKU 'hgx_h100_supermicro' declares no profile 'labb' "
                                                 r"\(declared: lab, production\)"):
        parse(demo(profile="labb"))
    assert parse(demo(profile="production")).groups["all"].get_vars()["symphony_profile"] == "production"


def test_handed_off_nodes_stay_handed_off_when_their_fleet_audit_fails(parse, demo, tmp_path):
    ledger = str(tmp_path / "ledger.sqlite")
    rec = {"ledger": ledger, "optional": [], "waive": []}
    ok = [{"name": "c", "status": "pass"}]
    for stage in ("pre_deployment", "provisioning", "burn_in", "cluster_validation"):
        _gate_ops.gate_record(dict(rec, node="gpu-r01-u02", stage=stage, run_id=stage, checks=ok), False)
    _gate_ops.gate_record(dict(rec, node="gpu-r01-u02", stage="fleet_audit", run_id="a1",
                               checks=[{"name": "software_drift", "status": "fail", "reason": "driver drift"}]), False)
    inventory = parse(demo())
    assert _members(inventory, "handed_off") == ["gpu-r01-u02"]
    assert _members(inventory, "passed_cluster_validation") == ["gpu-r01-u02"]
    assert inventory.get_host("gpu-r01-u02").get_vars()["symphony_stage"] == "fleet_audit"
