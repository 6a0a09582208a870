"""An unknown train.kwargs key is refused naming the key and what the training function takes
(issue 17, item 8.5)."""

from __future__ import annotations

import pytest

from harness.experiment.arms import arm_configs
from harness.config.preflight import PreflightError, check_train_fn, preflight
from tests.conftest import FAST, compose_cfg


def train_with_clip(cfg, run, clip: float = 1.0, *, warmup: int = 0):
    """A researcher's training function with keyword arguments of its own (never run here)."""
    raise AssertionError("not run")


def train_open(cfg, run, **options):
    raise AssertionError("not run")


def _problem(overrides) -> str:
    problems = check_train_fn(compose_cfg(FAST + overrides))
    assert len(problems) == 1, problems
    return problems[0]


def test_an_unknown_key_for_the_builtin_loop_names_the_key_and_says_it_takes_none():
    text = _problem(["+train.kwargs.clipp=1"])
    assert "train.kwargs.clipp" in text
    assert "harness.builtin.loop.train" in text and "Its keyword arguments: none besides (cfg, run)" in text


def test_an_unknown_key_for_a_researchers_function_names_the_keys_it_takes():
    text = _problem([f"train.fn={__name__}.train_with_clip", "+train.kwargs.clipp=1", "+train.kwargs.warmupp=2"])
    assert "train.kwargs.clipp" in text and "'warmupp'" in text
    assert "Its keyword arguments: clip, warmup." in text


def test_known_keys_and_open_functions_pass():
    assert check_train_fn(compose_cfg(FAST + [f"train.fn={__name__}.train_with_clip", "+train.kwargs.clip=0.5"])) == []
    assert check_train_fn(compose_cfg(FAST + [f"train.fn={__name__}.train_open", "+train.kwargs.anything=1"])) == []


def test_the_refusal_comes_before_any_run():
    cfg = compose_cfg(FAST + ["+train.kwargs.clipp=1"])
    with pytest.raises(PreflightError, match=r"train\.kwargs\.clipp.*Nothing was run"):
        preflight(cfg, arm_configs(cfg))
