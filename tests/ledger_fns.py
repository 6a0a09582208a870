"""A training function for the ledger's tests: it shows that the level came before the data.

``declared_then_metric(cfg, run, seen=FOLDER, ...)`` copies the experiment's declaration.json, as it
stands when the run starts (the nearest one above the run's folder; absent: ``{}``), to
FOLDER/<seed>_<shift>.json, then reports tests/sequential_fns.paired_metric's number (no training).
A test then reads what every run saw: alpha_t must be there before any run made its data.
"""

from __future__ import annotations

import json
from pathlib import Path

from .sequential_fns import paired_metric


def declared_then_metric(cfg, run, seen: str, shift: float = 0.0, sd: float = 1.0) -> dict:
    folder = Path(run.run_dir).resolve()
    found = next((p / "declaration.json" for p in folder.parents if (p / "declaration.json").is_file()), None)
    declared = json.loads(found.read_text()) if found is not None else {}
    Path(seen).mkdir(parents=True, exist_ok=True)
    (Path(seen) / f"{run.seed}_{shift:g}.json").write_text(json.dumps(declared))
    return paired_metric(cfg, run, shift=shift, sd=sd)
