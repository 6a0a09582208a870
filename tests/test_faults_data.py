"""A damaged CIFAR-10 file under data.verify=false is named with its path and the official md5."""

from __future__ import annotations

import pytest

from harness import instantiate as load
from harness.builtin.data import DataError

from .conftest import compose_cfg
from .test_experiment import _write_cifar


@pytest.mark.parametrize("name", ["data_batch_3", "batches.meta"])
def test_a_truncated_cifar_file_is_named_with_its_path_and_the_expected_md5(tmp_path, name):
    from torchvision.datasets import CIFAR10

    _write_cifar(tmp_path)
    damaged = tmp_path / "cifar-10-batches-py" / name
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])  # a copy cut short
    expected = dict(CIFAR10.train_list + CIFAR10.test_list + [(CIFAR10.meta["filename"], CIFAR10.meta["md5"])])[name]
    cfg = compose_cfg(["data=cifar10", f"data.root={tmp_path}", "data.verify=false"])
    with pytest.raises(DataError) as e:
        load(cfg.data)
    message = str(e.value)
    assert str(damaged) in message and expected in message
    assert "truncated" in message and "data.verify=true" in message
    assert f"({damaged.stat().st_size} bytes;" in message
