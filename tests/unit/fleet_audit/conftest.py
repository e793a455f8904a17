"""fleet_audit helpers: tool-output samples without their provenance header, a fake command runner."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ToolNotFoundError
from ansible_collections.symphony.cluster.plugins.module_utils._host.process import CommandResult


@pytest.fixture(scope="session")
def tool_text(tool_outputs):
    """``tool_text(name)`` -> the sample's text without line 1 (the '# SOURCE:' provenance header)."""
    def read(name):
        first, rest = (tool_outputs / name).read_text(encoding="utf-8").split("\n", 1)
        assert first.startswith("# SOURCE:"), name
        return rest
    return read


class FakeNode:
    """What a node's tools print (``outputs``: argv[0] -> (rc, stdout)) and its files (``files``: path -> text)."""

    def __init__(self, outputs=None, files=None):
        self.outputs = dict(outputs or {})
        self.files = dict(files or {})
        self.calls = []

    def run(self, argv, timeout_s, **_kw):
        self.calls.append(list(argv))
        if argv[0] not in self.outputs:
            raise ToolNotFoundError("%s not found" % argv[0], where=argv[0])
        rc, out = self.outputs[argv[0]]
        return CommandResult(argv=tuple(argv), rc=rc, stdout=out, stderr="", duration_s=0.0)

    def read(self, path):
        if path not in self.files:
            raise FileNotFoundError(2, "No such file or directory", path)
        return self.files[path]

    def listdir(self, path):
        names = sorted({p[len(path) + 1:].split("/")[0] for p in self.files if p.startswith(path + "/")})
        if not names:
            raise FileNotFoundError(2, "No such file or directory", path)
        return names


@pytest.fixture
def fake_node():
    return FakeNode
