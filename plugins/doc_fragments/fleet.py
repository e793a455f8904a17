# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """Options of the controller-side modules that reach a batch of BMCs over Redfish at once.

    ``DOCUMENTATION``: the BMC map and the controller's thread pool (every fleet module, with the connection
    options of ``symphony.cluster.redfish``);
    ``TWIN_BATCH``: the nodes taken from the twin, the SKU manifests and the per-BMC caps (the modules
    that audit or provision twin nodes).  The argument specs are ``_fleet.fleet_argument_spec()``.
    """

    DOCUMENTATION = r"""
options:
  bmc_map:
    description:
      - JSON map of per-node BMC C(url), C(username), C(password) and C(ca_bundle) (the Redfish fleet emulator
        writes one for rehearsals). A node in the map is reached there; the module's other options say where
        the others are.
    type: path
  workers:
    description: Threads of the controller-side pool (BMCs handled at once).
    type: int
    default: 64
  processes:
    description:
      - Worker processes the O(workers) threads are spread over, so the controller's CPU work (TLS, JSON, judging)
        uses every core; all nodes behind one BMC endpoint run in the same process.
      - Default one per core the controller may use, or the E(SYMPHONY_FLEET_PROCESSES) environment variable.
      - A node whose worker process dies is reported C(blocked) with the reason, never passed.
    type: int
  lease_wait_s:
    description:
      - Seconds to wait for a node that another run holds (its lease in the ledger) before this run stops for that
        node with the holder's run id, host and pid; the node is then neither touched nor judged by this run.
      - A relaunch right after a cancelled or killed job finds that job's module finishing the nodes it was on;
        the wait lets it take them over. V(0) stops at once.
    type: float
    default: 120
"""

    TWIN_BATCH = r"""
options:
  nodes:
    description:
      - Twin node dicts (the C(symphony_twin) hostvar the twin inventory plugin sets), each with C(hostname),
        C(sku) and C(bmc_address); C(inband_address) is where the runtime answers SSH.
      - Mutually exclusive with O(twin).
    type: list
    elements: dict
  twin:
    description: A twin file to read the nodes from instead of O(nodes).
    type: path
  hosts:
    description: With O(twin), only these hostnames (default every node of the twin).
    type: list
    elements: str
  sku_dir:
    description: Directory of SKU manifests (C(skus/) of the collection).
    type: path
    required: true
  max_concurrency:
    description: Redfish requests in flight to one BMC at once.
    type: int
    default: 4
  per_bmc:
    description: Nodes handled at once behind one BMC endpoint.
    type: int
    default: 1
  registry_dir:
    description: Directory of Redfish message registries to resolve C(MessageId)s in BMC errors and task messages.
    type: path
"""
