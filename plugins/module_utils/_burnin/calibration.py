# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thresholds relative to a measured baseline: ``{of: <figure>, fraction: f}`` or ``{of: <figure>, multiple: m}``.

A profile whose hosts share a machine (the lab profile) cannot promise absolute floors: what one host gets from
a shared disk or two shared cores depends on what else runs.  Its thresholds name a figure of a calibration
(the machine measured once, e.g. ``build/lab/calibration.json`` written by ``symphony_lab``) and a fraction of it
(floors: ``min_*``) or a multiple of it (ceilings: ``max_*``).  The caller that knows the machine passes the
calibration; this module only does the arithmetic, so the stage holds no knowledge of any lab.

Calibration document (the parts read here)::

    {"measured": "2026-12-01T21:30:00+00:00",
     "figures": {"fio_randread_4k.read_iops": {"value": 28012.4, "unit": "IOPS", "how": "fio ..."}, ...}}
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .._core.errors import ManifestError


def is_relative(value: Any) -> bool:
    """True when a threshold value is the relative form (a mapping naming a calibration figure)."""
    return isinstance(value, dict) and "of" in value


def resolve_thresholds(thresholds: Optional[Dict[str, Any]], calibration: Optional[Dict[str, Any]],
                       where: str) -> Dict[str, Any]:
    """Return ``thresholds`` with every relative value replaced by a number from ``calibration``.

    ``fraction`` multiplies the figure for a floor, ``multiple`` for a ceiling; the result keeps three
    significant digits (the figure is one short measurement, more digits would only look precise) in the
    figure's unit.  Without a calibration (``None`` or ``{}``) a relative threshold is left out: the test then
    judges only what its absolute thresholds say (fio: completes without error).  Raises
    :class:`ManifestError` naming ``where`` when a calibration is given but lacks the figure.
    """
    out = {}
    figures = (calibration or {}).get("figures") or {}
    for name, value in (thresholds or {}).items():
        if not is_relative(value):
            out[name] = value
            continue
        if not calibration:
            continue
        figure = figures.get(value["of"])
        if not isinstance(figure, dict) or not isinstance(figure.get("value"), (int, float)):
            raise ManifestError("threshold %s is relative to calibration figure %r, which the calibration (measured "
                                "%s) does not have (it has: %s)" % (name, value["of"], calibration.get("measured", "?"),
                                                                    ", ".join(sorted(figures)) or "none"),
                                where="%s.thresholds.%s" % (where, name))
        factor = value["fraction"] if "fraction" in value else value["multiple"]
        out[name] = float("%.3g" % (float(figure["value"]) * float(factor)))
    return out
