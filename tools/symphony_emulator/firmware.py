"""Firmware updates of a generated BMC: SimpleUpdate, multipart push, update tasks and their monitors.

:class:`FirmwareUpdates` is a mixin of :class:`symphony_emulator.bmc.BMC`; it uses the BMC's ``spec``,
``state``, ``tasks``, ``schedule``, ``invalidate``, ``_clock``/``_wall`` and ``_bmc_reboot``.  Images follow
the README's image rule: a demo image's bytes are :func:`demo_image_bytes`, whose sha256 the SKU manifests carry.
Task shapes and messages follow DSP0268 Task and the DMTF Update registry (R-15, R-17).

A Supermicro BMC (``system.bmc_vendor: Supermicro``) updates in two phases, as the X13 does (the capture's
UpdateService offers ``#UpdateService.StartUpdate``; SMC.1.0.0 registry): the multipart push answers 202 with the
verify Task in the body and no ``Location``; the verified image waits (``AwaitToUpdate``) and installs only on
``UpdateService.StartUpdate``; a second push meanwhile is refused ``OemFirmwareAlreadyInUpdateMode`` until a BMC
reset (which wipes the task store, and the waiting image with it).

A Dell BMC (``bmc_vendor: Dell``) answers SimpleUpdate with a job (iDRAC9 Redfish API guide, "Jobs"):
``Location: Managers/<id>/Jobs/JID_<n>``, a ``DellJob`` with ``JobState``/``Message`` and no ``TaskState``; an image
that activates at a host reset leaves its job ``Scheduled`` until that reset, then ``Completed``.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import re
from urllib.parse import urlparse

from symphony_emulator.replies import error_body, fill_message, jreply, now_iso
from symphony_emulator.resources import ROOT, T, collection_type, link

UPDATE = "Update.1.3"
SMC = "SMC.1.0.0"
DEMO_IMAGE_PREFIX = "symphony-demo-image"
_IMAGE_PATH = re.compile(r"/(?P<component>[a-z0-9][a-z0-9_]*)/(?P<version>[^/]+)/image\.bin$")


def demo_image_bytes(sku, component, version):
    """The bytes whose sha256 is a demo firmware image's checksum (see README: image rule)."""
    return ("%s:%s:%s:%s" % (DEMO_IMAGE_PREFIX, sku, component, version)).encode()


class FirmwareUpdates:
    """SimpleUpdate, multipart push and the task store of one BMC (mixin of :class:`BMC`)."""

    def _component(self, comp_id):
        for comp in self.spec.sku["firmware"]:
            if comp["id"] == comp_id:
                return comp
        return None

    def _simple_update(self, data):
        uri = data.get("ImageURI")
        if not uri:
            return jreply(400, error_body("ActionParameterMissing", "UpdateService.SimpleUpdate", "ImageURI"))
        protocol = data.get("TransferProtocol")
        if protocol is None and (self.state.faults["require_transfer_protocol"] or "://" not in uri):
            return jreply(400, error_body("PropertyMissing", "TransferProtocol"))
        if protocol is not None and protocol not in ("HTTP", "HTTPS"):
            return jreply(400, error_body("ActionParameterValueNotInList", protocol, "TransferProtocol",
                                          "UpdateService.SimpleUpdate"))
        for target in data.get("Targets") or []:
            if target.rstrip("/") not in self.tree:
                return jreply(400, error_body("ActionParameterValueError", "Targets", "UpdateService.SimpleUpdate"))
        parsed = urlparse(uri)
        expected = ((data.get("Oem") or {}).get("Symphony") or {}).get("ExpectedSha256")
        found = self.image_for_uri(uri)
        if found is None:
            return self._new_task(None, None, uri, "transfer_failed")
        comp_id, version = found
        image = demo_image_bytes(self.spec.sku["sku"], comp_id, version)
        if "corrupt=1" in (parsed.query or ""):
            image += b":corrupt"
        outcome = "ok"
        actual = hashlib.sha256(image).hexdigest()
        if actual != hashlib.sha256(demo_image_bytes(self.spec.sku["sku"], comp_id, version)).hexdigest() or \
                (expected and expected.lower() != actual):
            outcome = "verify_failed"
        return self._new_task(comp_id, version, uri, outcome, sha256=actual)

    def image_for_uri(self, uri):
        """``(component id, version)`` a firmware image URI stands for, or None (see README: image rule).

        Accepted shapes: ``.../<component>/<version>/image.bin``; the manifest's own ``image.uri``
        (its ``target`` version); ``.../<component>/<version>.bin`` where the file stem is the
        version with characters other than ``[A-Za-z0-9.-]`` replaced by ``_``.
        """
        path = urlparse(uri).path
        match = _IMAGE_PATH.search(path)
        if match and self._component(match.group("component")):
            return match.group("component"), match.group("version")
        bare = uri.split("?", 1)[0]
        for comp in self.spec.sku["firmware"]:
            image = comp.get("image") or {}
            if image.get("uri") == bare:
                return comp["id"], comp.get("target") or comp["accepted"][0]
        parts = path.rstrip("/").split("/")
        if len(parts) >= 2 and parts[-1].endswith(".bin") and self._component(parts[-2]):
            comp = self._component(parts[-2])
            stem = parts[-1][:-4]
            for version in [comp.get("target")] + list(comp["accepted"]):
                if version and re.sub(r"[^A-Za-z0-9.-]", "_", version) == stem:
                    return comp["id"], version
            return comp["id"], stem
        return None

    def _multipart_update(self, headers, body):
        ctype = headers.get("Content-Type", "")
        if not ctype.startswith("multipart/form-data"):
            return jreply(400, error_body("MissingOrMalformedPart"))
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        params, image = {}, None
        for part in msg.iter_parts() if msg.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if name == "UpdateParameters":
                try:
                    params = json.loads(payload or b"{}")
                except ValueError:
                    return jreply(400, error_body("MalformedJSON"))
            elif name == "UpdateFile":
                image = payload
        if image is None:
            return jreply(400, error_body("MissingOrMalformedPart"))
        actual = hashlib.sha256(image).hexdigest()
        expected = ((params.get("Oem") or {}).get("Symphony") or {}).get("ExpectedSha256")
        text = image.decode("utf-8", "replace").split(":", 3)
        if len(text) != 4 or text[0] != DEMO_IMAGE_PREFIX or text[1] != self.spec.sku["sku"] \
                or self._component(text[2]) is None:
            return self._new_task(None, None, "UpdateFile", "verify_failed", sha256=actual)
        outcome = "verify_failed" if expected and expected.lower() != actual else "ok"
        if self._two_phase():
            if self._awaiting_start() is not None:
                return jreply(400, _smc_error("OemFirmwareAlreadyInUpdateMode", [text[2]]))
            return self._new_task(text[2], text[3], "UpdateFile", outcome, sha256=actual, phase="verify")
        return self._new_task(text[2], text[3], "UpdateFile", outcome, sha256=actual)

    def _two_phase(self):
        """Whether this BMC installs a pushed image only on StartUpdate (Supermicro)."""
        return self.spec.sku["system"].get("bmc_vendor") == "Supermicro"

    def _awaiting_start(self):
        """The verified task whose image waits for StartUpdate, or None."""
        return next((t for t in self.tasks.values() if t.get("awaiting_start")), None)

    def _start_update(self, _data):
        """UpdateService.StartUpdate: install the verified image (Supermicro's second phase)."""
        waiting = self._awaiting_start()
        if waiting is None:
            return jreply(400, _smc_error("OemFirmwareNotInUpdateMode", []))
        waiting["awaiting_start"] = False
        return self._new_task(waiting["component"], waiting["version"], waiting["image"], waiting["outcome"],
                              sha256=waiting["sha256"])

    def _dell_jobs(self):
        """Whether this BMC reports updates as Dell jobs."""
        return self.spec.sku["system"].get("bmc_vendor") == "Dell"

    def _new_task(self, comp_id, version, image, outcome, sha256=None, phase="install"):
        if comp_id and outcome == "ok":
            for d in self.spec.by_kind.get("firmware_task_fails", []):
                if d["component"] == comp_id:
                    outcome = "apply_failed"
        self._task_seq += 1
        tid = str(self._task_seq)
        task = {"id": tid, "component": comp_id, "version": version, "image": image, "outcome": outcome,
                "state": "Running", "status": "OK", "start": self._clock(), "start_wall": self._wall(),
                "end_wall": None, "duration": float(self.state.faults["task_duration_s"]), "messages": [],
                "sha256": sha256, "phase": phase, "awaiting_start": False}
        task["messages"].append(_update_msg("UpdateInProgress", []))
        self.tasks[tid] = task
        self.schedule(task["duration"], lambda due: self._finish_task(task, due))
        monitor = "%s/TaskService/Tasks/%s/Monitor" % (ROOT, tid)
        if phase == "verify":   # Supermicro: the Task in the body, no Location
            return jreply(202, self._task_body(task))
        if self._dell_jobs():
            task["job"] = True
            return jreply(202, self._job_body(task), {"Location": self._job_uri(task)})
        return jreply(202, self._task_body(task), {"Location": monitor, "Retry-After": "1"})

    def _finish_task(self, task, due):
        if self.tasks.get(task["id"]) is not task:
            return   # wiped by a BMC reboot
        comp = self._component(task["component"]) if task["component"] else None
        target = comp.get("name", comp["id"]) if comp else "unknown"
        task["end_wall"] = self._wall() - max(0.0, self._clock() - due)
        outcome = task["outcome"]
        if outcome == "transfer_failed":
            task.update(state="Exception", status="Critical")
            task["messages"].append(_update_msg("TransferFailed", [task["image"], "UpdateService"], "Critical"))
            return
        if outcome == "verify_failed":
            task.update(state="Exception", status="Critical")
            task["messages"].append(_update_msg("VerificationFailed", [task["image"], target], "Critical"))
            return
        if outcome == "apply_failed":
            # Dell-style: Completed yet Critical
            task.update(state="Completed", status="Critical")
            task["messages"].append(_update_msg("ApplyFailed", [task["image"], target], "Critical"))
            return
        task.update(state="Completed", status="OK")
        if task["phase"] == "verify":
            task["awaiting_start"] = True
            task["messages"].append(_update_msg("AwaitToUpdate", [task["image"], target]))
            return
        activation = comp["activation"]
        if activation == "none":
            self.state.versions[comp["id"]] = task["version"]
            task["messages"].append(_update_msg("UpdateSuccessful", [target, task["image"]]))
        elif activation == "bmc_reset":
            task["messages"].append(_update_msg("UpdateSuccessful", [target, task["image"]]))
            self.schedule(0.2, lambda due: self._bmc_reboot(due, (comp["id"], task["version"])))
        else:   # host_reset / ac_cycle: staged until the host resets
            self.state.staged[comp["id"]] = task["version"]
            task["messages"].append(_update_msg("AwaitToActivate", [task["image"], target]))
            if task.get("job"):
                task["state"] = "Scheduled"   # a Dell job runs at the next host reset
        self.invalidate()

    def run_scheduled_jobs(self):
        """The host reset runs every Dell job waiting for it (called from the host boot)."""
        for task in self.tasks.values():
            if task.get("job") and task["state"] == "Scheduled":
                task["state"] = "Completed"

    def _job_uri(self, task):
        return "%s/Jobs/JID_%s" % (self.spec.M, task["id"])

    def _job_body(self, task):
        """A DellJob (DellJob.v1_5_0): JobState and one Message instead of TaskState and Messages."""
        state = task["state"]
        if state == "Exception" or (state == "Completed" and task["status"] != "OK"):
            state, message = "Failed", "Unable to complete the firmware update."
        else:
            message = {"Running": "Job in progress.", "Scheduled": "Task successfully scheduled.",
                       "Completed": "Job completed successfully."}.get(state, state)
        return {"@odata.id": self._job_uri(task), "@odata.type": "#DellJob.v1_5_0.DellJob",
                "Id": "JID_%s" % task["id"], "Name": "Firmware Update: %s" % (task["component"] or "?"),
                "JobType": "FirmwareUpdate", "JobState": state, "Message": message,
                "PercentComplete": 100 if state in ("Completed", "Failed") else 50 if state == "Scheduled" else 10}

    def get_job(self, path):
        """GET ``Managers/<id>/Jobs/JID_<n>``."""
        tid = path.rstrip("/").rsplit("/JID_", 1)[-1]
        task = self.tasks.get(tid)
        if task is None or not task.get("job"):
            return jreply(404, error_body("ResourceNotFound", "DellJob", path.rsplit("/", 1)[-1]))
        return jreply(200, self._job_body(task))

    def _task_body(self, task):
        uri = "%s/TaskService/Tasks/%s" % (ROOT, task["id"])
        if task["state"] == "Running":
            elapsed = self._clock() - task["start"]
            pct = 0 if task["duration"] <= 0 else min(99, int(100 * elapsed / task["duration"]))
        else:
            pct = 100
        body = {"@odata.id": uri, "@odata.type": T["Task"], "Id": task["id"],
                "Name": "Firmware update %s" % (task["component"] or "?"), "TaskState": task["state"],
                "TaskStatus": task["status"], "PercentComplete": pct, "StartTime": now_iso(task["start_wall"]),
                "TaskMonitor": uri + "/Monitor", "Messages": list(task["messages"])}
        if task["end_wall"] is not None:
            body["EndTime"] = now_iso(task["end_wall"])
        return body

    def _task_summary(self, task):
        body = self._task_body(task)
        return {"id": task["id"], "component": task["component"], "version": task["version"],
                "state": body["TaskState"], "status": body["TaskStatus"], "percent": body["PercentComplete"],
                "sha256": task["sha256"],
                "messages": [m["MessageId"] for m in task["messages"]]}

    def _get_task(self, path):
        rest = path[len(ROOT + "/TaskService/Tasks"):].strip("/")
        if not rest:
            uris = ["%s/TaskService/Tasks/%s" % (ROOT, t) for t in self.tasks]
            return jreply(200, {"@odata.id": ROOT + "/TaskService/Tasks", "@odata.type": collection_type("Task"),
                                "Name": "Task Collection", "Members": [link(u) for u in uris],
                                "Members@odata.count": len(uris)})
        parts = rest.split("/")
        task = self.tasks.get(parts[0])
        if task is None or len(parts) > 2 or (len(parts) == 2 and parts[1] != "Monitor"):
            return jreply(404, error_body("ResourceNotFound", "Task", parts[0]))
        body = self._task_body(task)
        if len(parts) == 2:   # task monitor: 202 while running, then the final Task with 200
            running = task["state"] == "Running"
            return jreply(202 if running else 200, body, {"Retry-After": "1"} if running else None)
        return jreply(200, body)


def _update_msg(message_id, args, severity="OK"):
    templates = {
        "UpdateInProgress": "An update is in progress.",
        "UpdateSuccessful": "Device '%1' successfully updated with image '%2'.",
        "AwaitToActivate": "Awaiting for an action to proceed with activating image '%1' on '%2'.",
        "AwaitToUpdate": "Awaiting for an action to proceed with installing image '%1' on '%2'.",
        "TransferFailed": "Transfer of image '%1' to '%2' failed.",
        "VerificationFailed": "Verification of image '%1' at '%2' failed.",
        "ApplyFailed": "Installation of image '%1' to '%2' failed.",
    }
    return {"MessageId": "%s.%s" % (UPDATE, message_id), "Message": fill_message(templates[message_id], args),
            "MessageArgs": [str(a) for a in args], "MessageSeverity": severity}


def _smc_error(message_id, args):
    """An error in Supermicro's SMC.1.0.0 registry (messages as the capture's registry words them)."""
    templates = {"OemFirmwareAlreadyInUpdateMode": "The %1 firmware update was already in update mode.",
                 "OemFirmwareNotInUpdateMode": "The BMC firmware update was not in update mode."}
    info = {"MessageId": "%s.%s" % (SMC, message_id), "Message": fill_message(templates[message_id], args),
            "MessageArgs": [str(a) for a in args], "MessageSeverity": "Warning"}
    return {"error": {"code": info["MessageId"], "message": info["Message"], "@Message.ExtendedInfo": [info]}}
