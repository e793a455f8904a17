"""Real captures are served byte-identical, with the capture artefacts of mockups/README.md honoured."""

import json

import pytest

from symphony_emulator.capture import CaptureBMC

CAPTURES = ["libredfish-nvidia_viking", "libredfish-supermicro", "libredfish-dell", "libredfish-nvidia_gb200",
            "cray-EX235a", "dmtf-public-rackmount1"]


@pytest.mark.parametrize("name", CAPTURES)
def test_every_file_of_a_capture_is_served_byte_identical(mockups, name):
    root = mockups / name
    bmc = CaptureBMC(root)
    checked = 0
    for path in sorted(root.rglob("index.json")):
        rel = path.parent.relative_to(root).as_posix()
        url, _sep, query = ("/" + rel).partition("?")
        url = url.replace("_0x23_", "#")
        reply = bmc.handle("GET", url, query)
        assert reply.status == 200, url
        assert reply.body == path.read_bytes(), url
        checked += 1
    assert checked >= 70


def test_query_string_pages_of_the_dgx(mockups):
    bmc = CaptureBMC(mockups / "libredfish-nvidia_viking")
    sensors = "/redfish/v1/Chassis/DGX/Sensors"
    pages = []
    query = ""
    while True:
        body = json.loads(bmc.handle("GET", sensors, query).body)
        pages.append(len(body["Members"]))
        nxt = body.get("Members@odata.nextLink")
        if not nxt:
            break
        query = nxt.partition("?")[2]
    assert body["Members@odata.count"] == 264
    assert pages == [264, 189, 114, 39]     # R-26, exactly as captured


def test_hash_encoded_ids_trailing_slash_and_files(mockups):
    dell = CaptureBMC(mockups / "libredfish-dell")
    fru = "/redfish/v1/Chassis/System.Embedded.1/Oem/Dell/DellAssembly/DIMM.Socket.B4#FRU"
    assert dell.handle("GET", fru).body == (mockups / "libredfish-dell" / fru.lstrip("/").replace("#", "_0x23_")
                                            / "index.json").read_bytes()
    assert dell.handle("GET", "/redfish/v1/Systems/").body == dell.handle("GET", "/redfish/v1/Systems").body
    smc = CaptureBMC(mockups / "libredfish-supermicro")
    reg = smc.handle("GET", "/registries/BiosAttributeRegistry.1.0.0.json")
    assert reg.status == 200 and json.loads(reg.body)["RegistryEntries"]
    rack = CaptureBMC(mockups / "dmtf-public-rackmount1")
    assert rack.handle("GET", "/redfish/v1/Registries/Base.1.5.0.json").body == \
        (mockups / "dmtf-public-rackmount1/redfish/v1/Registries/Base.1.5.0.json").read_bytes()


def test_read_only_and_confined(mockups):
    bmc = CaptureBMC(mockups / "libredfish-supermicro")
    assert bmc.handle("PATCH", "/redfish/v1/Systems/1", body=b"{}").status == 405
    assert bmc.handle("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", body=b"{}").status == 405
    assert bmc.handle("GET", "/../../../../etc/passwd").status == 404
    assert bmc.handle("GET", "/redfish/v1/NoSuchThing").status == 404
    login = bmc.handle("POST", "/redfish/v1/SessionService/Sessions", body=b'{"UserName": "a", "Password": "b"}')
    assert login.status == 201 and login.headers["X-Auth-Token"]


@pytest.mark.parametrize("url", ["/redfish/v1/chassis/1/pciedevices/GPU1", "/redfish/v1/Chassis/1/PCIeDevices/GPU1/",
                                 "/REDFISH/V1/CHASSIS/1/PCIEDEVICES/gpu1//"])
def test_paths_in_any_case_and_with_trailing_slashes(mockups, url):
    # real BMCs answer a link whatever its case and trailing slash (issue 15): a test tree must too
    bmc = CaptureBMC(mockups / "libredfish-supermicro")
    reply = bmc.handle("GET", url)
    assert reply.status == 200, url
    assert reply.body == (mockups / "libredfish-supermicro/redfish/v1/Chassis/1/PCIeDevices/GPU1/index.json").read_bytes()
    assert bmc.handle("GET", "/redfish/v1/chassis/1/NoSuchThing").status == 404
