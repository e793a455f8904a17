# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """Options of every module that talks to a BMC over Redfish.

    ``DOCUMENTATION``: the BMC connection options, exactly ``_redfish.argspec.bmc_connection_argument_spec()``
    (every Redfish module, one BMC or a fleet); ``SINGLE_BMC``: the options ``_redfish.argspec.redfish_argument_spec()``
    adds for a module that talks to one BMC.
    """

    DOCUMENTATION = r"""
options:
  username:
    description:
      - BMC user name.
      - Required by the modules that talk to one BMC (C(bmc_url)); a fleet module uses it for the nodes whose
        C(bmc_map) entry names none.
    type: str
  password:
    description:
      - BMC password (vault or AWX credential). Never logged, never returned, never written to the ledger.
      - Defaults to the E(SYMPHONY_BMC_PASSWORD) environment variable.
      - Required by the modules that talk to one BMC; a fleet module uses it for the nodes whose C(bmc_map)
        entry names none.
    type: str
  auth:
    description:
      - V(session) creates a Redfish session (X-Auth-Token) and always deletes it at the end.
      - V(basic) sends HTTP Basic credentials with every request.
      - V(auto) tries a session and falls back to Basic when the BMC cannot create one (for example
        C(SessionLimitExceeded)), with a warning.
    type: str
    choices: [session, basic, auto]
    default: auto
  validate_certs:
    description:
      - Verify the BMC's TLS certificate. Turning this off is reported as a warning.
    type: bool
    default: true
  ca_path:
    description: A CA bundle file (or directory) to verify the BMC's certificate with.
    type: path
  connect_timeout:
    description: Seconds to wait for a TCP/TLS connection to a BMC, per request.
    type: float
    default: 5
  read_timeout:
    description: Seconds to wait for a BMC's answer, per request.
    type: float
    default: 30
  retries:
    description:
      - Re-sends after a connection error, a timeout, HTTP 408, 429 or 5xx (GETs; POST/PATCH only when the
        request was not processed; the login POST too), with exponential backoff (0.5, 1, 2 s) or the BMC's
        C(Retry-After). A fault that outlives them makes the node C(blocked) "BMC unreachable", never C(fail).
    type: int
    default: 3
  bmc_reboot_timeout_s:
    description:
      - Seconds a BMC may take to come back from a reboot. A run's entry check waits this long for a BMC that
        answers like one still rebooting (its connections reset, or HTTP 503 while its web server starts), e.g.
        after an interrupted run's firmware update, before the node is C(blocked) "BMC unreachable"; a refused
        connection is not waited for. Provisioning waits this long for a BMC to come back with its new version
        after its own update. C(0) makes the entry check not wait.
    type: float
    default: 900
"""

    SINGLE_BMC = r"""
options:
  bmc_url:
    description:
      - The BMC, as C(https://host[:port]) (a bare host gets C(https://); a trailing C(/redfish/v1) is accepted).
    type: str
    required: true
  max_concurrency:
    description: At most this many requests in flight to one BMC at once.
    type: int
    default: 4
  registry_dir:
    description:
      - A directory of Redfish message registry JSON files (for example DMTF C(Base.1.22.1.json)) used to turn
        C(MessageId)s in BMC errors into messages. sushy's bundled Base registries are always used as well.
    type: path
"""
