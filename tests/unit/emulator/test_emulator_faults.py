"""Fault injection: pagination (R-7, R-26), 5xx (R-13), resets, malformed JSON, latency, slow inventory."""

import json

from symphony_emulator.resources import ROOT

FW = ROOT + "/UpdateService/FirmwareInventory"


def _follow(c, uri):
    pages, members = [], []
    path, query = uri, ""
    while True:
        body = c.get(path, query=query).json()
        pages.append(len(body["Members"]))
        members.extend(m["@odata.id"] for m in body["Members"])
        nxt = body.get("Members@odata.nextLink")
        if not nxt:
            return pages, members, body["Members@odata.count"]
        path, _sep, query = nxt.partition("?")


def test_pagination_plain_pages(make_bmc):
    bmc, c = make_bmc(faults={"page_size": 5})
    full = [m["@odata.id"] for m in bmc.tree[FW]["Members"]]
    pages, members, count = _follow(c, FW)
    assert count == len(full) > 10
    assert members == full                                   # nothing lost, nothing repeated
    assert pages[:-1] == [5] * (len(pages) - 1) and sum(pages) == len(full)


def test_pagination_overlapping_pages_like_dgx(make_bmc):
    bmc, c = make_bmc(faults={"page_size": 5, "overlapping_pages": True})
    full = [m["@odata.id"] for m in bmc.tree[FW]["Members"]]
    pages, members, count = _follow(c, FW)
    n = len(full)
    # each page returns every remaining member and still links on (264, 189, 114, 39 on the DGX)
    assert pages == [n - 5 * i for i in range((n + 4) // 5)]
    assert len(members) > count == n
    assert list(dict.fromkeys(members)) == full               # dedupe by @odata.id recovers the collection


def test_injected_5xx_has_html_body(make_bmc):
    bmc, c = make_bmc(faults={"error_rate": 1.0})
    r = c.get(ROOT + "/Systems")
    assert r.status == 500 and r.headers["Content-Type"] == "text/html" and b"500 - Internal Server Error" in r.body
    assert bmc.stats["injected_errors"] == 1
    assert bmc.handle("GET", "/_emulator/state").status == 200   # control endpoints are never faulted


def test_rates_are_rates(make_bmc):
    bmc, c = make_bmc(faults={"error_rate": 0.2, "seed": 7})
    statuses = [c.get(ROOT + "/Systems").status for _request in range(1000)]
    assert 150 <= statuses.count(500) <= 250 and statuses.count(200) + statuses.count(500) == 1000


def test_connection_reset_and_malformed_json(make_bmc):
    bmc, c = make_bmc(faults={"reset_rate": 1.0})
    assert c.get(ROOT).abort and bmc.stats["injected_resets"] == 1
    bmc, c = make_bmc(faults={"malformed_json_rate": 1.0})
    body = c.get(bmc.spec.S).body
    try:
        json.loads(body)
        raise AssertionError("body parsed")
    except ValueError:
        pass
    assert body.startswith(b'{"@odata.id"')


def test_latency_and_slow_firmware_inventory(make_bmc):
    bmc, c = make_bmc(faults={"latency_ms": 50, "latency_jitter_ms": 20, "slow_firmware_inventory_ms": 700})
    delays = [c.get(bmc.spec.S).delay for _request in range(50)]
    assert all(0.05 <= d <= 0.07 for d in delays) and len(set(delays)) > 1
    assert 0.75 <= c.get(FW).delay <= 0.77


def test_set_faults_at_run_time(make_bmc):
    bmc, c = make_bmc()
    r = bmc.handle("PUT", "/_emulator/faults", body=json.dumps({"page_size": 2}).encode())
    assert r.status == 200 and r.json()["page_size"] == 2
    assert "Members@odata.nextLink" in c.get(FW).json()
    bad = bmc.handle("PUT", "/_emulator/faults", body=b'{"error_rate": 3}')
    assert bad.status == 400 and "error_rate" in bad.json()["error"]


def test_set_a_firmware_version_at_run_time(make_bmc):
    """The fleet audit's drift to find: a component flashed out of band after handoff."""
    bmc, c = make_bmc()
    comp = sorted(bmc.state.versions)[0]
    r = bmc.handle("PUT", "/_emulator/firmware", body=json.dumps({"component": comp, "version": "0.0.1"}).encode())
    assert r.status == 200 and r.json()["firmware"][comp] == "0.0.1"
    listed = [c.get(m["@odata.id"]).json() for m in c.get(FW).json()["Members"]]
    assert "0.0.1" in [m.get("Version") for m in listed]
    bad = bmc.handle("PUT", "/_emulator/firmware", body=b'{"component": "nope", "version": "1"}')
    assert bad.status == 400 and "unknown firmware component 'nope'" in bad.json()["error"]
    assert bmc.handle("PUT", "/_emulator/firmware", body=b"{}").status == 400
