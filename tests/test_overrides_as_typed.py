"""The forms the docs show are the forms that work: new arm names given as a mapping, conditions
written as in the yaml, and a conditions experiment given to a sweep refused before the first job."""

from __future__ import annotations

import pytest

from harness.config import compose, replace_whole_arms
from harness.experiment.precheck import check_job
from harness.experiment.arms import ExperimentError, arm_configs


def _composed(overrides):
    cfg = compose(overrides)
    replace_whole_arms(cfg, overrides)
    return cfg


def test_new_arm_names_given_as_a_mapping_are_exactly_the_arms():
    cfg = _composed(["+experiment=loss_ab", "ab.factor=optim",
                     "ab.arms={a: {lr: 0.01}, b: {lr: 0.05, momentum: 0.0, nesterov: false}}"])
    arms = arm_configs(cfg)
    assert list(arms) == ["a", "b"]
    assert arms["b"].optim.lr == 0.05 and arms["b"].optim.momentum == 0.0 and arms["a"].optim.lr == 0.01
    assert list(_composed(["+experiment=loss_ab", "ab.arms={C: 0.0, D: 0.2}"]).ab.arms) == ["C", "D"]
    # one arm's key is still checked: a misspelt arm is refused, an added one says so with +
    with pytest.raises(Exception, match=r"To append to your config use \+ab.arms.b=0.2"):
        compose(["+experiment=loss_ab", "ab.arms.b=0.2"])
    assert list(_composed(["+experiment=loss_ab", "+ab.arms.C=0.3"]).ab.arms) == ["A", "B", "C"]


@pytest.mark.parametrize("overrides, expected", [
    (["+experiment=loss_ab", "ab.conditions={a: [data=digits], b: [data=synthetic]}"],
     {"a": ["data=digits"], "b": ["data=synthetic"]}),
    (["+experiment=loss_ab_conditions", "ab.conditions={a: [data=digits], b: [data=synthetic, model.width=32]}"],
     {"a": ["data=digits"], "b": ["data=synthetic", "model.width=32"]}),
    (["+experiment=loss_ab_conditions", "+ab.conditions.c=[model.width=32]", "~ab.conditions.synthetic"],
     {"digits": ["data=digits"], "digits_wide": ["data=digits", "model.width=32", "model.hidden=128"],
      "c": ["model.width=32"]}),
])
def test_conditions_are_written_as_in_the_yaml(overrides, expected):
    from omegaconf import OmegaConf

    assert OmegaConf.to_container(_composed(overrides).ab.conditions) == expected


def test_a_conditions_experiment_in_a_sweep_is_refused_before_its_first_job():
    job = _composed(["+experiment=loss_ab_conditions", "seed=0"])
    with pytest.raises(ExperimentError, match="ab.conditions runs every"):
        check_job(job, multirun=True)
