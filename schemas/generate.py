# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write schemas/sku.schema.json and schemas/twin.schema.json from the schema dicts in module_utils.

The dicts in ``plugins/module_utils/_core/sku.py`` and ``_twin.py`` are the source of truth (modules ship only
module_utils); these JSON files are for editors and other tools.  Run from the repository root:

    PYTHONPATH=build/collections python schemas/generate.py          # rewrite
    PYTHONPATH=build/collections python schemas/generate.py --check  # exit 1 when out of date

tests/unit/core checks that the files are in sync.
"""

from __future__ import annotations

import json
import os
import sys

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import SKU_SCHEMA
from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import TWIN_SCHEMA

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = {"sku.schema.json": SKU_SCHEMA, "twin.schema.json": TWIN_SCHEMA}


def render(schema):
    """The file text for ``schema``: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv):
    stale = []
    for name, schema in SCHEMAS.items():
        path = os.path.join(HERE, name)
        text = render(schema)
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current == text:
            continue
        stale.append(name)
        if "--check" not in argv:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    if stale:
        print("%s: %s" % ("out of date" if "--check" in argv else "written", ", ".join(stale)))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
