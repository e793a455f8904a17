# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception family of symphony.cluster.

Every failure the collection can explain derives from :class:`SymphonyError`.
Modules catch exactly this family in one place and turn it into ``fail_json``;
anything else is a bug and is allowed to surface as a traceback.
"""

from __future__ import annotations

from typing import Any, Dict, Optional


# The fault classes of an error (``exc.fault``, set by ``_redfish.errors``): whose fault it is decides the verdict
# (DESIGN.md "Verdict rules": controller faults are not hardware faults; a transient BMC fault is retried first).
FAULT_CONTROLLER = "controller"        # TLS trust, CA file, DNS, credentials: blocked, the operator's remedy
FAULT_UNREACHABLE = "bmc_unreachable"  # a BMC fault that outlived the retries: blocked "BMC unreachable"
FAULT_BMC = "bmc"                      # the BMC answered and what it said is the finding: the check's own verdict
NOT_THE_NODES_FAULTS = (FAULT_CONTROLLER, FAULT_UNREACHABLE)


class SymphonyError(Exception):
    """Base of every error the collection raises on purpose.

    ``where`` names the file, host or field the error is about, so an operator
    reading one line of output knows what to fix.
    """

    def __init__(self, message: str, where: Optional[str] = None, details: Optional[Dict[str, Any]] = None) -> None:
        self.message = message
        self.where = where
        self.details = details or {}
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.where:
            return "%s: %s" % (self.where, self.message)
        return self.message

    def to_dict(self) -> Dict[str, Any]:
        """Return ``{"error": class name, "msg": str, "where": ..., "details": {...}}``."""
        return {
            "error": type(self).__name__,
            "msg": str(self),
            "where": self.where,
            "details": self.details,
        }


class ValidationError(SymphonyError):
    """A data file (SKU manifest, twin, defects file) does not match its schema."""


class ManifestError(ValidationError):
    """A SKU manifest is missing, malformed or inconsistent."""


class TwinError(ValidationError):
    """The digital twin is malformed or inconsistent (duplicates, bad addresses)."""


class GateError(SymphonyError):
    """A check graph is inconsistent (unknown dependency, cycle, bad status)."""


class LedgerError(SymphonyError):
    """The ledger cannot be opened, migrated or written."""


class LeaseError(LedgerError):
    """A node is leased by another run; ``details`` name the holder (``run_id``, ``host``, ``pid``, ``stage``)."""


class InterruptedRunError(SymphonyError):
    """The playbook that started this run is gone: the node was not started (``interrupted`` in the ledger)."""


class ParseError(SymphonyError):
    """A tool's output could not be parsed; ``where`` names the tool and what was missing."""


class ToolNotFoundError(SymphonyError):
    """A required executable is absent on the node (the test becomes ``not_run``)."""


class RedfishError(SymphonyError):
    """Base for Redfish transport and protocol errors (see ``_redfish``)."""


class SchedulerError(SymphonyError):
    """The cluster's scheduler (Slurm, Kubernetes) refused or failed a request; ``where`` names the job or node."""


class ReportError(SymphonyError):
    """The report or the dispatch list could not be built or written (missing plotly, an unwritable directory)."""
