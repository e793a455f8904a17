"""$expand as DSP0266 defines it, served by a generated BMC (hgx_h100_supermicro: MaxLevels 2 as its capture)."""

from symphony_emulator.resources import ROOT


def test_root_advertises_expand_as_the_supermicro_capture(make_bmc, mockups):
    import json
    bmc, client = make_bmc()
    eq = client.get(ROOT).json()["ProtocolFeaturesSupported"]["ExpandQuery"]
    with open(mockups / "libredfish-supermicro" / "redfish" / "v1" / "index.json") as fh:
        real = json.load(fh)["ProtocolFeaturesSupported"]["ExpandQuery"]
    assert eq == real == {"ExpandAll": True, "Levels": True, "Links": True, "NoLinks": True, "MaxLevels": 2}


def test_levels_one_expands_members_only(make_bmc):
    bmc, client = make_bmc()
    body = client.get(ROOT + "/Systems/1/Memory", query="$expand=.($levels=1)").json()
    assert len(body["Members"]) == body["Members@odata.count"] == 32
    dimm = body["Members"][0]
    assert dimm["@odata.id"] == ROOT + "/Systems/1/Memory/DIMM1" and dimm["CapacityMiB"] == 65536
    system = client.get(ROOT + "/Systems", query="$expand=.($levels=1)").json()["Members"][0]
    assert system["Model"] == "SYS-821GE-TNHR" and system["Processors"] == {"@odata.id": ROOT + "/Systems/1/Processors"}


def test_levels_two_and_links(make_bmc):
    bmc, client = make_bmc()
    chassis = client.get(ROOT + "/Chassis/1", query="$expand=.($levels=2)").json()
    adapters = chassis["NetworkAdapters"]["Members"]          # collection (level 1), adapters (level 2)
    assert len(adapters) == 10 and adapters[0]["Model"] == "MCX75310AAS-NEAT"
    assert adapters[0]["Ports"] == {"@odata.id": ROOT + "/Chassis/1/NetworkAdapters/NIC1/Ports"}   # level 3: a link
    psus = chassis["PowerSubsystem"]["PowerSupplies"]        # subsystem (1), collection (2), members (3): links
    assert psus["Members"][0] == {"@odata.id": ROOT + "/Chassis/1/PowerSubsystem/PowerSupplies/PSU1"}
    # "." leaves Links alone, "~" expands only Links, "*" both
    assert chassis["Links"]["ComputerSystems"] == [{"@odata.id": ROOT + "/Systems/1"}]
    tilde = client.get(ROOT + "/Chassis/1", query="$expand=~").json()
    assert tilde["Links"]["ComputerSystems"][0]["Model"] == "SYS-821GE-TNHR"
    assert tilde["NetworkAdapters"] == {"@odata.id": ROOT + "/Chassis/1/NetworkAdapters"}
    star = client.get(ROOT + "/Chassis/1/NetworkAdapters", query="$expand=*($levels=2)").json()
    ctrl = star["Members"][9]["Controllers"][0]
    assert star["Members"][9]["Model"] == "MBF2M516C-CECOT"
    assert [p["Id"] for p in ctrl["Links"]["Ports"]] == ["1"] and ctrl["Links"]["PCIeDevices"][0]["Id"] == "NIC10"
    assert ctrl["Links"]["Ports"][0]["CurrentSpeedGbps"] == 100


def test_out_of_range_and_malformed_are_400(make_bmc):
    bmc, client = make_bmc()
    r = client.get(ROOT + "/Systems", query="$expand=.($levels=3)")
    assert r.status == 400 and r.json()["error"]["code"] == "Base.1.22.QueryParameterOutOfRange"
    r = client.get(ROOT + "/Systems", query="$expand=Members")
    assert r.status == 400 and r.json()["error"]["code"] == "Base.1.22.QueryParameterValueFormatError"


def test_expand_off_is_ignored_and_not_advertised(make_bmc):
    bmc, client = make_bmc(faults={"expand_max_levels": 0})
    assert client.get(ROOT).json()["ProtocolFeaturesSupported"]["ExpandQuery"]["NoLinks"] is False
    body = client.get(ROOT + "/Systems/1/Memory", query="$expand=.($levels=1)").json()
    assert body["Members"][0] == {"@odata.id": ROOT + "/Systems/1/Memory/DIMM1"}


def test_paged_collection_keeps_expand_in_next_link(make_bmc):
    bmc, client = make_bmc(faults={"page_size": 10})
    body = client.get(ROOT + "/Systems/1/Memory", query="$expand=.($levels=1)").json()
    assert len(body["Members"]) == 10 and body["Members"][9]["Id"] == "DIMM10"
    assert body["Members@odata.nextLink"] == ROOT + "/Systems/1/Memory?$skip=10&$expand=.($levels=1)"
    nxt = client.get(ROOT + "/Systems/1/Memory", query="$skip=10&$expand=.($levels=1)").json()
    assert nxt["Members"][0]["Id"] == "DIMM11" and "CapacityMiB" in nxt["Members"][0]
