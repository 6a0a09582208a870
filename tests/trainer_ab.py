"""An A/B of a trainer's adapter (tests/test_lightning.py, tests/test_hf.py): loss_ab on 3 seeds with a
train.fn, checked for what a train.fn's A/B proves: init and data order equal across arms, non-empty
and different across seeds; the arms trained apart; the pairing proven; the certificate bitwise."""

from __future__ import annotations

import harness
from harness.results import load_steps, read_json


def run_paired_ab(tmp_path, fn, arms=("A", "B"), seeds=range(3), overrides=(), experiment="loss_ab",
                  config_dir=None, logger="none") -> dict:
    """Run the A/B (``fn``: train.fn, None: the experiment's own); check the proofs; (seed, arm) ->
    that unit's result."""
    res = harness.run([f"+experiment={experiment}", f"ab.seeds=[{','.join(map(str, seeds))}]", f"logger={logger}",
                       "progress=false", "workers=1", "determinism.threads=1", *([f"train.fn={fn}"] if fn else []),
                       *overrides], out_dir=tmp_path, config_dir=config_dir, verbose=False)
    assert res.analysis is not None
    results = {(s, a): read_json(tmp_path / "runs" / f"seed={s}" / f"arm={a}" / "result.json")
               for s in seeds for a in arms}
    fps = {k: r["fingerprints"] for k, r in results.items()}
    first, second = arms
    for key in ("init", "data_order"):
        assert all(fps[(s, first)][key] == fps[(s, second)][key] for s in seeds)
        # a fixed seed in the user's code did not make the seeds alike: the harness's streams seeded
        assert len({fps[(s, first)][key] for s in seeds}) == len(seeds) and None not in {f[key] for f in fps.values()}
    assert all(fps[(s, first)]["final"] != fps[(s, second)]["final"] for s in seeds)
    a = read_json(tmp_path / "analysis.json")
    assert a["pairing"]["proven"] is True and a["pairing"]["basis"] == "fingerprints"
    cert = a["certificate"]
    assert cert["reproducible"] is True and cert["line"].startswith("bitwise reproducible: yes")
    # the record covers every step the trainer took, and the line says so
    certified = results[(int(cert["seed"]), str(cert["arm"]))]
    n = len(load_steps(certified)["loss"])
    assert certified["fingerprints"]["steps_trained"] == n and f"yes ({n} of {n} steps, seed" in cert["line"]
    return results


CASES = ((0, "A", 0.0), (0, "B", 0.1), (1, "A", 0.0))  # seed, arm, label smoothing: a pair and another seed
DETERMINISM = {"mode": "strict", "threads": 1, "fill_uninitialized_memory": False, "cudnn_benchmark": False}


def attached_units(tmp_path, monkeypatch, script) -> dict:
    """Run ``script(seed, label_smoothing)`` in the environment a command arm gives each unit of CASES,
    then adopt what its attached Run wrote, as the command arm does: (seed, arm) -> (the unit's
    record, what the script returned). Checks the arms of seed 0 paired, seed 1 apart."""
    import torch

    from harness.integrations.process import ATTACHED_NAME, RUN_ENV, run_settings
    from harness.training.run import Run

    units = {}
    try:
        for seed, arm, smoothing in CASES:
            folder = tmp_path / f"{seed}{arm}"
            folder.mkdir()
            for key, value in (("HARNESS_RUN_DIR", str(folder)), ("HARNESS_SEED", str(seed)), ("HARNESS_ARM", arm),
                               (RUN_ENV, run_settings("cpu", "fp32", DETERMINISM, None, None, 10))):
                monkeypatch.setenv(key, value)
            returned = script(seed, smoothing)
            parent = Run(seed)
            parent.adopt(read_json(folder / ATTACHED_NAME))
            units[(seed, arm)] = (parent.finish({}), returned)
    finally:
        torch.use_deterministic_algorithms(False)  # attach() switched this process to the unit's mode
    fp = {k: record["fingerprints"] for k, (record, _) in units.items()}
    for key in ("init", "data_order"):
        assert fp[(0, "A")][key] == fp[(0, "B")][key] != fp[(1, "A")][key] and fp[(0, "A")][key]
    assert fp[(0, "A")]["steps"]["params"] != fp[(0, "B")]["steps"]["params"]
    return units
