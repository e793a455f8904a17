"""Several nodes behind one BMC (a blade chassis) in a generated BMC's resource tree.

The enclosure is the SKU's chassis (its serial, PSUs, fans and sensors serve every node); each node has its own
``ComputerSystem`` and a ``Chassis/<system id>`` of ``ChassisType`` ``Blade`` that the enclosure contains
(DSP0268 Chassis ``Links.Contains`` / ``ContainedBy``, ComputerSystem ``Links.Chassis``), as blade BMCs publish
them, so a reader can tell which parts are whose.
"""

from __future__ import annotations

from symphony_emulator.resources import ROOT, T, collection, link, ok_status


def add_nodes(t, spec, siblings):
    """Add the sibling nodes (``[(Spec, their system resources)]``) and every node's blade chassis to ``t``."""
    for sib, part in siblings:
        t.update({uri: body for uri, body in part.items() if uri == sib.S or uri.startswith(sib.S + "/")})
    systems = ["%s/Systems/%s" % (ROOT, sid) for sid in spec.node_ids]
    t[ROOT + "/Systems"] = collection(ROOT + "/Systems", "ComputerSystem", "Computer System Collection", systems)
    blades = []
    for sid, suri in zip(spec.node_ids, systems):
        blade = "%s/Chassis/%s" % (ROOT, sid)
        blades.append(blade)
        t[blade] = {"@odata.id": blade, "@odata.type": T["Chassis"], "Id": sid, "Name": "Blade %s" % sid,
                    "ChassisType": "Blade", "Status": ok_status(),
                    "Links": {"ContainedBy": link(spec.C), "ComputerSystems": [link(suri)],
                              "ManagedBy": [link(spec.M)]}}
        t[suri]["Links"]["Chassis"] = [link(blade)]
    enclosure = t[spec.C]
    enclosure["ChassisType"] = "Enclosure"
    enclosure["Links"]["Contains"] = [link(b) for b in blades]
    enclosure["Links"]["ComputerSystems"] = [link(s) for s in systems]
    members = [m["@odata.id"] for m in t[ROOT + "/Chassis"]["Members"]] + blades
    t[ROOT + "/Chassis"] = collection(ROOT + "/Chassis", "Chassis", "Chassis Collection", members)
