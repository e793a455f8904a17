# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ONE BMC connection argument spec, paired one-to-one with the doc fragment ``symphony.cluster.redfish``.

As kubernetes.core pairs ``module_utils/args_common.py`` with ``doc_fragments/k8s_auth_options.py``:

* :func:`bmc_connection_argument_spec` <-> ``symphony.cluster.redfish`` (``DOCUMENTATION``): how any
  module reaches and authenticates to a BMC; every module that talks Redfish takes it, the
  single-BMC modules and the fleet modules (``_fleet.batch.fleet_argument_spec`` adds the fleet's
  options on top).  One default per option; the password is ``no_log`` and falls back to
  ``SYMPHONY_BMC_PASSWORD``; TLS is verified unless turned off.
* :func:`redfish_argument_spec` <-> ``symphony.cluster.redfish`` + ``symphony.cluster.redfish.SINGLE_BMC``:
  the spec of a module that talks to one BMC (adds ``bmc_url``, ``max_concurrency``, ``registry_dir``).

Credentials are not ``required`` here: a fleet module may take them per node from its BMC map.
A module that talks to one BMC checks them when it builds its client (``client.client_from_params``).
``tests/unit/redfish/test_argspec_docs.py`` compares each module's spec with its DOCUMENTATION.
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import env_fallback

from .settings import DEFAULT_REBOOT_TIMEOUT_S, DEFAULT_RETRIES

PASSWORD_ENV = "SYMPHONY_BMC_PASSWORD"

_CONNECTION_OPTIONS: dict[str, dict[str, Any]] = {
    "username": {"type": "str"},
    "password": {"type": "str", "no_log": True, "fallback": (env_fallback, [PASSWORD_ENV])},
    "auth": {"type": "str", "default": "auto", "choices": ["session", "basic", "auto"]},
    "validate_certs": {"type": "bool", "default": True},
    "ca_path": {"type": "path"},
    "connect_timeout": {"type": "float", "default": 5},
    "read_timeout": {"type": "float", "default": 30},
    "retries": {"type": "int", "default": DEFAULT_RETRIES},
    "bmc_reboot_timeout_s": {"type": "float", "default": DEFAULT_REBOOT_TIMEOUT_S},
}

_SINGLE_BMC_OPTIONS: dict[str, dict[str, Any]] = {
    "bmc_url": {"type": "str", "required": True},
    "max_concurrency": {"type": "int", "default": 4},
    "registry_dir": {"type": "path"},
}


def _copy(options: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    # a fresh dict per module, so one module's additions never leak into another's spec
    return {name: dict(option) for name, option in options.items()}


def bmc_connection_argument_spec() -> dict[str, dict[str, Any]]:
    """The BMC connection options (fragment ``symphony.cluster.redfish``), as a new dict.

    ``username``, ``password`` (``no_log``; default ``$SYMPHONY_BMC_PASSWORD``), ``auth``
    (``auto``), ``validate_certs`` (true), ``ca_path``, ``connect_timeout`` (5 s),
    ``read_timeout`` (30 s), ``retries`` (``settings.DEFAULT_RETRIES`` re-sends), ``bmc_reboot_timeout_s``
    (``settings.DEFAULT_REBOOT_TIMEOUT_S`` seconds).
    """
    return _copy(_CONNECTION_OPTIONS)


def redfish_argument_spec() -> dict[str, dict[str, Any]]:
    """The spec of a module that talks to one BMC (fragments ``symphony.cluster.redfish`` and
    ``symphony.cluster.redfish.SINGLE_BMC``): the connection options plus ``bmc_url`` (required),
    ``max_concurrency`` (4 requests in flight) and ``registry_dir``.  A new dict."""
    spec = bmc_connection_argument_spec()
    spec.update(_copy(_SINGLE_BMC_OPTIONS))
    return spec
