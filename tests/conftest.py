"""Shared test helpers: compose configs through Hydra's compose API, run the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from harness.config import compose

from .tiers import choose_tier, pytest_cmdline_main  # noqa: F401  (a hook: the fast tier by default)

REPO = Path(__file__).resolve().parents[1]

# The claims the tests' experiments make go to a ledger of the test session's own (each xdist worker
# its own; subprocesses inherit it), never into outputs/ledger.sqlite of the checkout they run in, nor
# into a ledger the user's own $HARNESS_LEDGER names (set, not defaulted); pytest_sessionfinish fails
# a session that changed the checkout's outputs/ or multirun/ all the same.
os.environ["HARNESS_LEDGER"] = str(Path(tempfile.mkdtemp(prefix="harness-test-ledger-")) / "ledger.sqlite")
TEST_CONF = REPO / "tests" / "conf"  # the tests' own config folder, added like a researcher's --config-dir

# Small and fast: 3 seeds, 30 steps on 512 digits, no wandb, no worker processes.
FAST = [
    "+experiment=loss_ab",
    "ab.seeds=[0,1,2]",
    "train.max_steps=30",
    "data.train_limit=512",
    "logger=none",
    "progress=false",
    "workers=1",  # the cheapest path: units one after another in the test's process (test_workers.py starts pools)
    # auto resolves per invocation from the load at that moment, so two invocations could differ in
    # their bits; 1 thread also never waits at a barrier on a busy machine (tests of auto: test_threads.py)
    "determinism.threads=1",
]


def compose_cfg(overrides: list[str], config_dirs=()):
    return compose(overrides, config_dirs=config_dirs)


def run_cli(args: list[str], cwd: Path | None = None, env: dict | None = None, timeout: int = 300, module: str = "harness"):
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0", **(env or {})}
    full_env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=timeout,
    )


class LazyRuns(dict):
    """name -> the folder of a run ``make(folder, name)`` saved there, made on first use (once per xdist
    worker): a module's tests train only the runs they read, so only those reading a 2-thread run
    need to be solo."""

    def __init__(self, root: Path, make):
        super().__init__()
        self.root, self.make = root, make

    def __missing__(self, name: str) -> Path:
        self[name] = self.make(self.root / name, name)
        return self[name]


class CliRun:
    """One ``python -m harness`` run, as a user types it: the process, and the folder it ran in."""

    def __init__(self, proc: subprocess.CompletedProcess, cwd: Path):
        self.proc, self.cwd = proc, cwd

    @property
    def folder(self) -> Path:
        """The run's folder (its default one, under the cwd's outputs/loss_ab/)."""
        (folder,) = (self.cwd / "outputs" / "loss_ab").iterdir()
        return folder


# The tests that read the plain serial run of FAST through the CLI (the default output folder, no
# override but FAST's): one xdist worker runs them, so the run is made once, not once per test.
FAST_CLI_GROUP = pytest.mark.xdist_group("fast_cli_run")


@pytest.fixture(scope="session")
def fast_cli_run(tmp_path_factory) -> CliRun:
    """``python -m harness`` with FAST alone (serial: workers=1, 1 thread) in a folder of its own, run
    once per xdist worker; its readers assert its exit status and output themselves."""
    cwd = tmp_path_factory.mktemp("fast_cli_run")
    return CliRun(run_cli(list(FAST), cwd=cwd), cwd)


@pytest.fixture
def compose_fn():
    return compose_cfg


# -- Tests run in parallel (pytest-xdist: -n 2 in pyproject.toml), except those marked solo --------
#
# On 2 cores, a run pinned to 2 threads while another process is busy waits at every OpenMP barrier
# for a time slice (15-135x slower: the thread trap, NOTES.md), and threads=auto resolves from the
# load of the moment, which the other xdist worker changes. So a test marked ``solo`` (more than one
# pinned thread, or a decision taken from the machine's load) runs while the other worker runs
# nothing: every test holds a shared lock from its setup (module fixtures included) to its teardown,
# a solo test holds it exclusively, and a turnstile lets a waiting solo test in before the other
# worker's next test. Solo tests form one xdist group (one worker, one after another), and a run of
# them keeps the lock from one to the next. Without xdist (-n0, -p no:xdist) nothing is locked.

SOLO_WHY = ("solo: runs while no other xdist worker runs a test (more than 1 pinned thread, or a decision "
            "taken from the machine's load)")


def pytest_configure(config):
    config.addinivalue_line("markers", SOLO_WHY)
    choose_tier(config)


def _is_solo(item) -> bool:
    return item is not None and item.get_closest_marker("solo") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:  # tryfirst: before xdist reads the groups (--dist loadgroup)
        if _is_solo(item):
            item.add_marker(pytest.mark.xdist_group("solo"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """On the xdist controller: one folder for this run's locks, handed to every worker."""
    import tempfile

    config = node.config
    if getattr(config, "_harness_lock_dir", None) is None:
        config._harness_lock_dir = tempfile.mkdtemp(prefix="harness-pytest-locks-")
    node.workerinput["harness_lock_dir"] = config._harness_lock_dir


# What a test may never write: the checkout's own ledger and output folders (a user's real files).
CHECKOUT_FILES = ("outputs", "multirun")


def checkout_state(root: Path = REPO) -> dict:
    """The checkout's ledger (size, mtime) and the entries of its output folders."""
    state = {}
    for folder in CHECKOUT_FILES:
        for entry in sorted((root / folder).iterdir()) if (root / folder).is_dir() else ():
            info = entry.stat()
            state[str(entry.relative_to(root))] = (info.st_size, info.st_mtime_ns) if entry.is_file() else "folder"
    return state


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist) checks once
        session.config._harness_checkout = checkout_state()


def pytest_sessionfinish(session):
    before = getattr(session.config, "_harness_checkout", None)
    if before is None:
        return
    after = checkout_state()
    changed = sorted(k for k in {**before, **after} if before.get(k) != after.get(k))
    if changed:
        session.config.get_terminal_writer().line(
            f"\nthe test session wrote into the checkout ({REPO}): {', '.join(changed)} changed. A test (or a "
            "subprocess it starts) runs in tmp_path with hydra.run.dir / hydra.sweep.dir there and the ledger "
            "$HARNESS_LEDGER names (passed on to an environment a test builds from scratch).", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    import shutil

    if getattr(config, "_harness_lock_dir", None):
        shutil.rmtree(config._harness_lock_dir, ignore_errors=True)


class _MachineShare:
    """This worker's side of the shared/exclusive lock on the machine (flock, one file per lock)."""

    def __init__(self, folder: str):
        self.turnstile = open(Path(folder) / "turnstile", "a")
        self.machine = open(Path(folder) / "machine", "a")
        self.alone = False  # holding the machine exclusively (a run of solo tests)

    def enter(self, solo: bool):
        import fcntl

        if self.alone:
            return
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        fcntl.flock(self.machine, fcntl.LOCK_EX if solo else fcntl.LOCK_SH)
        if solo:
            self.alone = True
        else:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)

    def leave(self, keep: bool):
        import fcntl

        if self.alone and keep:
            return
        fcntl.flock(self.machine, fcntl.LOCK_UN)
        if self.alone:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
            self.alone = False


_share: list[_MachineShare] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = getattr(item.config, "workerinput", {}).get("harness_lock_dir")
    if folder is None:  # not an xdist worker: the tests run one after another anyway
        return (yield)
    if not _share:
        _share.append(_MachineShare(folder))
    share, solo = _share[0], _is_solo(item)
    share.enter(solo)
    try:
        return (yield)
    finally:
        share.leave(keep=solo and _is_solo(nextitem))
