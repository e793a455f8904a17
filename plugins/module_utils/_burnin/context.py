# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a burn-in test function gets: :class:`TestContext` (its test, the node's expected state, commands,
evidence, clock) and :class:`TestTimeoutError`, raised when a test runs past its ``timeout_s``.

Test functions (``_burnin.checks``) and the runner both import this module; neither imports the other.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from .._core.errors import SymphonyError, ToolNotFoundError
from .evidence import EvidenceStore
from .executor import CommandResult, Executor
from .kernel_log import KernelLog
from .plan import PlannedTest, effective_bom, profile_view


class TestTimeoutError(SymphonyError):
    """A burn-in test ran past its ``timeout_s``."""


class TestContext:
    """What a test function gets: its test, the node's expected state, commands, evidence, clock.

    ``bom``: the SKU ``bom`` merged with the profile's; ``deadline``: monotonic time the test
    must finish by (``timeout_s``).
    """

    def __init__(self, test: PlannedTest, node: str, manifest: dict, profile: str | None, executor: Executor,
                 evidence: EvidenceStore, rel_dir: str, kernel_log: KernelLog, deadline: float,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 sysfs: str = "/sys", procfs: str = "/proc") -> None:
        self.test = test
        self.node = node
        self.manifest = manifest
        self.profile = profile or "production"
        self.bom = effective_bom(manifest, profile)
        self.profile_data = profile_view(manifest, profile)
        self.executor = executor
        self.evidence_store = evidence
        self.rel_dir = rel_dir
        self.kernel_log = kernel_log
        self.deadline = deadline
        self.clock = clock
        self.sleep = sleep
        self.sysfs = sysfs
        self.procfs = procfs
        self.evidence: dict[str, Any] = {}

    @property
    def params(self) -> dict:
        return self.test.params

    def threshold(self, name: str, default: Any = None) -> Any:
        value = self.test.thresholds.get(name, default)
        return value

    def remaining(self) -> float:
        return self.deadline - self.clock()

    def check_deadline(self) -> None:
        if self.remaining() <= 0:
            raise TestTimeoutError("timed out after %gs (timeout_s in the SKU)" % self.test.timeout_s,
                                   where=self.test.name)

    def save_text(self, name: str, text: Any, key: str | None = None) -> str:
        rel = self.evidence_store.write_text(self.rel_dir, name, text)
        self.evidence[key or name.rsplit(".", 1)[0]] = rel
        return rel

    def save_json(self, name: str, data: Any, key: str | None = None) -> str:
        rel = self.evidence_store.write_json(self.rel_dir, name, data)
        self.evidence[key or name.rsplit(".", 1)[0]] = rel
        return rel

    def which(self, *tools: str) -> str | None:
        """First of ``tools`` found on the node, or None."""
        for tool in tools:
            path = self.executor.which(tool)
            if path:
                return path
        return None

    def require(self, *tools: str, why: str = "") -> str:
        """Like :meth:`which` but raises :class:`ToolNotFoundError` (-> ``not_run``) naming the tools."""
        path = self.which(*tools)
        if not path:
            raise ToolNotFoundError("%s not found on this node%s" % (" / ".join(tools), why), where=self.test.name)
        return path

    def run(self, argv: list, label: str, timeout_s: float | None = None) -> CommandResult:
        """Run a command within the test's deadline; stdout/stderr saved as ``<label>.stdout.txt``.

        Raises :class:`TestTimeoutError` when it ran out of time (output is still saved).
        """
        self.check_deadline()
        limit = self.remaining() if timeout_s is None else min(timeout_s, self.remaining())
        result = self.executor.run([str(a) for a in argv], limit)
        self.save_text("%s.stdout.txt" % label, result.stdout, key="%s_stdout" % label)
        if result.stderr:
            self.save_text("%s.stderr.txt" % label, result.stderr, key="%s_stderr" % label)
        command = {"argv": result.argv, "rc": result.rc, "duration_s": result.duration_s,
                   "timed_out": result.timed_out}
        self.save_json("%s.command.json" % label, command, key="%s_command" % label)
        if result.timed_out:
            raise TestTimeoutError("%s timed out after %.0fs (timeout_s %gs in the SKU)"
                                   % (os.path.basename(str(argv[0])), result.duration_s, self.test.timeout_s),
                                   where=self.test.name)
        return result
