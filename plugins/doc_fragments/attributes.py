# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """Standard attributes of symphony.cluster modules; each module sets C(support) for its own case."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return what it would change without changing it.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
"""

    # Modules that run on the Ansible controller (out-of-band work, the ledger, reports).
    CONTROLLER = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
    details:
      - Runs on the controller (C(delegate_to=localhost) or a play on C(localhost)).
"""

    # Modules that only read.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This module only reads; it behaves the same in check mode.
  diff_mode:
    support: N/A
    details:
      - This module only reads.
"""
