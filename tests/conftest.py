"""Shared pytest fixtures: where ../shared is, and a fresh ledger per test."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("SYMPHONY_SHARED", ROOT.parent / "shared")).resolve()


@pytest.fixture(scope="session")
def shared():
    """The read-only ../shared folder (fixtures, cases, reference); tests read it in place."""
    if not SHARED.is_dir():
        pytest.fail("../shared not found at %s (set SYMPHONY_SHARED)" % SHARED)
    return SHARED


@pytest.fixture(scope="session")
def mockups(shared):
    return shared / "fixtures" / "mockups"


@pytest.fixture(scope="session")
def tool_outputs(shared):
    return shared / "fixtures" / "tool-outputs"


@pytest.fixture(scope="session")
def repo_root():
    return ROOT


@pytest.fixture
def ledger_path(tmp_path):
    return str(tmp_path / "ledger.sqlite")
