"""The training function gets the unit's config read-only, without a copy, and its flag put back."""

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ReadonlyConfigError

from harness.experiment.runner import _frozen


def test_the_config_is_read_only_inside_and_writable_again_after():
    cfg = OmegaConf.create({"arm": "A", "train": {"max_steps": 5}})
    with _frozen(cfg, "A") as frozen:
        assert frozen is cfg  # no copy: the arm is already the one written in
        with pytest.raises(ReadonlyConfigError):
            frozen.train.max_steps = 1
    assert not OmegaConf.is_readonly(cfg)
    cfg.train.max_steps = 6  # the caller's config is as it was


def test_an_arm_the_config_does_not_say_is_written_into_a_copy():
    cfg = OmegaConf.create({"arm": None, "train": {"max_steps": 5}})
    with _frozen(cfg, "B") as frozen:
        assert frozen.arm == "B" and frozen is not cfg and OmegaConf.is_readonly(frozen)
    assert cfg.arm is None and not OmegaConf.is_readonly(cfg)


def test_a_read_only_config_stays_read_only():
    cfg = OmegaConf.create({"arm": "A"})
    OmegaConf.set_readonly(cfg, True)
    with _frozen(cfg, None) as frozen:
        assert frozen is cfg
    assert OmegaConf.is_readonly(cfg)
