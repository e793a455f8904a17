#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: bmc_discover
short_description: Find BMC addresses by MAC in DHCP leases and write host reservations for the planned addresses
description:
  - Reads an ISC dhcpd leases file, a Kea memfile lease4 CSV or a dnsmasq leases file, finds each node's current
    BMC lease by its MAC (MACs normalised with netaddr) and renders a reservation of the twin's planned BMC
    address, as ISC C(host) stanzas or a Kea C(reservations) JSON document.
  - Flags a planned address already leased to another MAC, and optionally checks each BMC answers on its
    Redfish port.
  - Writes the reservations file only when its content differs (check mode and diff supported).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  lease_file:
    description: The DHCP server's lease file.
    type: path
    required: true
  lease_format:
    description: Format of O(lease_file).
    type: str
    choices: [isc, kea, dnsmasq]
    default: isc
  nodes:
    description: Twin nodes, each with C(hostname), C(bmc_mac) and C(bmc_address) (the planned address).
    type: list
    elements: dict
    required: true
  reservation_format:
    description: Render reservations as ISC C(host) stanzas or a Kea C(reservations) JSON document.
    type: str
    choices: [isc, kea]
    default: isc
  reservations_file:
    description: Write the reservations here (include it from dhcpd.conf or the Kea configuration).
    type: path
  probe:
    description: Also open a TCP connection to each BMC (at its lease address, else the planned one).
    type: bool
    default: false
  port:
    description: Port to probe.
    type: int
    default: 443
  timeout:
    description: Seconds to wait for each probe.
    type: float
    default: 5
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details:
      - Computes the leases and reservations and reports whether the file would change; writes nothing.
  diff_mode:
    support: full
    details:
      - Shows the reservations file before and after.
"""

EXAMPLES = r"""
- name: Capture BMC leases and reserve the planned addresses
  symphony.cluster.bmc_discover:
    lease_file: /var/lib/dhcp/dhcpd.leases
    lease_format: isc
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'symphony_twin') | list }}"
    reservation_format: isc
    reservations_file: /etc/dhcp/symphony-bmc-hosts.conf
    probe: true
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
hosts:
  description: Per host the lease found (or why none), the leased and planned address, a conflicting MAC and the
    rendered reservations; with O(probe), C(reachable) and C(reachable_reason).
  returned: always
  type: dict
missing:
  description: Hosts without a current lease.
  returned: always
  type: list
  elements: str
reservations:
  description: The rendered reservations file content.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.discovery import module_bmc_discover
from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module

ARGUMENT_SPEC = {
    "lease_file": {"type": "path", "required": True},
    "lease_format": {"type": "str", "choices": ["isc", "kea", "dnsmasq"], "default": "isc"},
    "nodes": {"type": "list", "elements": "dict", "required": True},
    "reservation_format": {"type": "str", "choices": ["isc", "kea"], "default": "isc"},
    "reservations_file": {"type": "path"},
    "probe": {"type": "bool", "default": False},
    "port": {"type": "int", "default": 443},
    "timeout": {"type": "float", "default": 5},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, module_bmc_discover)


if __name__ == "__main__":
    main()
