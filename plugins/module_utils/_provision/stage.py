# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Provisioning stage: apply the firmware plan out-of-band, boot the runtime, verify.

Two controller-side phases per node, each batched over the play's hosts (``_fleet.run_batch``):

* ``out_of_band``: read the inventory, build the plan (``_fwplan``), apply every out-of-band
  firmware step in manifest order (image sha256 checked against the manifest before upload;
  SimpleUpdate with ``TransferProtocol`` when the service lists allowed values (R-9) or a
  multipart push; the task followed to its end, ``Completed`` + ``Critical`` is a failure (R-17);
  a BMC that reboots itself is polled until it answers with the new version (R-18)), the BIOS
  settings (settings object, ``If-Match``, the apply time the service supports, R-1/R-4/R-5/R-20),
  then the one-time boot into the ephemeral runtime (VirtualMedia + ``Once`` override + reset,
  or PXE) when anything needs a reset or in-band work.
* ``verify``: eject the runtime media, record the in-band and tuning results the role collected
  on the node, re-read everything over Redfish and compare every version and BIOS attribute with
  the manifest (a mismatch fails with both strings whatever a tool said), compute the gate.

Each check result is appended to the ledger the moment it is known, so a run killed half-way
leaves what it finished; the rerun re-reads the BMC, skips what is already at the manifest, and
does not re-upload an image the ledger says was staged and is still awaiting its reset.
Secrets (BMC passwords) never reach results, the ledger or warnings (``_predeploy.scrub``).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from .._core.errors import (
    SymphonyError,
    ValidationError,
)
from .._fleet.batch import (
    BmcFleetSettings,
    bmc_client,
    fleet_settings_kwargs,
    require_credentials,
    run_batch,
    twin_nodes_from_params,
)
from .fwplan import (
    FOLLOWS,
    MISSING,
    NO_IMAGE,
    REFUSE,
    SKIP,
    UPDATE,
    build_plan,
    diff_after,
    diff_of,
    format_plan,
    attribute_value,
)
from .._core.gate import (
    BLOCKED,
    FAIL,
    NOT_RUN,
    PASS,
    CheckGraph,
    CheckResult,
    CheckSpec,
    Outcome,
    compute_gate,
    derive_blocked,
    failed,
    new_run_id,
    not_run,
    passed,
)
from .._core.ledger import default_ledger_path, open_ledger
from .._predeploy.stage import load_bmc_map, resolve_endpoint, scrub
from .._redfish.client import (
    RedfishClient,
    RedfishConnectionError,
    RedfishHTTPError,
    RedfishTaskError,
    RedfishTimeout,
)
from .._redfish.reader import read_inventory, reset_request
from .._redfish.registries import MessageRegistries

STAGE = "provisioning"
READ_SECTIONS = ("systems", "managers", "firmware", "bios", "capabilities")
RESET_ACTIVATIONS = ("host_reset", "ac_cycle")


# --------------------------------------------------------------------------- the check graph
def check_graph(manifest, optional=()):
    """The provisioning checks of one SKU, in strict order, with their dependencies.

    ``inventory_read`` -> ``firmware:<id>`` (out-of-band, chained in manifest order) ->
    ``bios_settings`` -> ``runtime_boot`` -> ``firmware:<id>`` (in-band, chained) ->
    ``tunings``; ``verify`` depends on every check but ``tunings``.  ``optional``: checks the gate
    does not require.  Raises :class:`GateError` on a name the graph does not have.
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
    prev = "runtime_boot"
    for comp in [c for c in fw if c["phase"] == "in_band"]:
        name = "firmware:%s" % comp["id"]
        specs.append(CheckSpec(name, (prev,), True, "%s at an accepted version (in-band)" % comp["id"]))
        prev = name
    specs.append(CheckSpec("tunings", ("runtime_boot",), True, "SKU tunings applied in-band"))
    # tunings are the OS's concern, judged on their own: verify re-reads firmware and BIOS only
    specs.append(CheckSpec("verify", tuple(s.name for s in specs if s.name != "tunings"), True,
                           "fresh re-read: every version and BIOS attribute as the manifest says"))
    graph = CheckGraph(STAGE, specs)
    return graph.with_required(optional) if optional else graph


# --------------------------------------------------------------------------- settings
@dataclass
class ProvisionSettings(BmcFleetSettings):
    """How the stage reaches the BMCs (:class:`BmcFleetSettings`), where images are, and its timeouts (seconds).

    ``image_dir``: local copies of the manifest images (file name = basename of ``image.uri``),
    each checked against the manifest sha256 before upload; ``image_base_url``: where the BMC
    fetches SimpleUpdate images from (default the manifest ``image.uri``); ``runtime_probe``:
    how to tell the runtime answers: ``ssh`` (TCP 22 of the twin's in-band address),
    ``emulator`` (the Redfish emulator's ``/_emulator/state`` boot state) or ``none``;
    ``runtime_boot``: ``auto`` (only when a reset or in-band work is needed) or ``always``.
    """

    image_dir: str = None
    image_base_url: str = None
    allow_downgrade: bool = False
    task_timeout_s: float = 1800.0
    bmc_reboot_timeout_s: float = 900.0
    runtime_timeout_s: float = None
    runtime_image_url: str = None
    runtime_probe: str = "ssh"
    runtime_boot: str = "auto"
    poll_s: float = 5.0


class _Node:
    """Per-node working state through one phase."""

    def __init__(self, host, node, manifest, client, settings, ledger, run_id, graph):
        self.host, self.node, self.manifest, self.client = host, node, manifest, client
        self.settings, self.ledger, self.run_id, self.graph = settings, ledger, run_id, graph
        self.inv = None
        self.plan = None
        self.applied = {}
        self.reset_needed = []
        self.writes = 0
        self.results = []
        self.statuses = {}

    # -- results, recorded as they come (a killed run keeps what it finished)
    def record(self, check, outcome, started):
        res = CheckResult(node=self.host, stage=STAGE, check=check, status=outcome.status, reason=outcome.reason,
                          expected=outcome.expected, observed=outcome.observed, remediation=outcome.remediation,
                          evidence=outcome.evidence, started=started, finished=time.time(), run_id=self.run_id)
        secrets = [self.settings.password, getattr(self.client, "_password", None)]
        res = CheckResult.from_dict(scrub(res.to_dict(), secrets))
        self.results.append(res)
        self.statuses[check] = res.status
        if self.ledger is not None:
            self.ledger.record_results([res])
        return res

    def run(self, check, fn):
        """Run one check unless a dependency did not pass (then ``blocked``)."""
        started = time.time()
        blockers = self.graph.blocking_dependencies(check, self.statuses)
        if blockers:
            outcome = Outcome(BLOCKED, "blocked by %s" % ", ".join("%s (%s)" % b for b in blockers))
        else:
            try:
                outcome = fn()
            except SymphonyError as exc:
                outcome = Outcome(FAIL, str(exc), remediation="investigate the error above and rerun the stage")
        return self.record(check, outcome, started)

    def post(self, path, body=None):
        self.writes += 1
        return self.client.post(path, body)

    def patch(self, path, body):
        self.writes += 1
        return self.client.patch(path, body)


# --------------------------------------------------------------------------- images
def image_file(settings, step):
    """Path of the local copy of a step's image: ``<image_dir>/<basename of image.uri>``, or None."""
    if not settings.image_dir or not step.image:
        return None
    name = os.path.basename(urlsplit(step.image["uri"]).path)
    path = os.path.join(settings.image_dir, name)
    return path if os.path.isfile(path) else None


def checked_image(settings, step):
    """``(bytes, sha256)`` of the step's local image after checking its sha256 against the manifest.

    Raises :class:`ValidationError` naming the file when it is absent or its sha256 differs.
    """
    path = image_file(settings, step)
    if path is None:
        raise ValidationError("no local copy of %s in image_dir (%s) to check its sha256 against the manifest"
                              % (os.path.basename(urlsplit(step.image["uri"]).path), settings.image_dir),
                              where="firmware:%s" % step.component)
    with open(path, "rb") as handle:
        data = handle.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != step.image["sha256"].lower():
        raise ValidationError("image sha256 %s differs from the manifest's %s; not uploaded"
                              % (digest, step.image["sha256"]), where=path)
    return data, digest


# --------------------------------------------------------------------------- firmware
def _member_uris(inv, step):
    by_id = {i.id: i.uri for i in inv.firmware}
    return [by_id[m] for m in step.observed if by_id.get(m)]


def _read_versions(client, uris):
    out = {}
    for uri in uris:
        body = client.get(uri)
        out[str(body.get("Id") or uri.rstrip("/").rsplit("/", 1)[-1])] = body.get("Version")
    return out


def _versions_ok(versions, step):
    return bool(versions) and all(v in step.accepted for v in versions.values())


def _wait_bmc_version(nd, step, uris, started):
    """Poll until the BMC, back from its own reboot, reports an accepted version (R-18)."""
    client, settings = nd.client, nd.settings
    deadline = started + settings.bmc_reboot_timeout_s
    last, rebooted = None, False
    while True:
        try:
            last = _read_versions(client, uris)
            if _versions_ok(last, step):
                return passed(observed=last, expected=step.target, evidence={"bmc_rebooted": rebooted},
                              reason="updated to %s; the BMC rebooted itself and answers with it after %.1fs"
                              % (step.target, time.monotonic() - started))
        except (RedfishConnectionError, RedfishTimeout, RedfishHTTPError) as exc:
            if isinstance(exc, RedfishHTTPError) and exc.status not in (401, 500, 502, 503, 504):
                raise
            rebooted = True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                client.wait_service(timeout_s=remaining, poll_s=settings.poll_s)
            except RedfishTimeout:
                break
            continue
        if time.monotonic() + settings.poll_s > deadline:
            break
        time.sleep(settings.poll_s)
    return failed("the BMC did not answer with %s within %gs after its own update (last read: %s)"
                  % (step.target, settings.bmc_reboot_timeout_s,
                     ", ".join("%s=%s" % kv for kv in sorted((last or {}).items())) or "unreachable"),
                  "wait for the BMC to come back and rerun the stage; if it stays unreachable, AC-cycle the node",
                  observed=last, expected=step.target)


def _staged_earlier(nd, step):
    """The ledger's pass for this step from an earlier run that staged ``target`` over the same versions."""
    if nd.ledger is None:
        return None
    history = nd.ledger.history(nd.host, STAGE, step.check)
    if not history:
        return None
    last = history[-1]
    ev = last.evidence or {}
    if last.status == PASS and ev.get("staged") == step.target and \
            sorted(ev.get("from") or []) == sorted({str(v) for v in step.observed.values()}):
        return last
    return None


def apply_oob_firmware(nd, step):
    """One out-of-band firmware step -> :class:`Outcome` (see module docstring)."""
    observed = sorted({str(v) for v in step.observed.values()})
    if step.action == SKIP:
        return passed(observed=step.observed, expected=step.accepted, reason=step.reason)
    if step.action in (MISSING, NO_IMAGE):
        return failed(step.reason, "check the part is installed and the manifest's match/target for it",
                      observed=step.observed, expected=step.accepted)
    if step.action == REFUSE:
        return failed(step.reason, "requalify the manifest or rerun with allow_downgrade",
                      observed=step.observed, expected=step.target)
    if step.action == FOLLOWS:
        if step.updated_with in nd.applied:
            return passed(observed=step.observed, expected=step.accepted,
                          reason="carried by the %s update of this run; verify re-reads it" % step.updated_with)
        return failed(step.reason, "update %s, which carries this component" % (step.updated_with or "its package"),
                      observed=step.observed, expected=step.accepted)
    earlier = _staged_earlier(nd, step)
    if earlier is not None:
        nd.reset_needed.append(step.check)
        nd.applied[step.component] = "staged"
        return passed(observed=step.observed, expected=step.target,
                      evidence={"staged": step.target, "from": observed, "staged_by": earlier.run_id},
                      reason="%s staged by run %s; activates at the runtime boot reset"
                      % (step.target, earlier.run_id))
    data, digest = checked_image(nd.settings, step)
    caps = nd.inv.capabilities
    uris = _member_uris(nd.inv, step)
    started = time.monotonic()
    if step.method == "redfish_multipart":
        push = caps.get("multipart_http_push_uri")
        if not push:
            return failed("the BMC offers no MultipartHttpPushUri for a multipart update",
                          "use redfish_simple_update for this SKU's BMC firmware", expected=step.target)
        nd.writes += 1
        rsp = nd.client.multipart_push(push, data, params={"Targets": uris},
                                       filename=os.path.basename(urlsplit(step.image["uri"]).path))
    elif step.method == "redfish_simple_update":
        simple = caps.get("simple_update") or {}
        if not simple.get("target"):
            return failed("the BMC offers no UpdateService.SimpleUpdate action", "use redfish_multipart")
        url = step.image["uri"]
        if nd.settings.image_base_url:
            url = nd.settings.image_base_url.rstrip("/") + "/" + os.path.basename(urlsplit(url).path)
        body = {"ImageURI": url, "Targets": uris}
        protocols = simple.get("transfer_protocols")
        scheme = urlsplit(url).scheme.upper()
        if protocols is not None:
            if scheme not in protocols:
                return failed("image URL scheme %s is not among the BMC's TransferProtocol values %s"
                              % (scheme, ", ".join(protocols)), "serve the image over one of them")
            body["TransferProtocol"] = scheme
        rsp = nd.post(simple["target"], body)
    else:
        return failed("method %s is not an out-of-band method" % step.method, "fix the manifest")
    evidence = {"sha256": digest, "from": observed, "method": step.method}
    if rsp.get("task_monitor"):
        try:
            task = nd.client.wait_task(rsp["task_monitor"], timeout_s=nd.settings.task_timeout_s,
                                       poll_s=nd.settings.poll_s)
        except RedfishTaskError as exc:
            return failed("firmware task failed: %s" % exc.message, "read the task messages; reset the BMC and "
                          "rerun, or replace the part", observed=step.observed, expected=step.target,
                          evidence=evidence)
        evidence["task"] = {"state": task.get("state"), "status": task.get("status"),
                            "messages": [m.get("MessageId") for m in task.get("messages") or []]}
    nd.applied[step.component] = "applied"
    if step.activation == "bmc_reset":
        outcome = _wait_bmc_version(nd, step, uris, started)
        outcome.evidence.update(evidence)
        return outcome
    if step.activation in RESET_ACTIVATIONS:
        nd.reset_needed.append(step.check)
        evidence["staged"] = step.target
        return passed(observed=step.observed, expected=step.target, evidence=evidence,
                      reason="%s staged; activates at the runtime boot reset (%s)" % (step.target, step.activation))
    now = _read_versions(nd.client, uris)
    if not _versions_ok(now, step):
        return failed("after the update the BMC reports %s, expected %s"
                      % (", ".join("%s=%s" % kv for kv in sorted(now.items())), step.target),
                      "rerun; if it persists the image does not apply to this part", observed=now,
                      expected=step.target, evidence=evidence)
    return passed(observed=now, expected=step.target, evidence=evidence, reason="updated to %s" % step.target)


# --------------------------------------------------------------------------- BIOS settings
def apply_bios(nd, step):
    """PATCH the settings object with the differing attributes (pending until the runtime boot reset)."""
    if step is None:
        return passed(reason="the SKU sets no BIOS attributes")
    if step.action == MISSING:
        return failed(step.reason, "check the BMC exposes Systems/<id>/Bios")
    if not step.changes:
        return passed(reason=step.reason, observed={})
    bios = nd.inv.bios
    want_bios = nd.manifest.get("bios") or {}
    target = bios.get("settings_object") or want_bios.get("settings_path") or bios.get("uri")
    desired = {k: v[1] for k, v in step.changes.items()}
    pending = (nd.client.get(target).get("Attributes") or {}) if target != bios.get("uri") else {}
    if pending and all(attribute_value(pending.get(k)) == v for k, v in desired.items()):
        nd.reset_needed.append("bios_settings")
        return passed(observed=step.changes, expected=desired, evidence={"pending": sorted(desired)},
                      reason="%d attributes already pending in %s; applied at the runtime boot reset"
                      % (len(desired), target))
    body = {"Attributes": desired}
    apply_time = want_bios.get("apply_time") or "OnReset"
    supported = bios.get("supported_apply_times") or []
    if apply_time in supported:
        body["@Redfish.SettingsApplyTime"] = {"ApplyTime": apply_time}
    rsp = nd.patch(target, body)
    nd.reset_needed.append("bios_settings")
    notes = list(bios.get("notes") or [])
    return passed(observed=step.changes, expected=desired,
                  evidence={"settings_object": target, "status": rsp.get("status"), "apply_time":
                            body.get("@Redfish.SettingsApplyTime", {}).get("ApplyTime"), "notes": notes},
                  reason="%d attributes pending in %s (%s); applied at the runtime boot reset"
                  % (len(desired), target, ", ".join(sorted(desired))))


# --------------------------------------------------------------------------- runtime boot
def _virtual_cd(nd):
    for coll in nd.inv.capabilities.get("virtual_media") or []:
        for m in nd.client.members(coll):
            types = [str(t).upper() for t in m.get("MediaTypes") or []]
            if "CD" in types or "DVD" in types:
                return m
    return None


def _runtime_up(nd, deadline):
    probe = nd.settings.runtime_probe
    if probe == "none":
        return True, "not waited for (runtime_probe none)"
    while True:
        if probe == "emulator":
            state = (nd.client.get("/_emulator/state").get("boot_state") or {})
            if state.get("state") == "ephemeral_runtime":
                return True, "the runtime %s is up" % state.get("image")
            seen = state.get("state")
        else:
            addr = nd.node.get("inband_address")
            if not addr:
                return False, "the twin has no in-band address to reach the runtime at"
            try:
                socket.create_connection((addr, 22), timeout=2).close()
                return True, "the runtime answers SSH at %s" % addr
            except OSError as exc:
                seen = "SSH at %s: %s" % (addr, exc)
        if time.monotonic() + nd.settings.poll_s > deadline:
            return False, "last seen: %s" % seen
        time.sleep(nd.settings.poll_s)


def runtime_boot(nd):
    """Boot the node once into the SKU's ephemeral runtime, when a reset or in-band work needs it."""
    runtime = nd.manifest.get("runtime") or {}
    inband = [s.check for s in nd.plan.inband_work]
    why = nd.reset_needed + inband
    if not why and nd.settings.runtime_boot != "always":
        return passed(reason="not needed: no staged firmware, no pending BIOS setting, no in-band update")
    if not runtime:
        return failed("the SKU names no ephemeral runtime but %s need a reset" % ", ".join(why),
                      "add runtime to the SKU manifest")
    started = time.monotonic()
    image = nd.settings.runtime_image_url or runtime["image_uri"]
    system = (nd.inv.systems or [{}])[0]
    evidence = {"why": why, "method": runtime["method"], "image": image}
    if runtime["method"] == "virtual_media":
        cd = _virtual_cd(nd)
        if cd is None:
            return failed("the BMC has no VirtualMedia CD/DVD device", "use runtime method pxe for this SKU")
        actions = cd.get("Actions") or {}
        if cd.get("Inserted") and cd.get("Image") != image:
            nd.post(actions["#VirtualMedia.EjectMedia"]["target"], {})
        if not (cd.get("Inserted") and cd.get("Image") == image):
            nd.post(actions["#VirtualMedia.InsertMedia"]["target"],
                    {"Image": image, "Inserted": True, "WriteProtected": True,
                     "TransferProtocolType": urlsplit(image).scheme.upper() or None})
        target = "Cd"
    else:
        target = "Pxe"
    nd.patch(system["uri"], {"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}})
    reset_target, reset = reset_request(nd.inv)
    nd.post(reset_target, {"ResetType": reset})
    timeout = nd.settings.runtime_timeout_s or runtime.get("boot_timeout_s") or 900
    ok, text = _runtime_up(nd, started + timeout)
    evidence.update(reset=reset, seconds=round(time.monotonic() - started, 3))
    if not ok:
        return failed("the runtime did not come up within %gs after %s with a one-time %s override (%s)"
                      % (timeout, reset, target, text), "check the runtime image URL and the node's console",
                      evidence=evidence)
    return passed(reason="booted %s via %s (one-time %s override, %s): %s"
                  % (image, runtime["method"], target, reset, text), evidence=evidence)


# --------------------------------------------------------------------------- verify
def verify(nd):
    """Re-read FirmwareInventory and the BIOS; every version and attribute must be the manifest's."""
    inv = read_inventory(nd.client, sections=READ_SECTIONS)
    gaps = [g for g in inv.incomplete if g.get("part") in ("firmware", "bios")]
    if gaps:
        return failed("could not re-read %s: %s" % (gaps[0]["part"], gaps[0]["reason"]),
                      "rerun the stage once the BMC answers")
    plan = build_plan(inv, nd.manifest)
    wrong = []
    for s in plan.steps:
        if s.check.startswith("firmware:") and s.action != SKIP:
            reads = ", ".join("%s=%s" % kv for kv in sorted(s.observed.items()) if kv[1] not in s.accepted)
            wrong.append("%s: expected %s, BMC reports %s"
                         % (s.component, " or ".join(s.accepted), reads or s.reason))
        if s.check == "bios_settings" and s.changes:
            wrong.extend("BIOS %s: expected %r, BMC reports %r" % (k, v[1], v[0]) for k, v in sorted(s.changes.items()))
    observed = {"firmware": {s.component: sorted({str(v) for v in s.observed.values()})
                             for s in plan.steps if s.check.startswith("firmware:")},
                "bios_checked": len((nd.manifest.get("bios") or {}).get("attributes") or {})}
    if wrong:
        return failed("; ".join(wrong), "rerun the stage; a part that keeps its old version after its update "
                      "needs the vendor's recovery procedure", observed=observed)
    return passed(observed=observed, reason="%d firmware components and %d BIOS attributes as the manifest says"
                  % (len(observed["firmware"]), observed["bios_checked"]))


def eject_runtime(nd):
    """Eject the runtime media if it is still inserted (a write only when there is something to eject)."""
    runtime = nd.manifest.get("runtime") or {}
    if runtime.get("method") != "virtual_media":
        return None
    image = nd.settings.runtime_image_url or runtime.get("image_uri")
    cd = _virtual_cd(nd)
    if cd and cd.get("Inserted") and cd.get("Image") == image:
        nd.post(cd["Actions"]["#VirtualMedia.EjectMedia"]["target"], {})
        return image
    return None


# --------------------------------------------------------------------------- per node
def _inband_outcome(step, given):
    """In-band check from the plan (already accepted over Redfish) or the node's result."""
    if step.action == SKIP:
        return passed(observed=step.observed, expected=step.accepted, reason=step.reason + " (read over Redfish)")
    if given:
        return Outcome(given.get("status", NOT_RUN), given.get("reason") or "no reason given",
                       given.get("expected"), given.get("observed"), given.get("remediation") or "",
                       given.get("evidence") or {})
    if step.action == UPDATE:
        return not_run("needs the in-band runtime (%s); the in-band phase did not report for this node" % step.method)
    return failed(step.reason, "check the part and the manifest", observed=step.observed, expected=step.accepted)


def _fresh_diff(nd, diff):
    """The ``--diff`` of an applied run: before from the plan, after from a fresh read (verify, don't trust)."""
    try:
        inv = read_inventory(nd.client, sections=READ_SECTIONS)
        fresh = build_plan(inv, nd.manifest, nd.settings.allow_downgrade)
    except SymphonyError as exc:
        return {"before": diff["before"], "after": {"not re-read": str(exc)}}
    return diff_after(diff, fresh, inv.bios.get("attributes") or {})


def process_node(host, item, settings, run_id, ledger, registries, phase, check_mode, client_factory=None):
    """Run ``phase`` (``plan``, ``out_of_band``, ``verify``) for one node; returns its result dict.

    Never raises for the node's own problems: they end in its check results.
    """
    node, manifest = item["node"], item["manifest"]
    graph = check_graph(manifest, settings.optional)
    client = bmc_client(client_factory or RedfishClient, item["endpoint"]["url"], item["entry"], settings,
                        registries=registries)
    nd = _Node(host, node, manifest, client, settings, None if check_mode else ledger, run_id, graph)
    out = {"endpoint": item["endpoint"], "writes": 0}
    try:
        def read():
            client.open()
            nd.inv = read_inventory(client, sections=READ_SECTIONS)
            gaps = [g for g in nd.inv.incomplete if g.get("part") in ("firmware", "bios")]
            if gaps:
                return failed("could not read %s at %s: %s" % (gaps[0]["part"], gaps[0]["uri"], gaps[0]["reason"]),
                              "rerun once the BMC answers; reset the BMC if its inventory stays incomplete")
            nd.plan = build_plan(nd.inv, manifest, settings.allow_downgrade)
            return passed(observed={"firmware_members": len(nd.inv.firmware)},
                          reason="%d FirmwareInventory members, %d BIOS attributes read"
                          % (len(nd.inv.firmware), len(nd.inv.bios.get("attributes") or {})))

        if phase in ("plan", "out_of_band") or check_mode:
            res = nd.run("inventory_read", read)
            if nd.plan is not None:
                out.update(plan=nd.plan.to_dict(), diff=diff_of(nd.plan), lines=format_plan(host, nd.plan),
                           inband=[_inband_item(s) for s in nd.plan.inband_work])
            if phase == "plan" or check_mode:
                out["results"] = [r.to_dict() for r in nd.results]
                out["status"] = res.status
                return out
            for step in [s for s in nd.plan.steps if s.phase == "out_of_band" and s.check.startswith("firmware:")] \
                    if nd.plan else []:
                nd.run(step.check, lambda s=step: apply_oob_firmware(nd, s))
            nd.run("bios_settings", lambda: apply_bios(nd, nd.plan.step("bios_settings")))
            nd.run("runtime_boot", lambda: runtime_boot(nd))
            if out.get("diff") and any(out["diff"]["before"].values()):
                out["diff"] = _fresh_diff(nd, out["diff"])
            for name in graph.order():
                if name not in nd.statuses and name not in ("tunings", "verify") and not \
                        any(c.get("phase") == "in_band" and "firmware:%s" % c["id"] == name
                            for c in manifest.get("firmware", [])):
                    nd.run(name, lambda: not_run("not reached"))
        else:
            earlier = {r.check: r for r in (ledger.history(host, STAGE) if ledger else []) if r.run_id == run_id}
            nd.statuses = {k: r.status for k, r in earlier.items()}
            nd.results = list(earlier.values())
            client.open()
            nd.inv = read_inventory(client, sections=READ_SECTIONS)
            nd.plan = build_plan(nd.inv, manifest, settings.allow_downgrade)
            ejected = eject_runtime(nd)
            given = item.get("inband_results") or {}
            for step in [s for s in nd.plan.steps if s.phase == "in_band"]:
                nd.run(step.check, lambda s=step: _inband_outcome(s, given.get(s.check)))
            tun = item.get("tunings_result")
            if "tunings" in graph.specs:
                nd.run("tunings", lambda: Outcome(tun.get("status", NOT_RUN), tun.get("reason") or "", None,
                                                  tun.get("observed"), tun.get("remediation") or "",
                                                  tun.get("evidence") or {}) if tun else
                       not_run("the in-band phase did not apply the tunings on this node"))
            nd.run("verify", lambda: verify(nd))
            if ejected:
                out["ejected"] = ejected
    except SymphonyError as exc:
        out["error"] = str(exc)
        if phase == "verify":
            name = "verify"
        else:
            name = "inventory_read" if "inventory_read" not in nd.statuses else \
                next((n for n in graph.order() if n not in nd.statuses), None)
        if name:
            nd.record(name, Outcome(FAIL, str(exc), remediation="check the BMC answers and rerun"), time.time())
    finally:
        try:
            client.close()
        except Exception:  # pylint: disable=broad-except
            pass
        out["warnings"] = list(getattr(client, "warnings", []) or [])
        out["requests"] = getattr(client, "requests", 0)
    out["writes"] = nd.writes
    out["results"] = [r.to_dict() for r in nd.results]
    if phase == "verify" or (phase == "out_of_band" and any(r.status != PASS and r.check in (
            "inventory_read",) for r in nd.results)):
        by_check = {r.check: r for r in nd.results}
        for name in graph.order():
            if name not in by_check:
                by_check[name] = CheckResult(host, STAGE, name, NOT_RUN, "not reached in this run", run_id=run_id)
        results = derive_blocked(graph, list(by_check.values()))
        verdict = compute_gate(graph, results, ledger.waivers(host, STAGE) if ledger else ())
        verdict.reason = scrub(verdict.reason, [settings.password])
        if ledger is not None and not check_mode:
            ledger.record_gate(verdict, run_id)
        out["gate"] = verdict.to_dict()
    return out


def _inband_item(step):
    return {"check": step.check, "component": step.component, "kind": step.kind, "method": step.method,
            "target": step.target, "accepted": step.accepted, "image": step.image, "activation": step.activation,
            "observed": step.observed}


# --------------------------------------------------------------------------- batch
class ThreadLedger:
    """The ledger for worker threads: one SQLite connection per thread (SQLite objects are thread-bound)."""

    def __init__(self, location):
        import threading
        self.location = location
        self._local = threading.local()
        self._all = []
        self._lock = threading.Lock()

    def _get(self):
        led = getattr(self._local, "ledger", None)
        if led is None:
            led = self._local.ledger = open_ledger(self.location)
            with self._lock:
                self._all.append(led)
        return led

    def record_results(self, results):
        return self._get().record_results(results)

    def record_gate(self, verdict, run_id):
        return self._get().record_gate(verdict, run_id)

    def history(self, node, stage=None, check=None):
        return self._get().history(node, stage, check)

    def waivers(self, node, stage):
        return self._get().waivers(node, stage)

    def close(self):
        with self._lock:
            for led in self._all:
                try:
                    led.close()
                except Exception:  # pylint: disable=broad-except
                    pass
            self._all = []


def run_stage(nodes, manifests, settings, phase, run_id=None, check_mode=False, inband_results=None,
              tunings_results=None, client_factory=None, ledger=None):
    """Run one phase for many nodes with the bounded worker pool; returns the module's result dict.

    ``nodes``: ``{host: twin node}``; ``manifests``: ``{sku: manifest}``; ``phase``: ``plan``,
    ``out_of_band`` or ``verify``; ``inband_results``: ``{host: {check: result dict}}`` from the
    in-band module; ``tunings_results``: ``{host: result dict}``.  Raises :class:`SymphonyError`
    for problems of the whole run (bad map, unknown SKU, ledger).
    """
    if phase not in ("plan", "out_of_band", "verify"):
        raise ValidationError("phase must be plan, out_of_band or verify, not %r" % phase, where="phase")
    started = time.monotonic()
    run_id = run_id or new_run_id("prov")
    for host, node in nodes.items():
        if node.get("sku") not in manifests:
            raise ValidationError("SKU %r of %s has no manifest (known: %s)"
                                  % (node.get("sku"), host, ", ".join(sorted(manifests))), where=host)
    bmc_map = load_bmc_map(settings.bmc_map) if settings.bmc_map else None
    registries = MessageRegistries(directory=settings.registry_dir)
    own = None
    if ledger is None and settings.ledger and not check_mode:
        ledger = own = ThreadLedger(settings.ledger)
        ledger.history("-", STAGE)  # fail early (bad path, newer schema) for the whole run
    secrets = [settings.password] + [e.get("password") for e in (bmc_map or {}).values()]
    items = []
    for host, node in nodes.items():
        endpoint, entry = resolve_endpoint(node, bmc_map, None)
        items.append((host, {"node": node, "manifest": manifests[node["sku"]], "endpoint": endpoint, "entry": entry,
                             "inband_results": (inband_results or {}).get(host) or {},
                             "tunings_result": (tunings_results or {}).get(host)}))
    try:
        outcomes = run_batch(items, lambda h, it: process_node(h, it, settings, run_id, ledger, registries, phase,
                                                               check_mode, client_factory),
                             workers=settings.workers, per_key=settings.per_bmc,
                             key=lambda it: it["endpoint"]["url"])
    finally:
        if own is not None:
            own.close()
    hosts, warnings, lines, summary = {}, [], [], {}
    diff = {"before": {}, "after": {}}
    for host, _item in items:
        o = outcomes[host]
        entry = o.value if o.ok else {"error": o.error.get("msg"), "results": [], "writes": 0}
        entry = scrub(entry, secrets)
        warnings.extend("%s: %s" % (host, w) for w in entry.pop("warnings", []))
        lines.extend(entry.get("lines", []))
        if entry.get("diff"):
            diff["before"][host] = entry["diff"]["before"]
            diff["after"][host] = entry["diff"]["after"]
        entry["checks"] = [{"check": r["check"], "status": r["status"], "reason": r["reason"]}
                           for r in entry.pop("results", [])]
        gate = entry.get("gate")
        if gate:
            summary[gate["status"]] = summary.get(gate["status"], 0) + 1
        hosts[host] = entry
    return {"run_id": run_id, "phase": phase, "hosts": hosts, "plan_lines": lines, "diff": diff,
            "summary": summary, "warnings": sorted(set(warnings)),
            "changed": any(h.get("writes") for h in hosts.values()),
            "writes": sum(h.get("writes", 0) for h in hosts.values()),
            "wall_s": round(time.monotonic() - started, 3)}


def settings_from_params(params, check_mode=False):
    """A :class:`ProvisionSettings` from module params."""
    return ProvisionSettings(
        **fleet_settings_kwargs(params),
        ledger=None if check_mode else (params.get("ledger") or default_ledger_path()), image_dir=params.get("image_dir"),
        image_base_url=params.get("image_base_url"), allow_downgrade=bool(params.get("allow_downgrade")),
        task_timeout_s=params.get("task_timeout_s") or 1800.0,
        bmc_reboot_timeout_s=params.get("bmc_reboot_timeout_s") or 900.0,
        runtime_timeout_s=params.get("runtime_timeout_s"), runtime_image_url=params.get("runtime_image_url"),
        runtime_probe=params.get("runtime_probe") or "ssh", runtime_boot=params.get("runtime_boot") or "auto",
        poll_s=params.get("poll_s") or 5.0)


def module_run(params, phase, check_mode=False):
    """Entry point of the ``firmware_plan`` / ``firmware_reconcile`` modules: params -> result dict."""
    from .._core.sku import load_skus
    manifests = load_skus(params["sku_dir"])
    nodes = twin_nodes_from_params(params, manifests)
    settings = settings_from_params(params, check_mode or phase == "plan")
    require_credentials(settings, "firmware_reconcile")
    out = run_stage(nodes, manifests, settings, phase, run_id=params.get("run_id"),
                    check_mode=check_mode or phase == "plan", inband_results=params.get("inband_results"),
                    tunings_results=params.get("tunings_results"))
    if phase != "plan" and not params.get("return_plan"):
        for entry in out["hosts"].values():
            plan = entry.pop("plan", None)
            if plan:
                entry["plan_summary"] = plan["summary"]
    if phase == "plan" or check_mode:
        out["changed"] = any(((h.get("plan") or {}).get("summary") or h.get("plan_summary") or {}).get("update") or
                             ((h.get("plan") or {}).get("summary") or h.get("plan_summary") or {}).get("bios_changes")
                             for h in out["hosts"].values())
    out["failed_hosts"] = sorted(h for h, e in out["hosts"].items()
                                 if (e.get("gate") or {}).get("status", PASS) != PASS or e.get("error"))
    return out
