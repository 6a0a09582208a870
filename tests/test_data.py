"""The built-in datasets' per-process cache (harness/builtin/data.py)."""

from __future__ import annotations


def test_a_process_reads_each_dataset_once_and_no_run_changes_the_next_ones(tmp_path):
    """A worker runs many units: the data is loaded once per process (issue 18), and one run's limits
    never reach the next run's datasets."""
    from harness.builtin import data

    calls = []
    real = data._digits
    data._LOADED.clear()
    try:
        data._digits = lambda: calls.append(1) or real()
        small = data.digits(train_limit=10, augment=True)
        full = data.digits()
        assert len(calls) == 1
        assert len(small.train_y) == 10 and small.augment and len(full.train_y) == 1347 and not full.augment
    finally:
        data._digits = real
        data._LOADED.clear()
