"""LabError: the lab's member of the project's one exception family (SymphonyError)."""

from __future__ import annotations

try:
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import SymphonyError
except ImportError:  # the collection is not on PYTHONPATH (e.g. `python -m symphony_lab` run by hand)
    import importlib.util
    import pathlib
    import sys

    _PATH = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_core" / "errors.py"
    _SPEC = importlib.util.spec_from_file_location("_symphony_errors_for_lab", _PATH)
    _MOD = importlib.util.module_from_spec(_SPEC)
    sys.modules[_SPEC.name] = _MOD
    _SPEC.loader.exec_module(_MOD)
    SymphonyError = _MOD.SymphonyError


class LabError(SymphonyError):
    """The lab could not be brought up, used or torn down; ``where`` names the host, file or command."""
