"""An A/B of a trainer's adapter (tests/test_lightning.py, tests/test_hf.py): loss_ab on 3 seeds with a
train.fn, checked for what a train.fn's A/B proves: init and data order equal across arms, non-empty
and different across seeds; the arms trained apart; the pairing proven; the certificate bitwise."""

from __future__ import annotations

import harness
from harness.results import read_json


def run_paired_ab(tmp_path, fn: str, arms=("A", "B"), seeds=range(3), overrides=()) -> dict:
    """Run the A/B; check the proofs; (seed, arm) -> that unit's result."""
    res = harness.run(["+experiment=loss_ab", f"ab.seeds=[{','.join(map(str, seeds))}]", "logger=none",
                       "progress=false", "workers=1", "determinism.threads=1", f"train.fn={fn}", *overrides],
                      out_dir=tmp_path, verbose=False)
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
    assert a["certificate"]["reproducible"] is True and a["certificate"]["line"].startswith("bitwise reproducible: yes")
    return results
