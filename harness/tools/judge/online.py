"""A judgement's test level from the ledger's online FDR (LORD++, SAFFRON, ...) and its settlement.

Each judgement is one test of the ledger's stream of its method and level: alpha_t is reserved before
any unit runs (from the decisions recorded before it), the sequential A/B runs at that alpha, and the
test is settled with the claim's p and whether it was kept, so the next judgement gets the level the
ledger gives it. Keeps over a loop's lifetime are then held to the declared FDR.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

from harness.ledger.postgres import open_ledger
from harness.ledger.record import default_path
from harness.stats.fdr.asynchronous import next_alpha

METHODS = ("lord++", "saffron", "addis", "lond", "lond_dep", "lord_dep")


def ledger_of(given: Optional[str]):
    """The ledger a judgement writes to: --ledger, else the project's ($HARNESS_LEDGER, outputs/ledger.sqlite)."""
    return given if given else default_path()


def reserve(ledger_path, folder: Path, experiment: str, key: str, method: str, level: float) -> dict:
    """The judgement's test row: {test, claim (its place in the stream, from 1), alpha_t}."""
    ledger = open_ledger(ledger_path)

    def alpha_for(tests):
        return next_alpha(method, [t["pvalue"] for t in tests], [bool(t["rejected"]) for t in tests], level=level,
                          decision_times=[t.get("decision_time") for t in tests])

    declaration = hashlib.sha256(f"judge:{key}".encode()).hexdigest()[:16]
    row, position = ledger.reserve_test(folder=str(Path(folder).resolve()), experiment=experiment,
                                        declaration=declaration, method=method, level=level, alpha_for=alpha_for)
    return {"test": row["id"], "claim": position, "alpha_t": float(row["alpha"]), "method": method, "level": level,
            "ledger": str(ledger_path)}


def settle(ledger_path, test: int, p: Optional[float], kept: bool) -> None:
    """Record the judgement's p (1 when no claim could be made: the run failed) and whether it was kept."""
    open_ledger(ledger_path).settle_test(test, 1.0 if p is None else float(p), kept)


def withdraw(ledger_path, test: int) -> bool:
    """Take back a reserved level no run used (the harness refused before any unit): nothing spent."""
    return open_ledger(ledger_path).withdraw_test(test)


def claim_id(ledger_path, folder: Path) -> Optional[int]:
    """The id of the claim row the run recorded for ``folder`` (None when it recorded none)."""
    where = str(Path(folder).resolve())
    ids = [r["id"] for r in open_ledger(ledger_path).claims() if r.get("folder") == where]
    return ids[-1] if ids else None
