# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each Redfish module's argument spec against its DOCUMENTATION merged with its doc fragments.

What ansible-test validate-modules would catch, as a unit test: the option names, ``type``, ``default``,
``required``, ``choices`` and ``elements`` of every module built on the BMC connection spec
(``_redfish.argspec``) match its documentation once the fragments are merged as Ansible merges them
(the module's own entry for an option wins over a fragment's, key by key).
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

import pytest
import yaml

from ansible.module_utils.basic import env_fallback

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._redfish import argspec
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import client_from_params
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.settings import DEFAULT_REBOOT_TIMEOUT_S, DEFAULT_RETRIES, ClientSettings
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.settings import BmcFleetSettings

COLLECTION = "ansible_collections.symphony.cluster.plugins"
PLUGINS_DIR = pathlib.Path(__file__).resolve().parents[3] / "plugins"
MODULES_DIR = PLUGINS_DIR / "modules"
SPEC_CALL = re.compile(r"\b(redfish_argument_spec|fleet_argument_spec)\(")
COMPARED = ("type", "default", "required", "choices", "elements")


def _connection_modules():
    return sorted(p.stem for p in MODULES_DIR.glob("*.py") if SPEC_CALL.search(p.read_text()))


# Imported while the tests are collected: once a test has installed Ansible's collection finder, importing a
# module of this collection anew goes through it and wants collection metadata a unit run does not load.
MODULES = {name: importlib.import_module("%s.modules.%s" % (COLLECTION, name)) for name in _connection_modules()}


def _fragment(name):
    # "symphony.cluster.fleet.TWIN_BATCH" -> doc_fragments/fleet.py, ModuleDocFragment.TWIN_BATCH (read as text,
    # as ansible-doc reads it, for the same reason as above)
    parts = name.split(".")
    assert parts[:2] == ["symphony", "cluster"], name
    wanted = parts[3] if len(parts) > 3 else "DOCUMENTATION"
    tree = ast.parse((PLUGINS_DIR / "doc_fragments" / ("%s.py" % parts[2])).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModuleDocFragment")
    text = next(ast.literal_eval(n.value) for n in cls.body
                if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == wanted for t in n.targets))
    return yaml.safe_load(text)


def _documented_options(module):
    doc = yaml.safe_load(module.DOCUMENTATION)
    options = {}
    for name in doc.get("extends_documentation_fragment") or []:
        for opt, entry in (_fragment(name).get("options") or {}).items():
            assert opt not in options, "%s: option %s documented by two fragments" % (name, opt)
            options[opt] = dict(entry)
    for opt, entry in (doc.get("options") or {}).items():
        options.setdefault(opt, {}).update(entry)
    return options


def _spec(module):
    spec = getattr(module, "ARGUMENT_SPEC", None)
    return spec if spec is not None else module.argument_spec()


def _normalised(entry):
    out = {key: entry.get(key) for key in COMPARED}
    out["type"] = out["type"] or "str"
    out["required"] = bool(out["required"])
    return out


def test_every_connection_module_is_covered():
    assert _connection_modules() == ["bios_settings", "bmc_sel_scan", "firmware_plan", "firmware_reconcile",
                                     "fleet_audit_bmc", "redfish_inventory_info", "twin_audit"]


@pytest.mark.parametrize("name", _connection_modules())
def test_argument_spec_matches_documentation(name):
    module = MODULES[name]
    documented = _documented_options(module)
    spec = _spec(module)
    assert sorted(spec) == sorted(documented)
    for opt, entry in spec.items():
        assert _normalised(entry) == _normalised(documented[opt]), "%s: option %s" % (name, opt)


@pytest.mark.parametrize("name", _connection_modules())
def test_connection_options_are_the_one_spec(name):
    spec = _spec(MODULES[name])
    for opt, entry in argspec.bmc_connection_argument_spec().items():
        assert spec[opt] == entry, "%s: option %s differs from the one BMC connection spec" % (name, opt)
    assert spec["password"]["no_log"] is True
    assert spec["password"]["fallback"] == (env_fallback, ["SYMPHONY_BMC_PASSWORD"])
    assert spec["validate_certs"]["default"] is True


def test_connection_fragment_is_the_connection_spec():
    documented = _fragment("symphony.cluster.redfish")["options"]
    spec = argspec.bmc_connection_argument_spec()
    assert sorted(documented) == sorted(spec)
    for opt, entry in spec.items():
        assert _normalised(entry) == _normalised(documented[opt]), opt


def test_specs_are_fresh_dicts():
    one = argspec.redfish_argument_spec()
    one["retries"]["default"] = 99
    assert argspec.redfish_argument_spec()["retries"]["default"] == 3


def test_one_retry_default():
    # issue 25: the connection spec said 2 re-sends while the client defaulted to 3; one constant now
    assert argspec.bmc_connection_argument_spec()["retries"]["default"] == ClientSettings().retries == \
        BmcFleetSettings().retries == DEFAULT_RETRIES
    assert argspec.bmc_connection_argument_spec()["bmc_reboot_timeout_s"]["default"] == \
        BmcFleetSettings().bmc_reboot_timeout_s == DEFAULT_REBOOT_TIMEOUT_S


@pytest.mark.parametrize("missing", ["username", "password"])
def test_one_bmc_client_still_needs_credentials(missing):
    # the spec leaves them optional for the fleet modules; a single-BMC module fails before any request
    params = {"bmc_url": "https://bmc.test", "username": "admin", "password": "s3cr3t-Passw0rd"}
    params[missing] = None
    with pytest.raises(ValidationError, match="missing required arguments: %s" % missing):
        client_from_params(params)
