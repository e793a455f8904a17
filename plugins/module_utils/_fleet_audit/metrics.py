# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ledger's view of a node as Prometheus metrics, one file per node for node_exporter's textfile collector.

The text is prometheus_client's exposition format (``generate_latest``); node_exporter reads ``*.prom`` files from
its ``--collector.textfile.directory`` and a file must be replaced whole, never written in place (node_exporter
README, "Textfile Collector"): the role writes it with ``ansible.builtin.copy``, which renames a finished file.

| metric | labels | value |
|---|---|---|
| symphony_gate_status | node, stage, status | 1 for the stage's current gate status, 0 for the other three |
| symphony_fleet_audit_drift_components | node | components drifting now (the drift table's rows) |
| symphony_fleet_audit_health_events | node, kind | what the last audit found new: xid, mce/aer/edac kinds, counters |
| symphony_fleet_audit_last_run_timestamp_seconds | node | UNIX time the last audit finished |
| symphony_nccl_busbw_gbps | node, check, nodes, size_bytes | the last NCCL sweep's bus bandwidth per message size |
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

try:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily
    PROMETHEUS_IMPORT_ERROR: Optional[str] = None
except ImportError as _imp_err:  # the modules that export metrics say so through run_module(requires=)
    PROMETHEUS_IMPORT_ERROR = str(_imp_err)

from .._core.gate import STATUSES

METRICS = ("symphony_gate_status", "symphony_fleet_audit_drift_components", "symphony_fleet_audit_health_events",
           "symphony_fleet_audit_last_run_timestamp_seconds", "symphony_nccl_busbw_gbps")


def health_events(results: Sequence[Any]) -> Dict[str, int]:
    """``{kind: count}`` the node's latest ``fleet_audit`` rows report as new (passive checks' ``observed``).

    A check that did not run exports nothing: a missing series, never a 0 that reads as "healthy".
    """
    out: Dict[str, int] = {}
    for r in results:
        if r.status == "not_run" or not isinstance(r.observed, dict):
            continue
        observed = r.observed
        if r.check == "kernel_log":
            out["xid"] = out.get("xid", 0) + len(observed.get("xids") or [])
            for kind, entry in (observed.get("hardware") or {}).items():
                out[kind] = out.get(kind, 0) + int(entry.get("count") or 0)
        elif r.check == "dcgm_xid":
            out["dcgm_xid"] = len(observed.get("changed") or {})
        elif r.check in ("gpu_counters", "ib_counters"):
            for gains in (observed.get("deltas") or {}).values():
                for name, gain in gains.items():
                    out[name] = out.get(name, 0) + int(gain)
        elif r.check == "bmc_sel":
            out["sel_critical"] = int(observed.get("critical") or 0)
            out["sel_warning"] = int(observed.get("warning") or 0)
    return out


class _Node:
    """A prometheus_client collector yielding one node's families."""

    def __init__(self, node: str, gates: Mapping[str, str], drift: int, events: Mapping[str, int],
                 last_audit: Optional[float], curves: Iterable[Mapping[str, Any]]) -> None:
        self.node, self.gates, self.drift, self.events = node, gates, drift, events
        self.last_audit, self.curves = last_audit, list(curves)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        gate = GaugeMetricFamily("symphony_gate_status", "Current gate of the node per stage (1 = this status)",
                                 labels=["node", "stage", "status"])
        for stage, status in sorted(self.gates.items()):
            for value in STATUSES:
                gate.add_metric([self.node, stage, value], 1.0 if value == status else 0.0)
        yield gate
        drift = GaugeMetricFamily("symphony_fleet_audit_drift_components", "Components drifting from the SKU now",
                                  labels=["node"])
        drift.add_metric([self.node], float(self.drift))
        yield drift
        events = GaugeMetricFamily("symphony_fleet_audit_health_events", "Health events new at the last audit",
                                   labels=["node", "kind"])
        for kind, count in sorted(self.events.items()):
            events.add_metric([self.node, kind], float(count))
        yield events
        if self.last_audit is not None:
            last = GaugeMetricFamily("symphony_fleet_audit_last_run_timestamp_seconds",
                                     "UNIX time the last fleet audit of the node finished", labels=["node"])
            last.add_metric([self.node], float(self.last_audit))
            yield last
        busbw = GaugeMetricFamily("symphony_nccl_busbw_gbps", "NCCL bus bandwidth per message size (GB/s)",
                                  labels=["node", "check", "nodes", "size_bytes"])
        for curve in self.curves:
            for point in curve.get("curve") or []:
                if point.get("busbw_gbps") is not None:
                    busbw.add_metric([self.node, str(curve.get("check")), str(curve.get("nodes") or ""),
                                      str(int(point["size_bytes"]))], float(point["busbw_gbps"]))
        yield busbw


def node_metrics(node: str, gates: Mapping[str, str], drift: int, events: Mapping[str, int],
                 last_audit: Optional[float], curves: Iterable[Mapping[str, Any]] = ()) -> str:
    """The textfile collector file of one node (module docstring); ``curves``: ``[{check, nodes, curve}]``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Node(node, gates, drift, events, last_audit, curves))
    return generate_latest(registry).decode("utf-8")


def nccl_curves(results: Sequence[Any]) -> List[Dict[str, Any]]:
    """``[{check, nodes, curve}]``: the latest ``curve`` evidence (``[{size_bytes, busbw_gbps}]``) per check."""
    return [{"check": r.check, "nodes": (r.evidence or {}).get("nodes"), "curve": r.evidence["curve"]}
            for r in results if isinstance((r.evidence or {}).get("curve"), list)]
