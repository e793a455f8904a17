# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the burn-in test kinds share: where a test's errors point, which GPUs the profile expects, sysfs reads."""

from __future__ import annotations

from typing import Any

from ..._core.errors import ToolNotFoundError
from ..context import TestContext


def where_in_sku(ctx: TestContext) -> str:
    """``<sku>: burn_in test <name>``, the ``where`` of a manifest error about this test."""
    return "%s: burn_in test %s" % (ctx.manifest.get("sku", "manifest"), ctx.test.name)


def gpu_expectation(ctx: TestContext, vendor: str | None = None) -> tuple[int, dict[str, Any]]:
    """``(count, bom.gpus)``; raises ToolNotFoundError (-> not_run) when no GPU is expected here."""
    gpus = ctx.bom.get("gpus") or {}
    count = gpus.get("count", 0)
    if not count or gpus.get("vendor") == "none":
        raise ToolNotFoundError("no GPU on this host (profile %s: inband_bom.gpus.count %s)" % (ctx.profile, count or 0))
    if vendor and gpus.get("vendor") and gpus["vendor"] != vendor:
        raise ToolNotFoundError("this test is for %s GPUs; the SKU's GPUs are %s" % (vendor, gpus["vendor"]))
    return int(count), gpus


def read_sysfs(path: str) -> str | None:
    """A sysfs/procfs attribute's text (stripped), or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None
