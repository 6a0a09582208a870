"""One run per (seed, arm): copies of a run found in several files, and the digest of the runs used.

The same (seed, arm) found in several files is one run when the copies are bit-identical (same
identity, fingerprints, status and metrics: e.g. a sweep folder analysed together with an older
copy of itself); copies that differ are named with their paths and refused. A completed run whose
final fingerprint equals that of another seed is a copy relabelled as a new seed: refused, named --
unless that fingerprint is a command arm's digest of its metrics alone (two seeds may print the same
rounded score; with train.compare_files it covers the saved bytes too, and counts).
``inputs_digest`` says which runs an analysis used, so a stale analysis.json is recognised.

Pure functions over result dicts; a run's identity is run_identity.py's. Both names are importable
from comparability.py too.
"""

from __future__ import annotations

import hashlib

from harness.analysis.identity.seed_reach import final_is_evidence, how_to_fix
from harness.analysis.identity.run_identity import IdentityError, _canonical, _short, hashes, identity, where
from harness.results import key_bytes


def _bits(r) -> str:
    fingerprints = r.get("fingerprints") or {}
    return _canonical({
        "identity": identity(r), "config_hash": hashes(r)[0], "status": r.get("status"),
        "metrics": r.get("metrics"), "error": r.get("error"),
        "fingerprints": {k: fingerprints.get(k) for k in ("init", "data_order", "final")},
    })


def one_per_run(results) -> tuple[list[dict], list[dict]]:
    """(results with bit-identical copies of a (seed, arm) merged, the merged copies named).

    IdentityError when copies of a (seed, arm) differ, or a completed run's final fingerprint
    appears under another seed (a copy relabelled as a new seed).
    """
    by_run: dict[tuple, list] = {}
    for r in results:
        by_run.setdefault((r.get("seed"), str(r.get("arm"))), []).append(r)
    kept, copies, conflicts = [], [], []
    for (seed, arm), rs in by_run.items():
        if len(rs) == 1:
            kept.append(rs[0])
            continue
        rs = sorted(rs, key=where)
        kept.append(rs[0])
        if len({_bits(r) for r in rs}) == 1:
            copies.append({"seed": seed, "arm": arm, "kept": where(rs[0]), "copies": [where(r) for r in rs[1:]]})
        else:
            shown = "; ".join(f"{where(r)}: {_what(r)}" for r in rs)
            conflicts.append(f"seed {seed} arm {arm} in {len(rs)} files that differ ({shown})")
    finals: dict[str, list] = {}
    for r in kept:
        final = (r.get("fingerprints") or {}).get("final")
        if final and r.get("status") == "completed" and final_is_evidence(r):
            finals.setdefault(final, []).append(r)
    relabelled = [rs for rs in finals.values() if len(rs) > 1 and len({r.get("seed") for r in rs}) > 1]
    if conflicts or relabelled:
        parts = []
        if conflicts:
            parts.append("The same (seed, arm) has conflicting results: " + "; ".join(conflicts) + ". A run "
                         "is one result: copies count once only when they are bit-identical. Remove or "
                         "move aside the copy that is not current (its folder is named above).")
        for rs in relabelled:
            parts.append(
                "Identical final weights under different seeds (a copy relabelled as a new seed): "
                + ", ".join(f"seed {r.get('seed')} arm {r.get('arm')}" + (f" ({r['_path']})" if r.get("_path") else "")
                            for r in rs)
                + f", final fingerprint {(rs[0].get('fingerprints') or {}).get('final')}. Different seeds "
                "cannot end at the same bits; remove the copy and rerun that seed."
                + (_or_seed_ignored(rs[0]) if len({str(r.get("arm")) for r in rs}) == 1 else "")
            )
        raise IdentityError(" ".join(parts))
    return kept, copies


def _or_seed_ignored(r) -> str:
    """Runs of one arm at the same bits under several seeds are not always copies: the seed may
    never have reached the training (analysis/identity/seed_reach.py)."""
    return f" If they are not copies, {how_to_fix(r)}; then rerun those seeds."


def _what(r) -> str:
    fingerprints = r.get("fingerprints") or {}
    return (f"config_hash {hashes(r)[0]}, code {_short(r.get('code_version'))}, status {r.get('status')}, "
            f"final {fingerprints.get('final')}")


def inputs_digest(results) -> str:
    """A digest of which runs an analysis used: an old analysis.json with another one is stale.
    (Not of where the files are: the same runs in another folder layout give the same analysis.)"""
    rows = sorted(key_bytes([r.get("seed"), str(r.get("arm")), hashes(r)[0],
                              (r.get("fingerprints") or {}).get("final"), r.get("status"), r.get("metrics")])
                  for r in results)
    return hashlib.sha256(b"\n".join(rows)).hexdigest()[:16]


__all__ = ["inputs_digest", "one_per_run"]
