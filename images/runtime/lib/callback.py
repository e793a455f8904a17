# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tell the controller this runtime is up: POST the build id and addresses as JSON to the callback URL."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

url = sys.argv[1]
with open("/etc/symphony/build-id") as f:
    build_id = f.read().strip()
addrs = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, check=False).stdout
body = json.dumps({"build_id": build_id, "addresses": json.loads(addrs or "[]")}).encode()
req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
urllib.request.urlopen(req, timeout=10).close()
