"""Call a module's ``main()`` in process, through its argument spec (ansible-core's unit-test pattern).

``patch_module_args`` (``ansible.module_utils.testing``, ansible-core 2.19) hands the args to the
``AnsibleModule`` the module builds; ``exit_json``/``fail_json`` raise instead of exiting, so a test reads the
result the task would have registered.
"""

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class AnsibleExitJson(Exception):
    """``exit_json`` was called; ``result`` is what the task returns."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


class AnsibleFailJson(Exception):
    """``fail_json`` was called (also by the argument spec's own validation); ``result`` is the failed result."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


def _exit_json(self, **kwargs):
    raise AnsibleExitJson(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs.pop("exception", None)
    kwargs.update(failed=True, msg=msg)
    raise AnsibleFailJson(kwargs)


@pytest.fixture
def run_main(monkeypatch):
    """``run_main(module, args, check_mode=False, diff=False) -> (exited_ok, result)``."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    def run(module, args, check_mode=False, diff=False):
        args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        with patch_module_args(args):
            try:
                module.main()
            except AnsibleExitJson as done:
                return True, done.result
            except AnsibleFailJson as failed:
                return False, failed.result
        raise AssertionError("%s.main() returned without exit_json or fail_json" % module.__name__)

    return run
