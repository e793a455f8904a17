# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``run_module``: the one place where a module's work becomes ``exit_json`` or ``fail_json``.

Modelled on kubernetes.core's ``AnsibleK8SModule`` (``plugins/module_utils/k8s/core.py``): a module file holds its
documentation, its argument spec and a ``main()`` that builds the ``AnsibleModule`` and hands one function to
:func:`run_module`.  That function takes the validated params and the check-mode flag and returns the result dict;
it raises :class:`SymphonyError` for what the collection can explain.  Everything else about the result shape
(the failure keys, warnings, diff) is decided here, so every module answers the same way.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, NoReturn, Optional, Protocol

from ansible.module_utils.basic import missing_required_lib

from .errors import SymphonyError

Result = Dict[str, Any]
ModuleFn = Callable[[Dict[str, Any], bool], Result]


class _Module(Protocol):
    """What :func:`run_module` uses of ``ansible.module_utils.basic.AnsibleModule``."""

    params: Dict[str, Any]
    check_mode: bool
    _diff: bool

    def warn(self, warning: str) -> None: ...

    def exit_json(self, **kwargs: Any) -> NoReturn: ...

    def fail_json(self, msg: str, **kwargs: Any) -> NoReturn: ...


def error_result(exc: SymphonyError) -> Result:
    """The failure shape of every module: ``msg``, ``error`` (class name), ``where``, ``details``, ``changed``.

    ``changed`` is ``details["changed"]`` when the error says the work had already changed something (a BIOS
    PATCH accepted before the reset failed), else false.
    """
    return dict(exc.to_dict(), changed=bool(exc.details.get("changed")))


def run_module(module: _Module, fn: ModuleFn, requires: Optional[Mapping[str, object]] = None) -> None:
    """Run ``fn(module.params, module.check_mode)`` and end the module with its result.

    * ``requires``: ``{python library: its import error, or None when it imported}``; a library whose import
      failed fails the module with Ansible's ``missing_required_lib`` message before ``fn`` runs.
    * A :class:`SymphonyError` fails the module with :func:`error_result`; any other exception is a bug and
      surfaces as Ansible's traceback.
    * ``warnings`` (a list of strings) in the result are handed to ``module.warn``.
    * ``diff`` in the result is returned only when the task runs with ``--diff``.
    * A result with ``failed`` true fails the task with the whole result (its ``msg`` says why): a verdict
      that must turn the task red, not an error.
    """
    for library, import_error in (requires or {}).items():
        if import_error is not None:
            module.fail_json(msg=missing_required_lib(library), exception=str(import_error))
    try:
        result = fn(module.params, module.check_mode)
    except SymphonyError as exc:
        module.fail_json(**error_result(exc))
    for warning in result.pop("warnings", None) or []:
        module.warn(warning)
    if not module._diff:
        result.pop("diff", None)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)
