"""Synthetic result dicts that follow the contract in harness/results.py, for the analysis tests.

Accuracies are multiples of 100/N_TEST points, as real ones are, so float rounding in b - a is
exercised the way real data exercises it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from harness import results

N_TEST = 360
EXPERIMENT = "loss_ab"
FACTOR = "loss.label_smoothing"
ARMS = {"A": 0.0, "B": 0.1}
# What the schema's default declares (config.stats.metrics): directions, units and per-example
# records are declared, never guessed from a name.
DIRECTIONS = {"test_accuracy": {"direction": "max", "unit": "pts", "examples": True},
              "test_loss": {"direction": "min"}, "train_loss": {"direction": "min"}}


def _hex(*parts, digits: int = 16) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:digits]


def quantise(points) -> np.ndarray:
    """Round accuracies to what N_TEST test examples can give: multiples of 100/N_TEST points."""
    return np.round(np.asarray(points, dtype=float) * N_TEST / 100.0) * 100.0 / N_TEST


def accuracies(n_seeds: int = 10, *, shift: float = 0.0, noise: float = 0.3, seed_sd: float = 0.8,
               rng_seed: int = 0, arms=("A", "B")) -> dict[str, list[float]]:
    """Per-arm accuracies: a shared per-seed level (what pairing removes) plus per-run noise.

    Each arm after the first is shifted by ``shift`` points.
    """
    rng = np.random.default_rng(rng_seed)
    level = 95.0 + rng.normal(0.0, seed_sd, n_seeds)
    return {
        arm: [float(v) for v in quantise(level + (shift if i else 0.0) + rng.normal(0.0, noise, n_seeds))]
        for i, arm in enumerate(arms)
    }


def make_result(seed, arm: str, value, *, experiment: str = EXPERIMENT, factor: str = FACTOR,
                arms: dict | None = None, status: str = "completed", error: dict | None = None,
                init: str | None = None, data_order: str | None = None, final: str | None = None,
                pairing: dict | None = None, metrics: dict | None = None, directions: dict | None = None,
                examples=None) -> dict:
    """One result dict, as runs/seed=S/arm=A/result.json holds it."""
    arms = dict(ARMS if arms is None else arms)
    factor_value = arms.get(arm)
    config = {
        "experiment_name": experiment,
        "ab": {"factor": factor, "arms": arms, "seeds": list(range(10))},
        "loss": {"label_smoothing": factor_value},
        # 999 resamples declared: the tests' analyses are the declared ones, and fast
        "stats": {"metrics": json.loads(json.dumps(DIRECTIONS if directions is None else directions)),
                  "bootstrap_resamples": 999},
    }
    out = {
        "schema": results.SCHEMA,
        "experiment": experiment,
        "seed": seed,
        "arm": arm,
        "factor": factor,
        "factor_value": factor_value,
        "status": status,
        "fingerprints": {
            "init": init if init is not None else _hex("init", seed),
            "data_order": data_order if data_order is not None else _hex("order", seed),
            "final": final if final is not None else _hex("final", seed, arm, value),
            "steps": {"loss": [_hex("loss", seed, arm, i, digits=8) for i in range(3)],
                      "params": [_hex("params", seed, arm, i) for i in range(3)]},
        },
        "pairing": pairing if pairing is not None else {"init": True, "data_order": True},
        "curve": {"step": [1, 2, 3], "train_loss": [2.3, 1.9, 1.5]},
        "env": {"device": "cpu", "threads": 2, "torch": "2.x"},
        "timing": {"train_seconds": 1.0, "steps": 3, "steps_per_s": 3.0, "ms_per_step": 333.3, "total_seconds": 1.2},
        "config": config,
        "config_hash": results.config_digest(config),
        "base_hash": results.config_digest(config, exclude_factor=factor),
        "code_version": {"harness": "0.1.0", "source": "0" * 16, "torch": "2.x"},
        "created": "2025-01-01T00:00:00Z",
    }
    if status == "completed":
        out["metrics"] = metrics if metrics is not None else {
            "test_accuracy": value, "test_loss": 0.2, "train_loss": 0.1, "n_test": N_TEST, "n_train": 1437,
        }
    else:
        out["error"] = error or {"type": "RuntimeError", "message": "loss became NaN", "step": 12}
    if examples is not None:  # per-example correctness on the test split (a bool array)
        out["examples"] = results.pack_examples(examples)
    return out


def make_results(values: dict[str, list], *, seeds=None, **kw) -> list[dict]:
    """Result dicts for every arm and seed; a value of None leaves that (seed, arm) out."""
    out = []
    for arm, column in values.items():
        for seed, value in zip(seeds if seeds is not None else range(len(column)), column):
            if value is not None:
                out.append(make_result(seed, arm, value, arms={a: ARMS.get(a, float(i)) for i, a in enumerate(values)}, **kw))
    return out


def write_results(root, items: list[dict]) -> Path:
    """Write result dicts where the harness writes them: root/runs/seed=S/arm=A/result.json."""
    root = Path(root)
    for r in items:
        results.write_json(results.run_dir(root, r["seed"], r["arm"]) / results.RESULT_NAME, r)
    return root
