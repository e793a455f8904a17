"""``_core.module.run_module``: the one place a module's result or error becomes exit_json/fail_json."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import LedgerError
from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module


class Ended(Exception):
    pass


class FakeModule:
    def __init__(self, params=None, check_mode=False, diff=False):
        self.params, self.check_mode, self._diff = params or {}, check_mode, diff
        self.warnings, self.ended = [], None

    def warn(self, warning):
        self.warnings.append(warning)

    def exit_json(self, **kwargs):
        self.ended = ("exit", kwargs)
        raise Ended()

    def fail_json(self, msg, **kwargs):
        self.ended = ("fail", dict(kwargs, msg=msg))
        raise Ended()


def _run(module, fn, **kwargs):
    with pytest.raises(Ended):
        run_module(module, fn, **kwargs)
    return module.ended


def test_check_mode_is_handed_over_warnings_passed_and_diff_only_when_asked():
    seen = []

    def fn(params, check_mode):
        seen.append((params, check_mode))
        return {"changed": True, "warnings": ["w1"], "diff": {"before": 1, "after": 2}}

    module = FakeModule({"a": 1}, check_mode=True)
    assert _run(module, fn) == ("exit", {"changed": True})
    assert seen == [({"a": 1}, True)] and module.warnings == ["w1"]
    assert _run(FakeModule(diff=True), fn) == ("exit", {"changed": True, "diff": {"before": 1, "after": 2}})


def test_error_and_failed_result_shapes():
    def boom(params, check_mode):
        raise LedgerError("cannot open ledger: locked", where="/l.sqlite", details={"changed": True})

    assert _run(FakeModule(), boom) == ("fail", {
        "msg": "/l.sqlite: cannot open ledger: locked", "error": "LedgerError", "where": "/l.sqlite",
        "details": {"changed": True}, "changed": True})
    verdict = _run(FakeModule(), lambda p, c: {"changed": False, "status": "fail", "failed": True, "msg": "no"})
    assert verdict == ("fail", {"changed": False, "status": "fail", "msg": "no"})


def test_a_missing_library_fails_before_the_work():
    def never(params, check_mode):
        raise AssertionError("must not run")

    kind, res = _run(FakeModule(), never, requires={"sushy": None, "plotly": "No module named 'plotly'"})
    assert kind == "fail" and "plotly" in res["msg"] and res["exception"] == "No module named 'plotly'"
