"""The ledger's claims as one wandb run: a table "claims" (one row per claim) and "online_fdr" (one
row per stream: tests, rejections, the next alpha_t), for ``python -m harness.ledger --wandb DIR``.

Offline unless $WANDB_MODE says otherwise (as the harness's tracking): the run is written under
DIR/wandb/ and ``wandb sync`` sends it. wandb is imported only here.
"""

from __future__ import annotations

import os
from pathlib import Path

CLAIM_COLUMNS = ("id", "recorded_at", "experiment", "claim", "metric", "baseline", "arm", "effect", "ci_low",
                 "ci_high", "p_raw", "p_decision", "alpha", "verdict", "alternative", "folder", "test")
STREAM_COLUMNS = ("method", "level", "tests", "decided", "rejected", "next_alpha")


def log_claims(claims: list[dict], online: list[dict], where, ledger: str) -> Path:
    """Write the run; returns its folder (DIR/wandb/offline-run-.../ when offline)."""
    import wandb

    mode = os.environ.get("WANDB_MODE") or "offline"
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "harness", name="ledger", job_type="ledger",
                     dir=str(where), mode=mode, config={"ledger": ledger}, reinit="finish_previous",
                     settings=wandb.Settings(console="off", silent=True, x_disable_stats=True, save_code=False))
    ok = False
    try:
        run.log({"claims": wandb.Table(columns=list(CLAIM_COLUMNS),
                                       data=[[c.get(k) for k in CLAIM_COLUMNS] for c in claims]),
                 "online_fdr": wandb.Table(columns=list(STREAM_COLUMNS),
                                           data=[[s[k] for k in STREAM_COLUMNS] for s in online])})
        run.summary.update({"counted_claims": sum(not c["alternative"] for c in claims),
                            "alternatives": sum(bool(c["alternative"]) for c in claims)})
        ok = True
        return Path(run.dir).parent
    finally:
        run.finish(exit_code=0 if ok else 1)
        wandb.teardown()  # ends wandb's service process, which writes the rest of the run's file first
