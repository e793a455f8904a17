"""POST actions of a generated BMC, dispatched through a route table.

:class:`Actions` is a mixin of :class:`symphony_emulator.bmc.BMC`.  ``_POST_ROUTES`` maps each action target
(a template over the SKU's ids: ``{S}`` the system, ``{M}`` the manager, ``{root}`` ``/redfish/v1``) to the
method that handles it; ``_post`` resolves the table once per BMC into exact paths.  Targets and
``ResetType`` values are the ones the tree advertises (``Actions`` of System, Manager, VirtualMedia, SEL,
Bios, UpdateService), behaviours as README "State" describes.
"""

from __future__ import annotations

from urllib.parse import urlparse

from symphony_emulator.replies import Reply, error_body, jreply, json_object
from symphony_emulator.resources import RESET_TYPES, ROOT
from symphony_emulator.vm import GuestError, guest_refused

# target template -> (method name, body): "json" handlers get the parsed JSON object, "raw" ones the headers
# and the bytes (the multipart push is not JSON).  A malformed JSON body is refused before the target is
# looked at, as before the table existed: 400 MalformedJSON even for an unknown target.
_POST_ROUTES = (
    ("{root}/UpdateService/upload", "_multipart_update", "raw"),
    ("{S}/Actions/ComputerSystem.Reset", "_system_reset", "json"),
    ("{M}/Actions/Manager.Reset", "_manager_reset", "json"),
    ("{M}/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia", "_insert_media", "json"),
    ("{M}/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia", "_eject_media", "json"),
    ("{M}/LogServices/SEL/Actions/LogService.ClearLog", "_clear_sel", "json"),
    ("{S}/Bios/Actions/Bios.ResetBios", "_reset_bios", "json"),
    ("{root}/UpdateService/Actions/UpdateService.SimpleUpdate", "_simple_update", "json"),
    ("{root}/UpdateService/Actions/UpdateService.StartUpdate", "_start_update", "json"),
)


class Actions:
    """POST dispatch and the System, Manager, VirtualMedia, SEL and Bios actions (mixin of :class:`BMC`)."""

    def _post_routes(self):
        """``{path: (handler, body kind)}`` of this BMC: ``_POST_ROUTES`` over its SKU's ids (set at start)."""
        spec = self.spec
        return {target.format(root=ROOT, S=spec.S, M=spec.M): (getattr(self, name), kind)
                for target, name, kind in _POST_ROUTES if name != "_start_update" or self._two_phase()}

    def _post(self, path, headers, body):
        handler, kind = self._post_table.get(path, (None, "json"))
        if kind == "raw":
            return handler(headers, body)
        data, refused = json_object(body)
        if refused is not None:
            return refused
        if handler is not None:
            return handler(data)
        if path in self.tree:
            return jreply(405, error_body("OperationNotAllowed"), {"Allow": "GET, HEAD"})
        return jreply(404, error_body("ResourceNotFound", "Action", path))

    def _system_reset(self, data):
        reset = data.get("ResetType")
        if reset is None:
            return jreply(400, error_body("ActionParameterMissing", "ComputerSystem.Reset", "ResetType"))
        if reset not in RESET_TYPES:
            return jreply(400, error_body("ActionParameterValueNotInList", reset, "ResetType", "ComputerSystem.Reset"))
        st = self.state
        try:
            return self._system_reset_to(st, reset)
        except GuestError as exc:   # a VM-backed node's QEMU refused: say what it said
            return guest_refused(exc)

    def _system_reset_to(self, st, reset):
        if self.vm is not None:
            st.power = self.vm.power_state()
        if reset in ("ForceOff", "GracefulShutdown"):
            if self.vm is not None:
                self.vm.power_off()
            st.power = "Off"
            st.boot_state = dict(st.boot_state, state="off", image=None)
        elif reset == "On":
            if st.power == "Off":
                self._host_boot()
        elif reset in ("ForceRestart", "GracefulRestart", "PowerCycle"):
            self._host_boot()
        self.invalidate()
        return Reply(204)

    def _host_boot(self):
        """Power on (or restart): apply pending BIOS settings and staged firmware, consume a one-time override."""
        st = self.state
        st.power = "On"
        if st.bios_pending:
            st.bios.update(st.bios_pending)
            st.bios_pending = {}
        for comp, version in list(st.staged.items()):
            st.versions[comp] = version
        st.staged = {}
        self.run_scheduled_jobs()
        target = "Hdd"
        if st.boot["enabled"] in ("Once", "Continuous") and st.boot["target"] != "None":
            target = st.boot["target"]
            if st.boot["enabled"] == "Once":
                st.boot = {"enabled": "Disabled", "target": "None"}
        runtime = self.spec.sku.get("runtime") or {}
        if self.vm is not None:
            # boot_override_ignored: the BMC accepts the override and boots the disk anyway, as some do
            self.vm.boot("Hdd" if st.faults["boot_override_ignored"] else target)
        image = st.virtual_media["image"] if st.virtual_media["inserted"] else None
        if target == "Cd" and image:
            final = {"state": "ephemeral_runtime", "image": image}
        elif target == "Pxe":
            final = ({"state": "ephemeral_runtime", "image": runtime.get("image_uri")}
                     if runtime.get("method") == "pxe" else {"state": "pxe", "image": None})
        else:
            final = {"state": "disk", "image": None}
        boots = st.boot_state.get("boots", 0) + 1
        st.boot_state = {"state": "booting", "image": None, "target": target, "boots": boots}
        final.update(target=target, boots=boots)

        def done(_due):
            if st.boot_state.get("boots") == boots and st.power == "On":
                st.boot_state = final
                self.invalidate()
        self.schedule(st.faults["host_boot_s"], done)
        self.invalidate()

    def _manager_reset(self, data):
        reset = data.get("ResetType", "GracefulRestart")
        if reset not in ("ForceRestart", "GracefulRestart"):
            return jreply(400, error_body("ActionParameterValueNotInList", reset, "ResetType", "Manager.Reset"))
        self.schedule(0.05, lambda due: self._bmc_reboot(due, None))
        return Reply(204)

    def _insert_media(self, data):
        image = data.get("Image")
        if not image:
            return jreply(400, error_body("ActionParameterMissing", "VirtualMedia.InsertMedia", "Image"))
        if self.state.virtual_media["inserted"]:
            return jreply(409, error_body("ResourceInUse"))
        if self.vm is not None:
            try:
                self.vm.insert(image)
            except GuestError as exc:
                return guest_refused(exc)
        self.state.virtual_media = {"image": image, "inserted": True,
                                    "protocol": data.get("TransferProtocolType")
                                    or (urlparse(image).scheme.upper() or None)}
        self.invalidate()
        return Reply(204)

    def _eject_media(self, _data):
        if self.vm is not None:
            try:
                self.vm.eject()
            except GuestError as exc:
                return guest_refused(exc)
        self.state.virtual_media = {"image": None, "inserted": False, "protocol": None}
        self.invalidate()
        return Reply(204)

    def _clear_sel(self, _data):
        self.state.sel = []
        self._add_sel("OK", "Event Log Cleared", "Event Logging Disabled")
        return Reply(204)

    def _reset_bios(self, _data):
        self.state.bios_pending = dict((self.spec.sku.get("bios") or {}).get("attributes") or {})
        self.invalidate()
        return Reply(204)
