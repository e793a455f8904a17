"""Discovery: ISC dhcpd, Kea memfile CSV and dnsmasq leases; reservations; reachability."""

import json
import socket
import textwrap

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.discovery import (
    discover_node,
    isc_host_reservation,
    kea_reservation,
    render_reservations,
    tcp_reachable,
)
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.leases import (
    LeaseIndex,
    normalise_mac,
    parse_dnsmasq_leases,
    parse_isc_leases,
    parse_kea_csv,
    read_leases,
)
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError, ValidationError

# A dhcpd.leases as ISC dhcpd 4.4 writes it (dhcpd.leases(5)): header comments, authoring-byte-order,
# server-duid, a lease renewed twice (later stanza wins), a freed lease, a dynamic host, a uid with
# escapes and a brace inside a quoted string.
ISC = textwrap.dedent(r'''
    # The format of this file is documented in the dhcpd.leases(5) manual page.
    # This lease file was written by isc-dhcp-4.4.3-P1

    # authoring-byte-order entry is generated, DO NOT DELETE
    authoring-byte-order little-endian;

    server-duid "\000\001\000\001,\237\022\3344\025]\021\"\003";

    lease 10.20.1.57 {
      starts 4 2024/05/02 10:11:12;
      ends 4 2024/05/02 22:11:12;
      cltt 4 2024/05/02 10:11:12;
      binding state active;
      next binding state free;
      rewind binding state free;
      hardware ethernet 3c:ec:ef:a1:00:01;
      uid "\001<\354\357\241\000\001";
      set vendor-class-identifier = "udhcp 1.35.0";
      client-hostname "AMI3CECEFA10001";
    }
    lease 10.20.1.58 {
      starts 4 2024/05/02 09:00:00;
      ends 4 2024/05/02 09:30:00;
      tstp 4 2024/05/02 09:30:00;
      cltt 4 2024/05/02 09:00:00;
      binding state free;
      hardware ethernet 3c:ec:ef:a1:00:02;
      uid "\001<\354\357\241\000\002";
    }
    lease 10.20.1.57 {
      starts 4 2024/05/02 16:11:12;
      ends 5 2024/05/03 04:11:12;
      cltt 4 2024/05/02 16:11:12;
      binding state active;
      next binding state free;
      rewind binding state free;
      hardware ethernet 3c:ec:ef:a1:00:01;
      client-hostname "AMI3CECEFA10001 {odd}";
    }
    lease 10.20.1.60 {
      starts epoch 1714644672; # Thu May 02 10:11:12 2024
      ends never;
      binding state active;
      hardware ethernet 7C:C2:55:0B:AD:01;
    }
    host bmc-static {
      dynamic;
      hardware ethernet 00:25:90:aa:bb:cc;
      fixed-address 10.20.1.99;
    }
''')

KEA = textwrap.dedent('''\
    address,hwaddr,client_id,valid_lifetime,expire,subnet_id,fqdn_fwd,fqdn_rev,hostname,state,user_context,pool_id
    10.20.2.11,b8:3f:d2:00:10:01,01:b8:3f:d2:00:10:01,3600,1714648272,12,0,0,gb200-t01-bmc.,0,,0
    10.20.2.12,b8:3f:d2:00:10:02,,3600,1714648272,12,0,0,,0,{ "ISC": { "client-classes": [ "ALL"&#x2c "KNOWN" ] } },0
    10.20.2.12,b8:3f:d2:00:10:02,,0,1714648272,12,0,0,,0,,0
    10.20.2.13,b8:3f:d2:00:10:03,,3600,1714648272,12,0,0,,1,,0
    10.20.2.14,b8:3f:d2:00:10:04,,3600,1714600000,12,0,0,,2,,0
    10.20.2.15,b8:3f:d2:00:10:05,,3600,1714648272,12,0,0,old-name,0,,0
    10.20.2.15,b8:3f:d2:00:10:05,,7200,1714651872,12,0,0,new-name,0,,0
''')

# dnsmasq.leases: IPv4 lines, then the DHCPv6 section after the duid line.
DNSMASQ = textwrap.dedent('''\
    1714648272 04:3f:72:c0:ff:01 10.20.3.21 dpu-bmc-01 01:04:3f:72:c0:ff:01
    0 04:3f:72:c0:ff:02 10.20.3.22 * *
    1714648272 6-04:3f:72:c0:ff:03 10.20.3.23 other *
    duid 00:01:00:01:2c:9f:12:dc:34:15:5d:11:22:03
    1714648272 1234567 2001:db8::22 dpu-bmc-01 00:01:00:01:2c:9f
''')

NOW = 1714640000.0  # 2024-05-02T08:53:20Z


def test_normalise_mac_accepts_the_forms_twins_and_leases_use():
    assert normalise_mac("3C-EC-EF-A1-00-01") == "3c:ec:ef:a1:00:01"
    assert normalise_mac("3cec.efa1.0001") == "3c:ec:ef:a1:00:01"
    with pytest.raises(ValidationError, match="malformed MAC"):
        normalise_mac("3c:ec:ef:a1:00", where="twin.yml: node x")


def test_isc_later_stanza_wins_and_non_lease_statements_are_skipped():
    leases = parse_isc_leases(ISC, where="dhcpd.leases")
    assert [le.address for le in leases] == ["10.20.1.57", "10.20.1.58", "10.20.1.57", "10.20.1.60"]
    index = LeaseIndex(leases, now=1714666000.0)  # 2024-05-02T16:06:40Z
    lease, note = index.find("3C:EC:EF:A1:00:01")
    assert note == ""
    assert lease.address == "10.20.1.57"
    assert lease.starts == 1714666272.0  # 2024/05/02 16:11:12 UTC: the renewal
    assert lease.hostname == "AMI3CECEFA10001 {odd}"
    assert lease.line > 30
    freed, why = index.find("3c:ec:ef:a1:00:02")
    assert freed is None
    assert why == ("only a stale lease for BMC MAC 3c:ec:ef:a1:00:02: 10.20.1.58 ended 2024-05-02T09:30:00Z"
                   " (state free)")
    forever, _ignored = index.find("7c:c2:55:0b:ad:01")
    assert forever.address == "10.20.1.60" and forever.ends is None and forever.starts == 1714644672.0
    none, why = index.find("00:25:90:aa:bb:cc")  # a host declaration is not a lease
    assert none is None and why == "no DHCP lease for BMC MAC 00:25:90:aa:bb:cc"


def test_isc_errors_name_file_and_line():
    with pytest.raises(ParseError, match=r"dhcpd.leases:2: bad lease time '4 2024-05-02 10:11:12'"):
        parse_isc_leases("lease 10.0.0.1 {\n starts 4 2024-05-02 10:11:12;\n}\n")
    with pytest.raises(ParseError, match=r"unbalanced '\{'"):
        parse_isc_leases("lease 10.0.0.1 {\n binding state active;\n")
    with pytest.raises(ParseError, match=r"'10.0.0.300' is not an IP address"):
        parse_isc_leases("lease 10.0.0.300 {\n}\n")


def test_kea_rows_supersede_and_states_map():
    leases = parse_kea_csv(KEA, where="kea-leases4.csv")
    assert len(leases) == 7
    index = LeaseIndex(leases, now=NOW)
    a, _ignored = index.find("b8:3f:d2:00:10:01")
    assert (a.address, a.subnet_id, a.hostname, a.ends, a.starts) == (
        "10.20.2.11", 12, "gb200-t01-bmc", 1714648272.0, 1714644672.0)
    deleted, why = index.find("b8:3f:d2:00:10:02")
    assert deleted is None and "state deleted" in why
    declined, why = index.find("b8:3f:d2:00:10:03")
    assert declined is None and "state declined" in why
    reclaimed, why = index.find("b8:3f:d2:00:10:04")
    assert reclaimed is None and "state expired" in why
    renewed, _ignored = index.find("b8:3f:d2:00:10:05")
    assert renewed.hostname == "new-name" and renewed.ends == 1714651872.0


def test_kea_escaped_commas_and_bad_header():
    leases = parse_kea_csv(KEA)
    assert leases[1].address == "10.20.2.12"
    with pytest.raises(ParseError, match=r"x.csv:1: header has no 'hwaddr' column"):
        parse_kea_csv("address,expire,state\n10.0.0.1,1,0\n", where="x.csv")
    with pytest.raises(ParseError, match=r"x.csv:2: bad number"):
        parse_kea_csv("address,hwaddr,client_id,valid_lifetime,expire,subnet_id,fqdn_fwd,fqdn_rev,hostname,state\n"
                      "10.0.0.1,aa:bb:cc:dd:ee:ff,,3600,soon,1,0,0,,0\n", where="x.csv")


def test_dnsmasq_v4_only_infinite_and_hwtype_prefix():
    leases = parse_dnsmasq_leases(DNSMASQ)
    assert [(le.address, le.mac, le.hostname, le.ends) for le in leases] == [
        ("10.20.3.21", "04:3f:72:c0:ff:01", "dpu-bmc-01", 1714648272.0),
        ("10.20.3.22", "04:3f:72:c0:ff:02", None, None),
        ("10.20.3.23", "04:3f:72:c0:ff:03", "other", 1714648272.0),
    ]
    expired = LeaseIndex(leases, now=1714700000.0)
    assert expired.find("04:3f:72:c0:ff:01")[0] is None
    assert expired.find("04:3f:72:c0:ff:02")[0].address == "10.20.3.22"  # expiry 0 = infinite
    with pytest.raises(ParseError, match=r"dnsmasq.leases:1: expected"):
        parse_dnsmasq_leases("1714648272 04:3f:72:c0:ff:01\n")


def test_read_leases_errors(tmp_path):
    with pytest.raises(ValidationError, match="unknown lease format 'infoblox'"):
        read_leases(str(tmp_path / "x"), "infoblox")
    with pytest.raises(ParseError, match="cannot read lease file"):
        read_leases(str(tmp_path / "missing.leases"), "isc")
    path = tmp_path / "dnsmasq.leases"
    path.write_text(DNSMASQ)
    assert len(read_leases(str(path), "dnsmasq")) == 3


def test_reservations_isc_and_kea():
    assert isc_host_reservation("dgx-a01", "3C-EC-EF-A1-00-01", "10.20.1.12") == (
        "host dgx-a01-bmc {\n  hardware ethernet 3c:ec:ef:a1:00:01;\n  fixed-address 10.20.1.12;\n}\n")
    assert kea_reservation("dgx-a01", "3c:ec:ef:a1:00:01", "10.20.1.12", subnet_id=12) == {
        "hw-address": "3c:ec:ef:a1:00:01", "ip-address": "10.20.1.12", "hostname": "dgx-a01-bmc", "subnet-id": 12}
    doc = json.loads(render_reservations([{"hostname": "n1", "mac": "3c:ec:ef:a1:00:01", "address": "10.20.1.12"}],
                                         "kea"))
    assert doc == {"reservations": [{"hostname": "n1-bmc", "hw-address": "3c:ec:ef:a1:00:01",
                                     "ip-address": "10.20.1.12"}]}
    with pytest.raises(ValidationError, match="n1: planned BMC address 'x' is not an address"):
        isc_host_reservation("n1", "3c:ec:ef:a1:00:01", "x")


def test_discover_node_finds_lease_and_flags_address_conflict():
    index = LeaseIndex(parse_isc_leases(ISC), now=1714666000.0)
    node = {"hostname": "dgx-a01", "bmc_mac": "3c:ec:ef:a1:00:01", "bmc_address": "10.20.1.60",
            "bmc_subnet": "10.20.1.0/24"}
    out = discover_node(node, index)
    assert out["leased_address"] == "10.20.1.57"
    assert out["conflict"] == "7c:c2:55:0b:ad:01"  # 10.20.1.60 is leased to another BMC
    assert "fixed-address 10.20.1.60;" in out["reservation"]["isc"]
    node["bmc_address"] = "10.20.1.57"
    assert discover_node(node, index)["conflict"] is None


def test_tcp_reachable_open_and_refused():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        assert tcp_reachable("127.0.0.1", port, 2.0) == (True, "")
    finally:
        server.close()
    ok, reason = tcp_reachable("127.0.0.1", port, 2.0)
    assert not ok and reason == "TCP connect to 127.0.0.1:%d failed: connection refused" % port
