#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_topology
short_description: Write Slurm's topology.conf from the verified cabling topology
description:
  - Writes C(topology.conf) from what M(symphony.cluster.cabling_check) found (not from the plan) - the
    C(topology/tree) form (one Slurm switch per set of leaves the nodes share, the spines above them from the
    twin's site switches) or, for NVLink-domain SKUs, the C(topology/block) form (one block per NVLink domain
    found).
  - C(topology/block) exists from Slurm 23.11; with an older Slurm (the version from O(slurm_version) or
    C(scontrol --version)) the block form is not written and the result says so; O(form=auto) then writes the tree.
  - Set C(TopologyPlugin) in slurm.conf to the returned C(plugin) and run C(scontrol reconfigure).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  found:
    description: The C(found) result of M(symphony.cluster.cabling_check) (host -> the switch ports it reaches).
    type: dict
    default: {}
  domains:
    description: The C(domains) result of M(symphony.cluster.cabling_check) (host -> [ClusterUUID, CliqueId]).
    type: dict
    default: {}
  from_ledger:
    description: Read the found topology from the latest C(cabling) results in the ledger instead of O(found) and
      O(domains) (at handoff, in a later play than burn_in's).
    type: bool
    default: false
  domain_names:
    description: Host -> planned NVLink domain name (the twin's C(nvlink_domain)), naming the blocks.
    type: dict
    default: {}
  twin:
    description: The twin file, for its sites' switches (leaf -> spine uplinks).
    type: path
  form:
    description: C(tree), C(block), or C(auto) (block when NVLink domains were found and Slurm has it).
    type: str
    choices: [auto, tree, block]
    default: auto
  dest:
    description: Where to write topology.conf (next to slurm.conf).
    type: path
    required: true
  slurm_version:
    description: The Slurm version (C(scontrol --version) output) instead of asking the installed scontrol.
    type: str
extends_documentation_fragment:
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details:
      - Returns the topology.conf it would write; writes nothing.
  diff_mode:
    support: full
    details:
      - The file before and after.
"""

EXAMPLES = r"""
- name: At handoff, from the ledger's latest cabling results
  symphony.cluster.slurm_topology:
    from_ledger: true
    dest: /etc/slurm/topology.conf
  delegate_to: localhost

- name: Hand the verified topology to Slurm
  symphony.cluster.slurm_topology:
    found: "{{ cabling.found }}"
    domains: "{{ cabling.domains }}"
    twin: inventories/site-a/twin.yml
    dest: /etc/slurm/topology.conf
  register: topo
"""

RETURN = r"""
dest:
  description: The file written.
  returned: success
  type: str
form:
  description: The form written, C(tree) or C(block).
  returned: success
  type: str
plugin:
  description: The slurm.conf C(TopologyPlugin) value for it.
  returned: success
  type: str
  sample: topology/tree
content:
  description: The topology.conf text.
  returned: success
  type: str
supported:
  description: Whether the installed Slurm has the form (false - nothing written, see C(message)).
  returned: success
  type: bool
message:
  description: Why a form was not written or was replaced by the tree form; empty otherwise.
  returned: success
  type: str
tree:
  description: The verified tree (leaves with their nodes, spines with their leaves, unplaced hosts).
  returned: success
  type: dict
blocks:
  description: The NVLink-domain blocks found (block name -> hosts).
  returned: success
  type: dict
slurm_version:
  description: The Slurm version the decision was made on.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.topology import run_topology

ARGUMENT_SPEC = {
    "found": {"type": "dict", "default": {}},
    "domains": {"type": "dict", "default": {}},
    "from_ledger": {"type": "bool", "default": False},
    "ledger": {"type": "str"},
    "domain_names": {"type": "dict", "default": {}},
    "twin": {"type": "path"},
    "form": {"type": "str", "choices": ["auto", "tree", "block"], "default": "auto"},
    "dest": {"type": "path", "required": True},
    "slurm_version": {"type": "str"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, run_topology)


if __name__ == "__main__":
    main()
