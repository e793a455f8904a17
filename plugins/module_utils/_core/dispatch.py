# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The technician's dispatch list: its rows (site, rack, U, hostname, serial, stage, check, reason, remediation)
and the one writer of its CSV and JSON files.

A stage writes this run's list (:func:`write_dispatch`) and, from the ledger, the fleet's current list over every
stage (:func:`write_dispatch_latest`); the handoff report shows the same list (:func:`dispatch_list`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading
import time
from typing import Any, Iterable, Mapping, Optional

from .errors import FAULT_CONTROLLER, ReportError
from .gate import PASS, STAGES


Row = dict[str, Any]
DISPATCH_FIELDS = ("site", "rack", "u", "hostname", "serial", "stage", "check", "reason", "remediation")


def gate_rows(twin: Mapping[str, Any], host: str, stage: str, failing: Iterable[str],
              results: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """Dispatch rows for one node's closed gate: the checks that closed it.

    ``failing``: the verdict's ``failing`` names; ``results``: ``{check: CheckResult dict}``.  A ``fail`` or
    ``not_run`` among them is the root cause; ``blocked`` ones are listed only when the gate names nothing else,
    and then only the one(s) a fault blocked (``evidence["fault"]``) where there is one.  Only hardware findings
    reach a technician: a gate blocked by a controller-side fault (TLS trust, CA file, DNS, credentials:
    ``evidence["fault"] == "controller"``, DESIGN.md "Verdict rules") yields no row; the operator's remedy is in
    the ledger and the run's output.  Rows have :data:`DISPATCH_FIELDS`; ``twin`` labels them (site, rack, U,
    serial).
    """
    picked = [results[c] for c in failing if c in results]
    root = [r for r in picked if r["status"] in ("fail", "not_run")]
    if not root:
        if any(_fault(r) == FAULT_CONTROLLER for r in results.values()):
            return []
        root = [r for r in picked if _fault(r)]
    label = {"site": twin.get("site"), "rack": twin.get("rack"), "u": twin.get("u"), "serial": twin.get("serial")}
    rows = []
    for r in root or picked:
        acts = (r.get("evidence") or {}).get("actions") if r["status"] == "fail" else None
        if acts:
            rows.extend(_action_rows(label, host, stage, r, acts))
            continue
        rows.append(dict(label, hostname=host, stage=stage, check=r["check"], reason=r["reason"],
                         remediation=r["remediation"] or ("rerun the stage once %s" % r["reason"]
                                                          if r["status"] == "not_run" else "see the reason")))
    return rows


def _action_rows(label: Mapping[str, Any], host: str, stage: str, result: Mapping[str, Any],
                 acts: Iterable[Mapping[str, Any]]) -> list[Row]:
    """One row per technician action a check's evidence lists (``{hosts, ports, kind, action}``, the cabling
    check's): an action across two nodes (a swapped pair) is named ``"a <-> b"`` and is the same row from both
    nodes' results, which :func:`merge_rows` keeps once.  A failed NVLink domain has no cable action: its own row."""
    rows = [dict(label, hostname=" <-> ".join(a.get("hosts") or [host]), stage=stage, check=result["check"],
                 reason="%s: %s" % (a.get("kind") or "check", ", ".join(a.get("ports") or [])),
                 remediation=a["action"]) for a in acts]
    domain = (result.get("evidence") or {}).get("nvlink_domain") or {}
    if domain.get("status") == "fail":
        rows.append(dict(label, hostname=host, stage=stage, check=result["check"],
                         reason="NVLink domain: %s" % domain.get("reason"),
                         remediation="check the node's NVLink domain (cluster UUID, clique id) against the twin's "
                                     "nvlink_domain; rerun the cabling check"))
    return rows


def merge_rows(rows: list[Row]) -> list[Row]:
    """``rows`` in :func:`sort_rows` order with each (hostname, stage, check, reason, remediation) kept once: the
    first in rack walk order, so an action that spans two nodes (a cable swap) is one row labelled at the
    first node.  Returns a new list."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for row in sort_rows(rows):
        key = (row["hostname"], row["stage"], row["check"], row["reason"], row["remediation"])
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _fault(result: Mapping[str, Any]) -> Optional[str]:
    return (result.get("evidence") or {}).get("fault")


def sort_rows(rows: list[Row]) -> list[Row]:
    """Rack walk order: site, rack, U, then stage order, hostname, check (in place; returns ``rows``)."""
    rows.sort(key=lambda d: (str(d["site"] or ""), str(d["rack"] or ""), int(d["u"] or 0),
                             STAGES.index(d["stage"]) if d["stage"] in STAGES else len(STAGES), d["hostname"],
                             d["check"]))
    return rows


# dispatch_list reads the results of up to this many open gates one gate at a time, else every current result
PER_GATE_READS = 64


def dispatch_list(ledger: Any, nodes: Optional[Mapping[str, Mapping[str, Any]]] = None, results: Any = None,
                  gates: Any = None) -> list[Row]:
    """The fleet's current dispatch list, every stage: what a technician walks the floor with.

    For each node and stage whose current gate did not pass, :func:`gate_rows`; then the fabric links burn-in
    convicted.  A check that failed without closing its gate (optional in the profile, waived) is not dispatched.
    ``nodes``: ``{hostname: twin node}`` for the site/rack/U/serial labels (missing ones stay empty).  Rows have
    :data:`DISPATCH_FIELDS`, in :func:`sort_rows` order, each once (:func:`merge_rows`).  ``results``/``gates``: already-read
    ``current_results()``/``current_gates()`` of ``ledger``.
    """
    nodes = nodes or {}
    gates = ledger.current_gates() if gates is None else gates
    if results is None:
        # only the results of gates that did not pass are listed: with few such gates, only theirs are read
        # (the latest of each check of that node and stage, indexed), not the whole fleet's (issue 27 profile)
        open_ = [(host, stage) for host, stages in gates.items() for stage, verdict in stages.items()
                 if verdict.status != "pass"]
        if len(open_) <= PER_GATE_READS:
            results = [res for host, stage in open_ for res in ledger.current_results(host, stage)]
        else:
            results = ledger.current_results()
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for res in results:
        by_key.setdefault((res.node, res.stage), {})[res.check] = res
    rows = []
    for host, stages in gates.items():
        for stage, verdict in stages.items():
            if verdict.status != "pass":
                # only a gate that did not pass is listed: its results alone are turned into dicts (issue 27)
                checks = {name: res.to_dict() for name, res in by_key.get((host, stage), {}).items()}
                rows.extend(gate_rows(nodes.get(host, {}), host, stage, verdict.failing, checks))
    rows.extend(_link_dispatch(ledger.events(kind="fabric_link"), nodes))
    return merge_rows(rows)


def write_rows(directory: str, name: str, rows: list[Row], **doc: Any) -> dict[str, str]:
    """Write ``<name>.csv`` and ``<name>.json`` (``{**doc, "rows": rows}``) under ``directory``, each replaced
    atomically so a technician's tool never reads half a list.  Returns ``{"csv": path, "json": path}``.
    Raises :class:`ReportError` naming the directory when it cannot be written."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=DISPATCH_FIELDS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    text_json = json.dumps(dict(doc, rows=rows), indent=2, default=str) + "\n"
    paths = {}
    try:
        os.makedirs(directory, exist_ok=True)
        for ext, text in (("csv", buf.getvalue()), ("json", text_json)):
            path = paths[ext] = os.path.join(directory, "%s.%s" % (name, ext))
            # a temporary file of this writer's own: every stage refreshes the list, and two runs may at once
            tmp = "%s.%d.%d.tmp" % (path, os.getpid(), threading.get_ident())
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
    except OSError as exc:
        raise ReportError("cannot write the dispatch list: %s" % exc.strerror, where=directory)
    return paths


def write_dispatch_latest(ledger: Any, directory: str,
                          nodes: Optional[Mapping[str, Mapping[str, Any]]] = None) -> dict[str, Any]:
    """Write ``dispatch-latest.csv`` and ``dispatch-latest.json`` (:func:`dispatch_list`) under ``directory``.

    ``nodes`` label the rows; a node outside ``nodes`` keeps the labels the previous list gave it.  Returns
    ``{"csv": path, "json": path, "rows": count}``.  Raises :class:`ReportError` naming the directory when it
    cannot be written.
    """
    directory = os.path.normpath(directory)
    # A run limited to some hosts (--limit) knows only their twin records: the labels of the other nodes on the
    # list come from the list this one replaces, so they keep their rack and U.
    labels: dict[str, Mapping[str, Any]] = {}
    try:
        with open(os.path.join(directory, "dispatch-latest.json"), encoding="utf-8") as handle:
            for row in json.load(handle).get("rows") or []:
                labels.setdefault(row.get("hostname"), {k: row.get(k) for k in ("site", "rack", "u", "serial")})
    except (OSError, ValueError, AttributeError):
        pass
    labels.update(nodes or {})
    rows = dispatch_list(ledger, labels)
    paths = write_rows(directory, "dispatch-latest", rows,
                       generated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return dict(paths, rows=len(rows))


def _link_dispatch(events: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """Dispatch rows for the fabric links the burn-in fabric tier convicted (latest verdict per link).

    A bad link fails no node (both ends pass with other partners), so it would otherwise reach no technician.
    """
    latest = {}
    for event in events:
        data = event.get("data") or {}
        if data.get("link"):
            latest[data["link"]] = data
    rows = []
    for link, data in sorted(latest.items()):
        if data.get("verdict") != "bad":
            continue
        ends = sorted((data.get("info") or {}).get("nodes") or [])
        twin = nodes.get(ends[0], {}) if ends else {}
        measured = ", ".join("%s %s" % (t.get("value"), t.get("unit", "")) for t in data.get("tests") or [])
        rows.append({"site": twin.get("site"), "rack": twin.get("rack"), "u": twin.get("u"),
                     "hostname": " <-> ".join(ends), "serial": None, "stage": "burn_in", "check": "fabric_link",
                     "reason": "link %s between %s is slow (measured %s) while both ends pass with other partners"
                               % (link, " and ".join(ends), measured or "n/a"),
                     "remediation": "reseat or replace the cable/optics of %s and check both switch ports' error "
                                    "counters; rerun the fabric tier" % link})
    return rows


def dispatch_rows(nodes: Mapping[str, Mapping[str, Any]], outcomes: Mapping[str, Mapping[str, Any]],
                  stage: str) -> list[Row]:
    """Dispatch list rows for this run's nodes whose ``stage`` gate did not pass (:func:`gate_rows` each).

    ``nodes``: ``{hostname: twin node}``; ``outcomes``: ``{hostname: {"gate": GateVerdict
    dict, "results": [CheckResult dict]}}``.  Rows have :data:`DISPATCH_FIELDS`, in rack walk order.
    """
    rows = []
    for host, out in outcomes.items():
        gate = out["gate"]
        if gate["status"] != PASS:
            rows.extend(gate_rows(nodes.get(host, {}), host, stage, gate.get("failing") or [],
                                  {r["check"]: r for r in out["results"]}))
    return merge_rows(rows)


def write_dispatch(rows: list[Row], directory: str, run_id: str, stage: str, latest: bool = True) -> dict[str, str]:
    """Write ``dispatch-<run_id>.csv`` and ``.json`` (and, with ``latest``, ``dispatch-latest.*``) under ``directory``.

    With a ledger a stage writes ``dispatch-latest.*`` from it instead (:func:`write_dispatch_latest`: every
    node and stage), so ``latest`` is only for a run without one.  Returns ``{"csv": path, "json": path}`` of the
    run's files.  Raises :class:`ReportError` when the directory cannot be written.
    """
    paths = write_rows(directory, "dispatch-%s" % run_id, rows, run_id=run_id, stage=stage)
    if latest:
        write_rows(directory, "dispatch-latest", rows, run_id=run_id, stage=stage)
    return paths
