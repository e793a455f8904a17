# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: twin
short_description: Hosts from the symphony.cluster digital twin, with SKU expectations and gate state
version_added: 0.1.0
description:
  - Reads a digital twin (sites, racks, nodes, spares), the SKU manifests its nodes name, and the ledger's
    current gates, and builds the inventory every stage's playbook targets.
  - The inventory source is a YAML file whose name ends in C(.twin.yml) or C(.twin.yaml) and names this
    plugin in its C(plugin) key. The twin itself is either inline in that file (top-level C(twin_version),
    C(sku_dir), C(sites)) or in another file named by O(twin). Keep fleets of thousands of nodes in a separate
    file, which is then parsed once, with libyaml.
  - Each host gets C(symphony_twin) (its twin record), C(symphony_sku), C(symphony_bmc_address),
    C(symphony_stage), C(symphony_gate), C(symphony_gate_reason) and, when the twin has an in-band address,
    C(ansible_host). C(symphony_profile) and the defaults for nodes without a gate (C(symphony_stage=racked),
    C(symphony_gate=null)) are variables of the C(all) group, and so are C(symphony_ledger) (where every stage
    records, the ledger this source read; see the role symphony.cluster.common) and C(symphony_inventory_ledger)
    (that same location, to compare against), and C(symphony_sku_dir), the directory the SKU manifests were
    loaded from, the one every stage reads (a role variable naming another directory stops the play); the SKU
    manifest is the variable
    C(symphony_expected) of its C(sku_<name>) group, so every host sees it while it is stored once.
  - "Groups C(site_<site>), C(rack_<rack>), C(sku_<sku>), C(spares), C(promoted_spares) (twin spares that
    cluster_validation promoted into service, with C(symphony_promoted_for) naming the node each replaced; they
    leave C(spares)), C(stage_<stage>) (the stage of the node's
    furthest gate, C(stage_racked) before any gate), C(gate_<pass|fail|blocked|not_run>) (that gate's status) and
    C(passed_<stage>) for every stage whose current gate passed (what the next stage's playbook targets), and
    C(handed_off) for the nodes whose cluster_validation gate passed (what fleet_audit targets)."
  - Gate state is read from the ledger on every parse, never cached; the twin and SKU part is cached when
    O(cache) is on.
  - All or nothing, an invalid twin or manifest fails the whole source, naming the file, node and JSON path.
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
options:
  plugin:
    description: The name of this plugin; marks the file as a twin inventory source.
    required: true
    type: str
    choices: [symphony.cluster.twin]
  twin:
    description:
      - Path of the twin file, relative to the inventory source's directory.
      - When omitted, the inventory source itself holds the twin (it must then have C(sites)).
    type: str
  sku_dir:
    description:
      - Directory of SKU manifests (C(*.yml)), relative to the inventory source's directory.
      - When omitted, the twin's C(sku_dir) (relative to the twin file), else the collection's C(skus/).
      - The resolved directory is the C(all) group's C(symphony_sku_dir), which every stage role reads.
    type: str
  ledger:
    description:
      - Ledger to read gate state from (SQLite path or C(sqlite:///path)); a relative path is relative to the
        inventory source's directory.
      - Or the shared PostgreSQL ledger, C(postgresql://user@host:5432/db?sslmode=verify-full&sslrootcert=/path/ca.pem)
        (needs the Python package C(psycopg)); the password comes from C($SYMPHONY_LEDGER_PASSWORD), the variable a
        C(password_env=NAME) URL parameter names, or libpq's C($PGPASSWORD) / C(~/.pgpass), never from the URL.
        A TCP host without C(sslmode) is verified (C(verify-full)).
      - When omitted, C($SYMPHONY_LEDGER), else C(~/.local/share/symphony/ledger.sqlite).
      - A ledger that does not exist yet (no SQLite file, no PostgreSQL tables) is not created; every node is then
        in C(stage_racked).
    type: str
    env:
      - name: SYMPHONY_LEDGER
  profile:
    description:
      - The SKU profile the gates use (C(production), or a profile the manifests declare such as C(lab)).
      - Exposed to every host as C(symphony_profile).
      - A profile that a SKU of the twin does not declare fails the source (a typo never falls back to
        the production gates).
    type: str
    default: production
"""

EXAMPLES = r"""
# inventories/site1/site1.twin.yml: the twin lives in the same file
plugin: symphony.cluster.twin
profile: production
ledger: /var/lib/symphony/ledger.sqlite
keyed_groups:
  - key: symphony_twin.fabric | map(attribute='leaf') | list
    prefix: leaf
groups:
  needs_rework: symphony_gate in ['fail', 'blocked']
twin_version: 1
sku_dir: ../../skus
sites:
  - name: site1
    racks:
      - name: r12
        bmc_subnet: 10.12.0.0/24
        nodes:
          - {hostname: gpu-r12-u02, u: 2, sku: hgx_h100_supermicro, serial: C8010MM21A30331,
             bmc_mac: "3c:ec:ef:12:02:01"}

# inventories/big/fleet.twin.yml: a 10,000-node twin kept in its own file (JSON loads fastest), cached
# plugin: symphony.cluster.twin
# twin: fleet.json
# sku_dir: /srv/symphony/skus
# cache: true
# cache_plugin: ansible.builtin.jsonfile
# cache_connection: /var/cache/symphony/inventory
"""

import os

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import SymphonyError, TwinError
from ansible_collections.symphony.cluster.plugins.module_utils._core import schema as _schema
from ansible_collections.symphony.cluster.plugins.module_utils._core import inventory as _twin_inventory
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import default_ledger_path


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    """Twin + SKU manifests + ledger gates -> hosts, hostvars and groups."""

    NAME = "symphony.cluster.twin"

    def verify_file(self, path):
        """Accept ``*.twin.yml`` / ``*.twin.yaml`` files only."""
        return super().verify_file(path) and path.endswith(_twin_inventory.SUFFIXES)

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache=cache)
        try:
            self._read_config_data(path)
        except AnsibleParserError:
            # Ansible's message has no line or column; the collection's loader says where (or, when the file
            # parses after all, Ansible's own complaint stands).
            try:
                _schema.load_yaml_file(path, TwinError)
            except TwinError as exc:
                raise AnsibleParserError(to_native(exc))
            raise
        base = os.path.dirname(os.path.abspath(path))
        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        update_cache = self.get_option("cache") and not cache
        records = None
        if use_cache:
            try:
                records = self._cache[cache_key]
            except KeyError:
                update_cache = True
        try:
            if records is None:
                records = _twin_inventory.build_records(
                    path, option_keys=list(self._options),
                    twin_path=self._resolve(base, self.get_option("twin")),
                    sku_dir=self._resolve(base, self.get_option("sku_dir")))
            _twin_inventory.check_profile(records["skus"], self.get_option("profile"))
            ledger = self.get_option("ledger")
            # a path in the source file is relative to it; a URL (sqlite:///, postgresql://) is taken as it is
            ledger = (ledger if "://" in ledger else self._resolve(base, ledger)) if ledger else default_ledger_path()
            view = _twin_inventory.read_ledger_view(ledger)
        except SymphonyError as exc:
            raise AnsibleParserError(to_native(exc))
        if update_cache:
            self._cache[cache_key] = records
        self._populate(records, view, ledger)

    @staticmethod
    def _resolve(base, value):
        if not value:
            return None
        value = os.path.expanduser(value)
        return value if os.path.isabs(value) else os.path.normpath(os.path.join(base, value))

    def _populate(self, records, view, ledger):
        positions, promoted = view["positions"], view["promoted"]
        strict = self.get_option("strict")
        # ansible-core >= 2.19 wraps the inventory so that set_variable deep-walks every value to tag it with
        # its origin; on the nested twin records of a 10,000-node fleet that walk alone takes 15 s.  Every
        # variable set here is plain validated data (strings, numbers, lists, dicts) with no templates, so it
        # goes to the wrapped InventoryData directly (untrusted, as any inventory data).  compose keeps the
        # wrapper (it sets what user expressions produce).  Values shared by many hosts are group variables:
        # the profile and the not-yet-gated defaults on ``all``, the SKU manifest on ``sku_<sku>``.
        raw = getattr(self.inventory, "__wrapped__", self.inventory)
        # symphony_ledger: where the stages record (overridable, and then refused by the common role unless it
        # still names this ledger); symphony_inventory_ledger: what this parse read, to compare against.
        # symphony_sku_dir: the one directory every stage reads SKU manifests from (the common role refuses a
        # role variable naming another).
        defaults = {"symphony_profile": self.get_option("profile"), "symphony_stage": "racked",
                    "symphony_gate": None, "symphony_gate_reason": "", "symphony_passed": [],
                    "symphony_ledger": ledger, "symphony_inventory_ledger": ledger,
                    "symphony_sku_dir": records["sku_dir"]}
        for key, value in defaults.items():
            raw.set_variable("all", key, value)
        # always present, even empty (every spare promoted), so groups['spares'] in a template never breaks
        for name in ("spares", "promoted_spares", "handed_off"):
            self.inventory.add_group(name)
        for sku, manifest in records["skus"].items():
            group = self.inventory.add_group(self._sanitize_group_name("sku_" + sku))
            raw.set_variable(group, "symphony_expected", manifest)
        constructed = self.get_option("compose") or self.get_option("groups") or self.get_option("keyed_groups")
        group_names = {}
        for host_record in records["hosts"]:
            host = host_record["hostname"]
            self.inventory.add_host(host)
            hostvars = dict(host_record["vars"])
            groups = list(host_record["groups"])
            if host in positions:
                stage, gate, reason, passed = positions[host]
                hostvars.update(symphony_stage=stage, symphony_gate=gate, symphony_gate_reason=reason,
                                symphony_passed=passed)
                groups += ["stage_" + stage, "gate_" + gate] + ["passed_" + p for p in passed]
                if "cluster_validation" in passed:
                    groups.append("handed_off")  # what fleet_audit targets; its own gate never removes a node
            else:
                groups.append("stage_racked")
            if host in promoted and "spares" in groups:
                # In service since cluster_validation promoted it: out of the pool, into the reruns.
                groups[groups.index("spares")] = "promoted_spares"
                hostvars["symphony_promoted_for"] = promoted[host]
            for key, value in hostvars.items():
                raw.set_variable(host, key, value)
            for name in groups:
                if name not in group_names:
                    group_names[name] = self.inventory.add_group(self._sanitize_group_name(name))
                self.inventory.add_child(group_names[name], host)
            if constructed:
                # compose/groups/keyed_groups expressions see the group-level values too.
                sku = hostvars["symphony_sku"]
                variables = dict(defaults, symphony_expected=records["skus"][sku], **hostvars)
                self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
                self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
                self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)
