"""The suite's two tiers, and a named test run without xdist workers (hooks tests/conftest.py imports).

``python -m pytest -q`` (no test named, no -m) runs the fast tier: every test not marked ``slow``,
``services`` or ``bench``. The rest runs with ``python -m pytest -q -m "slow or services or bench"``;
the two expressions are each other's negation, so together they run every test exactly once. Naming
files or tests, or giving -m, runs what was asked, whatever its tier."""

from __future__ import annotations

import pytest

TIER_MARKS = ("slow", "services", "bench")  # registered, with what each means, in pyproject.toml
FAST_TIER = " and ".join(f"not {mark}" for mark in TIER_MARKS)
REST = " or ".join(TIER_MARKS)  # the negation of FAST_TIER: the two tiers partition the suite


def choose_tier(config: pytest.Config) -> None:
    """On the controller and on each xdist worker alike (both parse the same command line)."""
    no_test_named = config.args_source in (pytest.Config.ArgsSource.TESTPATHS, pytest.Config.ArgsSource.INVOCATION_DIR)
    if not config.option.markexpr and no_test_named:
        config.option.markexpr = FAST_TIER


def _names_workers(args) -> bool:
    return any(a.startswith(("-n", "--numprocesses")) for a in map(str, args))


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns -n into workers
def pytest_cmdline_main(config: pytest.Config):
    """Tests named one by one (``file::test``) run in this process: starting two workers, each
    importing torch and collecting the file, costs more than the tests. -n on the command line wins."""
    named = [a for a in config.args if "::" in a]
    if named and len(named) == len(config.args) and not _names_workers(config.invocation_params.args):
        config.option.numprocesses = 0
