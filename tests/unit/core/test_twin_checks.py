"""Twin checks a new user tripped over: duplicate site/rack names, one switch port cabled twice, a BMC subnet
with host bits, schema errors without the hostname, YAML errors without a line, duplicate YAML keys."""

import json

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core import twin as _twin
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError, TwinError
from ansible_collections.symphony.cluster.plugins.module_utils._core.schema import load_yaml_file

SKUS = ("hgx_h100_supermicro",)


def _node(host, u, serial, mac, port):
    return {"hostname": host, "u": u, "sku": "hgx_h100_supermicro", "serial": serial, "bmc_mac": mac,
            "fabric": [{"rail": k, "leaf": "leaf-rail%d" % k, "port": port} for k in (0, 1)]}


@pytest.fixture
def doc():
    return {"twin_version": 1, "sites": [
        {"name": "s1", "racks": [
            {"name": "r01", "bmc_subnet": "10.10.1.0/24", "nodes": [
                _node("gpu-r01-u02", 2, "S1", "3c:ec:ef:11:02:01", 1),
                _node("gpu-r01-u18", 18, "S2", "3c:ec:ef:11:12:01", 2)]},
            {"name": "r02", "bmc_subnet": "10.10.2.0/24", "nodes": [
                _node("gpu-r02-u02", 2, "S3", "3c:ec:ef:12:02:01", 3)]}]},
        {"name": "s2", "racks": [
            {"name": "r03", "bmc_subnet": "10.10.3.0/24", "nodes": [
                _node("gpu-r03-u02", 2, "S4", "3c:ec:ef:13:02:01", 4)]}]}]}


def _error(data, path="site.twin.yml"):
    with pytest.raises(TwinError) as err:
        _twin.validate_twin(data, path, known_skus=SKUS)
    return str(err.value)


def test_fixture_is_valid(doc):
    twin = _twin.validate_twin(doc, "site.twin.yml", known_skus=SKUS)
    assert twin.sites == {"s1": {"racks": ["r01", "r02"]}, "s2": {"racks": ["r03"]}}
    assert len(twin.links()) == 8


def test_duplicate_site_name(doc):
    doc["sites"][1]["name"] = "s1"
    assert _error(doc) == ("site.twin.yml: $.sites[1].name: site name 's1' is used twice "
                           "(also at $.sites[0].name)")


def test_duplicate_rack_name_in_one_site(doc):
    doc["sites"][0]["racks"][1]["name"] = "r01"
    assert _error(doc) == ("site.twin.yml: $.sites[0].racks[1].name: rack name 'r01' is used twice "
                           "(also at $.sites[0].racks[0].name; racks are inventory groups rack_<name>, "
                           "so a name must be unique in the twin)")


def test_duplicate_rack_name_across_sites(doc):
    doc["sites"][1]["racks"][0]["name"] = "r02"
    assert _error(doc) == ("site.twin.yml: $.sites[1].racks[0].name: rack name 'r02' is used twice "
                           "(also at $.sites[0].racks[1].name; racks are inventory groups rack_<name>, "
                           "so a name must be unique in the twin)")


def test_switch_port_cabled_twice(doc):
    doc["sites"][1]["racks"][0]["nodes"][0]["fabric"][1]["port"] = 2  # gpu-r01-u18 is on leaf-rail1:2
    assert _error(doc) == ("site.twin.yml: $.sites[1].racks[0].nodes[0] (gpu-r03-u02).fabric[1]: "
                           "switch port leaf-rail1:2 is cabled twice (also gpu-r01-u18 at "
                           "$.sites[0].racks[0].nodes[1].fabric[1])")


def test_switch_port_as_string_and_integer_is_the_same_port(doc):
    # links are keyed "<leaf>:<port>", so port 2 and port "2" are one port
    doc["sites"][0]["racks"][1]["nodes"][0]["fabric"][0]["port"] = "2"
    assert _error(doc) == ("site.twin.yml: $.sites[0].racks[1].nodes[0] (gpu-r02-u02).fabric[0]: "
                           "switch port leaf-rail0:2 is cabled twice (also gpu-r01-u18 at "
                           "$.sites[0].racks[0].nodes[1].fabric[0])")


def test_switch_port_cabled_twice_on_one_node(doc):
    doc["sites"][0]["racks"][0]["nodes"][0]["fabric"][1]["leaf"] = "leaf-rail0"
    assert _error(doc) == ("site.twin.yml: $.sites[0].racks[0].nodes[0] (gpu-r01-u02).fabric[1]: "
                           "switch port leaf-rail0:1 is cabled twice (also gpu-r01-u02 at "
                           "$.sites[0].racks[0].nodes[0].fabric[0])")


def test_bmc_subnet_with_host_bits(doc):
    doc["sites"][0]["racks"][0]["bmc_subnet"] = "10.10.1.5/24"
    assert _error(doc) == ("site.twin.yml: $.sites[0].racks[0].bmc_subnet: '10.10.1.5/24' has host bits set; "
                           "the network is 10.10.1.0/24")
    doc["sites"][0]["racks"][0]["bmc_subnet"] = "fd00:10:1::5/64"
    assert _error(doc).endswith("'fd00:10:1::5/64' has host bits set; the network is fd00:10:1::/64")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["sites"][0]["racks"][0]["nodes"][1].update(u="eighteen"),
     "$.sites[0].racks[0].nodes[1] (gpu-r01-u18).u: 'eighteen' is not of type 'integer'"),
    (lambda d: d["sites"][0]["racks"][0]["nodes"][1].pop("serial"),
     "$.sites[0].racks[0].nodes[1] (gpu-r01-u18): 'serial' is a required property"),
    (lambda d: d["sites"][1]["racks"][0]["nodes"][0]["fabric"][1].update(rail=-1),
     "$.sites[1].racks[0].nodes[0] (gpu-r03-u02).fabric[1].rail: -1 is less than the minimum of 0"),
    (lambda d: d["sites"][0]["racks"][1].update(bmc_first_host="ten"),  # not inside a node: no hostname
     "$.sites[0].racks[1].bmc_first_host: 'ten' is not of type 'integer'"),
    (lambda d: d["sites"][0]["racks"][0]["nodes"][0].update(hostname=7),  # no usable hostname to name
     "$.sites[0].racks[0].nodes[0].hostname: 7 is not of type 'string'"),
])
def test_schema_errors_name_the_hostname(doc, mutate, message):
    mutate(doc)
    assert _error(doc) == "site.twin.yml: " + message


def test_yaml_syntax_error_names_file_line_and_column(tmp_path):
    path = tmp_path / "site.twin.yml"
    path.write_text("twin_version: 1\nsites:\n  - name: s1\n    racks:\n      - name: r01\n"
                    "        nodes:\n          - hostname: a\n          hostname: b\n")
    with pytest.raises(TwinError) as err:
        load_yaml_file(str(path), TwinError)
    assert str(err.value) == ("%s: invalid YAML at line 8 column 11: did not find expected '-' indicator "
                              "(while parsing a block collection at line 7 column 11)" % path)


def test_control_character_and_non_utf8_name_the_place(tmp_path):
    path = tmp_path / "site.twin.yml"
    path.write_text('twin_version: 1\nsites:\n  - name: "s\u00e9\u00e9\x01"\n', encoding="utf-8")
    # libyaml counts the offset in UTF-8 bytes (the two é are 4), PyYAML in characters: both are column 15
    with pytest.raises(TwinError, match=r"site.twin.yml: invalid YAML at line 3 column 15: "
                                        r"(control|special) characters are not allowed #x0001$"):
        load_yaml_file(str(path), TwinError)
    path.write_bytes(b"twin_version: 1\nsites: \xff\n")
    with pytest.raises(TwinError, match=r"site.twin.yml: not UTF-8 text: invalid start byte \(byte 0xff\)"):
        load_yaml_file(str(path), TwinError)


NODE = """twin_version: 1
sites:
  - name: s1
    racks:
      - name: r01
        bmc_subnet: 10.10.1.0/24
        nodes:
          - hostname: gpu-r01-u18
            u: 18
            sku: hgx_h100_supermicro
            serial: S1
            u: 19
            bmc_mac: 3c:ec:ef:11:12:01
"""


def test_duplicate_yaml_key_is_an_error(tmp_path):
    path = tmp_path / "site.twin.yml"
    path.write_text(NODE)
    with pytest.raises(TwinError) as err:
        _twin.load_twin(str(path), known_skus=SKUS)
    assert str(err.value) == ("%s: invalid YAML at line 12 column 13: duplicate key 'u' (first at line 9) "
                              "(while constructing a mapping at line 8 column 13)" % path)


def test_duplicate_key_in_json_twin_names_the_line(tmp_path):
    path = tmp_path / "fleet.json"
    path.write_text('{"twin_version": 1,\n "sites": [],\n "twin_version": 1}\n')
    with pytest.raises(TwinError, match=r"fleet.json: invalid YAML at line 3 column 2: duplicate key 'twin_version' "
                                        r"\(first at line 1\)"):
        load_yaml_file(str(path), TwinError)
    path.write_text(json.dumps({"twin_version": 1, "sites": []}))
    assert load_yaml_file(str(path), TwinError) == {"twin_version": 1, "sites": []}


def test_yaml_merge_keys_may_still_override(tmp_path):
    # a key after `<<: *anchor` overrides the merged one on purpose: that is no duplicate
    path = tmp_path / "x.yml"
    path.write_text("base: &b {u: 1, sku: a}\nnode:\n  <<: *b\n  u: 2\n")
    assert load_yaml_file(str(path), TwinError)["node"] == {"u": 2, "sku": "a"}
    path.write_text("base: &b {u: 1}\nnode:\n  <<: *b\n  u: 2\n  u: 3\n")
    with pytest.raises(TwinError, match=r"line 5 column 3: duplicate key 'u' \(first at line 4\)"):
        load_yaml_file(str(path), TwinError)


def test_duplicate_key_in_a_sku_manifest(tmp_path, repo_root):
    text = (repo_root / "skus" / "dgx_h100.yml").read_text()
    (tmp_path / "a.yml").write_text(text + "sku: dgx_h100\n")
    with pytest.raises(ManifestError, match=r"a.yml: invalid YAML at line \d+ column 1: duplicate key 'sku'"):
        _sku.load_manifest(str(tmp_path / "a.yml"))


def test_shipped_yaml_has_no_duplicate_keys(repo_root):
    paths = sorted((repo_root / "skus").glob("*.yml")) + sorted((repo_root / "inventories").rglob("*.yml"))
    assert paths
    for path in paths:
        load_yaml_file(str(path), TwinError)
