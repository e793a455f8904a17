# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provisioning stage's check graph, its settings, and one node's working state through a phase.

:class:`NodeRun` runs each check once its dependencies passed (else ``blocked``), records its result the moment it
is known (a killed run keeps what it finished) and counts the writes sent to the BMC.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional

from .._core.errors import SymphonyError
from .._core.gate import BLOCKED, CheckGraph, CheckResult, CheckSpec, Outcome, error_outcome, mark_unverified
from .._core.secrets import scrub
from .._fleet.settings import BmcFleetSettings

STAGE = "provisioning"
READ_SECTIONS = ("systems", "managers", "firmware", "bios", "capabilities")


# --------------------------------------------------------------------------- the check graph
def check_graph(manifest: Mapping[str, Any], optional: Iterable[str] = (), prove_runtime: bool = True,
                install_os: bool = False) -> CheckGraph:
    """The provisioning checks of one SKU, in strict order, with their dependencies.

    ``inventory_read`` -> ``firmware:<id>`` (out-of-band, chained in manifest order) ->
    ``bios_settings`` -> ``runtime_boot`` -> ``runtime_proof`` -> ``firmware:<id>`` (in-band, chained) ->
    ``tunings``; ``verify`` depends on every check but ``tunings``; with ``install_os``, ``os_install`` ->
    ``os_boot`` follow ``verify`` (the OS last, once every firmware is at the baseline: ``os_install.py``).
    ``optional``: checks the gate does not require.  ``prove_runtime`` False (a runtime probe that cannot reach
    the node in-band): the proof is not required and in-band work follows ``runtime_boot``.  Raises
    :class:`GateError` on a name the graph does not have.
    """
    specs = [CheckSpec("inventory_read", (), True, "Redfish inventory (firmware, BIOS, capabilities) read")]
    prev = "inventory_read"
    fw = manifest.get("firmware", [])
    for comp in [c for c in fw if c["phase"] == "out_of_band"]:
        name = "firmware:%s" % comp["id"]
        specs.append(CheckSpec(name, (prev,), True, "%s at an accepted version (out-of-band)" % comp["id"]))
        prev = name
    specs.append(CheckSpec("bios_settings", (prev,), True, "BIOS attributes set through the settings object"))
    specs.append(CheckSpec("runtime_boot", ("bios_settings",), True, "booted into the ephemeral runtime when needed"))
    # in-band firmware is applied only from a runtime proven to be the SKU's, RAM-only (proof.py)
    specs.append(CheckSpec("runtime_proof", ("runtime_boot",), prove_runtime,
                           "in-band: the pinned RAM-only runtime booted, nothing inherited from disk"))
    prev = "runtime_proof" if prove_runtime else "runtime_boot"
    for comp in [c for c in fw if c["phase"] == "in_band"]:
        name = "firmware:%s" % comp["id"]
        specs.append(CheckSpec(name, (prev,), True, "%s at an accepted version (in-band)" % comp["id"]))
        prev = name
    specs.append(CheckSpec("tunings", ("runtime_boot",), True, "SKU tunings applied in-band"))
    # tunings are the OS's concern, judged on their own: verify re-reads firmware and BIOS only
    specs.append(CheckSpec("verify", tuple(s.name for s in specs if s.name != "tunings" and s.required), True,
                           "fresh re-read: every version and BIOS attribute as the manifest says"))
    if install_os:
        specs.append(CheckSpec("os_install", ("verify",), True,
                               "the SKU's OS image written to its disk from the runtime, read back as pinned"))
        specs.append(CheckSpec("os_boot", ("os_install",), True,
                               "in-band: booted from the disk into the pinned OS image"))
    graph = CheckGraph(STAGE, specs)
    return graph.with_required(optional) if optional else graph


# --------------------------------------------------------------------------- settings
@dataclass
class ProvisionSettings(BmcFleetSettings):
    """How the stage reaches the BMCs (:class:`BmcFleetSettings`), where images are, and its timeouts (seconds).

    ``image_dir``: local copies of the manifest images (file name = basename of ``image.uri``),
    each checked against the manifest sha256 before upload; ``image_base_url``: where the BMC
    fetches SimpleUpdate images from (default the manifest ``image.uri``); ``runtime_probe``:
    how to tell the runtime answers: ``proof`` (in-band over ``launcher``: ``runtime_proof``), ``ssh`` (TCP 22 of
    the twin's in-band address),
    ``emulator`` (the Redfish emulator's ``/_emulator/state`` boot state) or ``none``;
    ``runtime_boot``: ``auto`` (only when a reset or in-band work is needed) or ``always``;
    ``launcher``/``console_logs``: how ``runtime_proof`` reaches the runtime and reads a console (``proof.py``);
    ``os_install``/``os_image_url``/``os_install_timeout_s``: write the SKU's OS image last and boot it
    (``os_install.py``; the timeout bounds the image write and read-back).
    """

    image_dir: Optional[str] = None
    image_base_url: Optional[str] = None
    allow_downgrade: bool = False
    task_timeout_s: float = 1800.0
    bmc_reboot_timeout_s: float = 900.0
    runtime_timeout_s: Optional[float] = None
    runtime_image_url: Optional[str] = None
    # the runtime's boot-time config medium (images/runtime/config-medium.sh: SSH key, callback), VirtualMedia USB
    runtime_config_url: Optional[str] = None
    runtime_probe: str = "ssh"
    runtime_boot: str = "auto"
    poll_s: float = 5.0
    # how the runtime proof reaches the node in-band (an _host.launchers.SSHLauncher; None: not in-band here)
    launcher: Any = None
    # host -> the node's serial console capture (a console server's or the emulator's log file)
    console_logs: Optional[dict[str, str]] = None
    # the last step: the SKU's OS image written to the node's disk (os_install.py); a local path or URL instead
    # of the SKU's os.image_uri (still checked against its sha256)
    os_install: bool = False
    os_image_url: Optional[str] = None
    os_install_timeout_s: float = 1800.0


class NodeRun:
    """Per-node working state through one phase."""

    def __init__(self, host: str, node: dict[str, Any], manifest: dict[str, Any], client: Any,
                 settings: ProvisionSettings, ledger: Any, run_id: str, graph: CheckGraph) -> None:
        self.host, self.node, self.manifest, self.client = host, node, manifest, client
        self.settings, self.ledger, self.run_id, self.graph = settings, ledger, run_id, graph
        # inventory and plan: Any, set by the inventory_read check that every later check depends on
        self.inv: Any = None
        self.plan: Any = None
        self.applied: dict[str, str] = {}
        self.reset_needed: list[str] = []
        # ResetType values a staged job asks for (a Dell job: "... PowerCycle"); the runtime boot sends the first
        self.reset_types: list[str] = []
        self.writes = 0
        self.results: list[CheckResult] = []
        self.statuses: dict[str, str] = {}

    # -- results, recorded as they come (a killed run keeps what it finished)
    def record(self, check: str, outcome: Outcome, started: float) -> CheckResult:
        """Record ``outcome`` of ``check`` (started at ``started``, UNIX seconds), secrets scrubbed, in the ledger
        too."""
        res = CheckResult(node=self.host, stage=STAGE, check=check, status=outcome.status, reason=outcome.reason,
                          expected=outcome.expected, observed=outcome.observed, remediation=outcome.remediation,
                          evidence=mark_unverified(outcome.evidence, getattr(self.client, "tls_verified", True)),
                          started=started, finished=time.time(), run_id=self.run_id)
        secrets = [self.settings.password, getattr(self.client, "_password", None)]
        res = CheckResult.from_dict(scrub(res.to_dict(), secrets))
        self.results.append(res)
        self.statuses[check] = res.status
        if self.ledger is not None:
            self.ledger.record_results([res])
        return res

    def run(self, check: str, fn: Callable[[], Outcome]) -> CheckResult:
        """Run one check unless a dependency did not pass (then ``blocked``)."""
        started = time.time()
        blockers = self.graph.blocking_dependencies(check, self.statuses)
        if blockers:
            outcome = Outcome(BLOCKED, "blocked by %s" % ", ".join("%s (%s)" % b for b in blockers))
        else:
            try:
                outcome = fn()
            except SymphonyError as exc:
                outcome = error_outcome(exc)
        return self.record(check, outcome, started)

    def post(self, path: str, body: Any = None) -> Any:
        """POST to the BMC, counted as a write."""
        self.writes += 1
        return self.client.post(path, body)

    def patch(self, path: str, body: Any, etag: Optional[str] = "auto") -> Any:
        """PATCH on the BMC, counted as a write (``etag``: as ``RedfishClient.patch``; None sends no If-Match)."""
        self.writes += 1
        return self.client.patch(path, body, etag=etag)
