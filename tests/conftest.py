"""Shared fixtures: every test starts from the same torch seed, in a working directory of its own;
`one_thread` on request."""

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _session_working_directory(tmp_path_factory):
    """Module- and session-scoped fixtures run in an empty folder, not wherever pytest started.

    A learner runs the suite from the repository root, where `course pretrain` has left
    `runs/tiny/checkpoint`: nothing a test does may read or write that folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("cwd-session"))
        yield


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path_factory, monkeypatch):
    """Each test runs in a fresh empty folder (a sibling of `tmp_path`, so the two never mix):
    `course pretrain` without --output-dir writes `runs/` there, and no test sees another's."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored afterwards. Tiny models gain nothing from a second
    thread (on a busy machine two OpenMP threads wait for each other at every op), and bitwise
    comparisons need the same thread count in every run (GEMM splits differ). Modules opt in
    with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
