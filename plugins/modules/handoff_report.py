#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: handoff_report
short_description: Write the handoff report (HTML, JSON, JUnit XML) from the ledger
description:
  - Reads the ledger (check results, gates, events) and the evidence files it points at and writes one
    self-contained HTML report (plotly.js inlined, no network access needed), C(report.json) and C(junit.xml)
    into O(dest).
  - The HTML has the fleet summary, a per-node gate matrix (stage x check, four states), the dispatch list,
    firmware before/after, burn-in evidence plots, the fabric pair matrix, NCCL busbw curves, MFU per run and the
    telemetry outlier chart.
  - Runs on the controller.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  ledger:
    description:
      - Ledger location (SQLite path or C(sqlite:///path)). Defaults to C($SYMPHONY_LEDGER) or
        C(~/.local/share/symphony/ledger.sqlite).
    type: str
  dest:
    description: Directory to write C(index.html), C(report.json) and C(junit.xml) into.
    type: path
    required: true
  nodes:
    description:
      - Twin data per node (C(hostname) -> dict with C(site), C(rack), C(u), C(serial), C(sku), C(spare)) used to
        order and label rows; typically built from the C(symphony_twin) hostvar of every host.
    type: dict
    default: {}
  dispatch_dir:
    description:
      - Also write the fleet's dispatch list there (C(dispatch-latest.csv) and C(.json)), every stage, from the ledger
        (the directory pre_deployment writes its lists to, C(pre_deployment_dispatch_dir)).
      - Nodes missing from O(nodes) keep the labels (site, rack, U, serial) the previous list gave them.
    type: path
extends_documentation_fragment:
  - symphony.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the ledger and returns the summary and the paths it would write; writes nothing.
  diff_mode:
    support: none
requirements:
  - plotly
"""

EXAMPLES = r"""
- name: Write the handoff report
  symphony.cluster.handoff_report:
    ledger: /var/lib/symphony/ledger.sqlite
    dest: /var/lib/symphony/report
    nodes: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'symphony_twin'))) }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
paths:
  description: Where the files were written.
  returned: success
  type: dict
  sample: {"html": "/var/lib/symphony/report/index.html", "json": "/var/lib/symphony/report/report.json",
           "junit": "/var/lib/symphony/report/junit.xml"}
summary:
  description: Node count, handed-off count and counts per last stage and gate.
  returned: success
  type: dict
dispatch:
  description: With O(dispatch_dir), C(csv) and C(json) paths of the dispatch list and its C(rows) count.
  returned: when O(dispatch_dir) is set
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core import report as _report
from ansible_collections.symphony.cluster.plugins.module_utils._core.report_html import PLOTLY_IMPORT_ERROR

ARGUMENT_SPEC = {
    "ledger": {"type": "str"},
    "dest": {"type": "path", "required": True},
    "nodes": {"type": "dict", "default": {}},
    "dispatch_dir": {"type": "path"},
}


def _run(params, check_mode):
    result = {"changed": True}
    ledger = open_ledger(params["ledger"])
    if check_mode:
        result["summary"] = _report.collect(ledger, params["nodes"])["summary"]
        result["paths"] = {k: os.path.join(params["dest"], name) for k, name in _report.REPORT_FILES.items()}
    else:
        written = _report.write_report(ledger, params["dest"], params["nodes"])
        result.update(paths=written["paths"], summary=written["summary"])
        if params["dispatch_dir"]:
            result["dispatch"] = _report.write_dispatch_latest(ledger, params["dispatch_dir"], params["nodes"])
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run, requires={"plotly": PLOTLY_IMPORT_ERROR})


if __name__ == "__main__":
    main()
