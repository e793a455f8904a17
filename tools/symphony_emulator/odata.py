"""The OData documents of a generated BMC: ``$metadata`` (CSDL references) and the service document.

Both are derived from the resource tree (``tree.build_tree``): the namespaces its ``@odata.type``s name,
and the ServiceRoot's top-level services.
"""

from __future__ import annotations

from symphony_emulator.resources import ROOT


def _namespaces(resources):
    out = set()
    for body in resources.values():
        kind = body.get("@odata.type", "")
        if kind.startswith("#"):
            name = kind[1:].split(".")[0]
            out.add(name)
    return out


def metadata_xml(resources):
    """``$metadata``: an OData CSDL document referencing the DMTF schema files the tree uses."""
    names = sorted(_namespaces(resources) | {"Task", "Session", "Message", "Resource", "Settings"})
    refs = []
    for name in names:
        refs.append('  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/%s_v1.xml">\n'
                    '    <edmx:Include Namespace="%s"/>\n  </edmx:Reference>' % (name, name))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">\n%s\n'
            '  <edmx:DataServices>\n    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">\n'
            '      <EntityContainer Name="Service" Extends="ServiceRoot.v1_20_0.ServiceContainer"/>\n'
            '    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n' % "\n".join(refs))


def odata_service_document(resources):
    root = resources[ROOT]
    values = [{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"}]
    for key in ("Systems", "Chassis", "Managers", "SessionService", "UpdateService", "TaskService", "Registries"):
        if key in root:
            values.append({"name": key, "kind": "Singleton", "url": root[key]["@odata.id"]})
    return {"@odata.context": "/redfish/v1/$metadata", "value": values}
