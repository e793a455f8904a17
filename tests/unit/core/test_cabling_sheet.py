"""The cabling plan in the twin: schema additions, the CSV cabling sheet importer and its errors naming row and
column."""

import copy

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.cabling_sheet import apply_cabling, read_cabling_sheet
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import TwinError
from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import validate_twin

SHEET = """hostname,rack,nic,hca_port,pci,rail,gpu_local,switch,switch_port,width,speed,nvlink_domain
gpu-r03-u02,r03,mlx5_0,1,0000:1a:00.0,0,yes,leaf-r03-rail0,17,4X,NDR,nvl72-r03
gpu-r03-u02,r03,mlx5_1,1,0000:3c:00.0,1,yes,leaf-r03-rail1,17,4X,NDR,

gpu-r03-u04,r03,mlx5_0,1,,0,yes,leaf-r03-rail0,18,,,nvl72-r03
"""


def twin_doc():
    node = {"u": 2, "sku": "gb200_nvl_tray", "serial": "S1", "bmc_mac": "3c:ec:ef:00:00:01"}
    return {"twin_version": 1, "sites": [{
        "name": "s1",
        "fabric": {"rail_optimised": True, "switches": [
            {"name": "leaf-r03-rail0", "tier": "leaf", "rail": 0, "uplinks": ["spine1"]},
            {"name": "leaf-r03-rail1", "tier": "leaf", "rail": 1, "uplinks": ["spine1"]},
            {"name": "spine1", "tier": "spine"}]},
        "racks": [{"name": "r03", "bmc_subnet": "10.0.3.0/24", "nodes": [
            dict(node, hostname="gpu-r03-u02"),
            dict(node, hostname="gpu-r03-u04", u=4, serial="S2", bmc_mac="3c:ec:ef:00:00:02")]}]}]}


def test_sheet_imports_into_a_twin_that_validates():
    plan = read_cabling_sheet(SHEET)
    assert plan["gpu-r03-u02"]["links"][0] == {"leaf": "leaf-r03-rail0", "port": 17, "rail": 0, "nic": "mlx5_0",
                                               "hca_port": 1, "pci": "0000:1a:00.0", "gpu_local": True,
                                               "width": "4X", "speed": "NDR"}
    assert plan["gpu-r03-u02"]["nvlink_domain"] == "nvl72-r03" and plan["gpu-r03-u04"]["rows"] == [5]
    doc = twin_doc()
    assert apply_cabling(doc, plan) == ["gpu-r03-u02", "gpu-r03-u04"]
    twin = validate_twin(doc, "site.twin.yml")
    assert twin.nodes["gpu-r03-u02"]["nvlink_domain"] == "nvl72-r03"
    assert len(twin.nodes["gpu-r03-u02"]["fabric"]) == 2
    assert twin.fabric["s1"]["rail_optimised"] is True
    assert twin.fabric["s1"]["switches"]["leaf-r03-rail1"]["uplinks"] == ["spine1"]


@pytest.mark.parametrize("edit, where, words", [
    (lambda s: s.replace("switch_port,", "port,", 1), "cabling.csv row 1", "no column switch_port"),
    (lambda s: s.replace("leaf-r03-rail1,17", ",17"), "cabling.csv row 3, column switch", "the switch cell is empty"),
    (lambda s: s.replace("0000:3c:00.0", "3c:00"), "cabling.csv row 3, column pci", "does not match"),
    (lambda s: s.replace(",1,yes,leaf-r03-rail1", ",one,yes,leaf-r03-rail1"), "cabling.csv row 3, column rail",
     "is not a whole number"),
    (lambda s: s.replace("4X,NDR,nvl72-r03\n", "3X,NDR,nvl72-r03\n", 1), "cabling.csv row 2, column width", "3X"),
    (lambda s: s.replace("gpu-r03-u04,r03,mlx5_0,1,,", "gpu-r03-u04,r03,,1,,"), "cabling.csv row 5, column nic",
     "names no node port"),
    (lambda s: s.replace(",yes,leaf-r03-rail1", ",maybe,leaf-r03-rail1"), "cabling.csv row 3, column gpu_local",
     "not yes or no"),
    (lambda s: s.replace("18,,,nvl72-r03", "18,,,nvl72-r04"), "cabling.csv row 5, column nvlink_domain",
     "an earlier row"),
])
def test_sheet_errors_name_row_and_column(edit, where, words):
    text = edit(SHEET).replace("gpu-r03-u04,r03", "gpu-r03-u02,r03") if "nvlink" in where else edit(SHEET)
    with pytest.raises(TwinError) as err:
        read_cabling_sheet(text)
    assert err.value.where == where and words in err.value.message


def test_apply_names_the_row_of_an_unknown_host_or_a_wrong_rack():
    plan = read_cabling_sheet(SHEET.replace("gpu-r03-u04,r03", "gpu-r09-u04,r03"))
    with pytest.raises(TwinError) as err:
        apply_cabling(twin_doc(), plan)
    assert err.value.where == "cabling.csv row 5, column hostname" and "gpu-r09-u04" in err.value.message
    plan = read_cabling_sheet(SHEET.replace("gpu-r03-u04,r03", "gpu-r03-u04,r04"))
    with pytest.raises(TwinError) as err:
        apply_cabling(twin_doc(), plan)
    assert err.value.where == "cabling.csv row 5, column rack"


def test_twin_refuses_a_node_port_cabled_twice_and_an_uplink_to_no_spine():
    doc = twin_doc()
    apply_cabling(doc, read_cabling_sheet(SHEET.replace("mlx5_1,1,0000:3c:00.0", "mlx5_0,1,0000:3c:00.0")))
    with pytest.raises(TwinError) as err:
        validate_twin(doc, "t.yml")
    assert "node port mlx5_0 port 1 is cabled twice" in err.value.message
    doc = twin_doc()
    doc["sites"][0]["fabric"]["switches"][0]["uplinks"] = ["leaf-r03-rail1"]
    with pytest.raises(TwinError) as err:
        validate_twin(copy.deepcopy(doc), "t.yml")
    assert "is not a spine switch of this site" in err.value.message
