# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The ledger option shared by every module that records or reads check results."""

    DOCUMENTATION = r"""
options:
  ledger:
    description:
      - Where the ledger lives, a SQLite file path or C(sqlite:///path).
      - C(postgresql://...) is reserved for the shared backend and is refused until it ships.
      - When omitted, C($SYMPHONY_LEDGER), else C(~/.local/share/symphony/ledger.sqlite) on the controller.
      - The ledger is append-only; rows are never edited or deleted.
    type: str
    required: false
notes:
  - Runs on the controller (use C(delegate_to=localhost) or a play on C(localhost)); the ledger is a controller file.
  - SQLite in WAL mode with one C(BEGIN IMMEDIATE) transaction per write, so many forks may write at once.
"""
