# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""iperf3 ``-J`` JSON (TCP) from the client side.

Reads ``end.sum_sent``/``end.sum_received`` (``bits_per_second``, ``bytes``, ``seconds``,
``retransmits``), and with ``--bidir`` (iperf3 >= 3.7) ``end.sum_sent_bidir_reverse``/
``end.sum_received_bidir_reverse``; ``start.test_start.reverse`` tells a ``-R`` run.  A run that failed
carries a top-level ``"error"`` string (``unable to connect to server: ...``).  Bandwidth in Gb/s
(1e9 bit/s).
"""

from __future__ import annotations

from typing import Any

from . import load_json_document, parse_error

TOOL = "iperf3"


def _gbps(summary: Any) -> float | None:
    if not isinstance(summary, dict) or summary.get("bits_per_second") is None:
        return None
    return round(float(summary["bits_per_second"]) / 1e9, 4)


def parse_iperf3_json(text: str) -> dict[str, Any]:
    """Parse iperf3 client JSON.

    Returns ``{"forward_gbps": Gb/s received by the server, "reverse_gbps": Gb/s of the reverse stream
    (``--bidir``) or None, "gbps": the lower of the two (the pair's bottleneck), "retransmits": int|None,
    "reverse_mode": bool, "bidir": bool, "duration_s": float|None, "error": str|None,
    "remote_host": str|None}``.  A document with ``error`` and no ``end`` summary returns ``gbps``
    None and the error; one with neither raises :class:`ParseError`.
    """
    doc, _pre, _dups = load_json_document(TOOL, text)
    if not isinstance(doc, dict):
        raise parse_error(TOOL, "JSON document is not an object")
    error = doc.get("error")
    start = doc.get("start") or {}
    test_start = start.get("test_start") or {}
    end = doc.get("end") or {}
    connected = (start.get("connected") or [{}])[0] if isinstance(start.get("connected"), list) else {}
    received = end.get("sum_received")
    if not received and error:
        return {"forward_gbps": None, "reverse_gbps": None, "gbps": None, "retransmits": None,
                "reverse_mode": bool(test_start.get("reverse")), "bidir": bool(test_start.get("bidir")),
                "duration_s": None, "error": str(error), "remote_host": connected.get("remote_host")}
    if not received:
        raise parse_error(TOOL, "no end.sum_received summary in JSON (the test did not complete)")
    forward = _gbps(received)
    reverse = _gbps(end.get("sum_received_bidir_reverse"))
    values = [v for v in (forward, reverse) if v is not None]
    sent = end.get("sum_sent") or {}
    return {"forward_gbps": forward, "reverse_gbps": reverse, "gbps": min(values) if values else None,
            "retransmits": sent.get("retransmits"), "reverse_mode": bool(test_start.get("reverse")),
            "bidir": bool(test_start.get("bidir")) or reverse is not None,
            "duration_s": received.get("seconds"), "error": str(error) if error else None,
            "remote_host": connected.get("remote_host")}
