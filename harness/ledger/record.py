"""What goes into the ledger: an analysis's claims, and an experiment's alpha_t before its data.

``record_analysis`` turns analysis.json's comparisons into claim rows and appends them; a ledger that
cannot be written is said as a warning and never costs the analysis. ``assign_alpha`` takes the test
level of an experiment declared with ``stats.fdr`` from the ledger, before any data, and returns the
declaration with ``alpha`` = alpha_t and ``fdr`` saying where it came from; declaration.json then
holds it, so re-analysing reproduces the verdict and later claims never change it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from harness.ledger.claims import _folder, claim_rows, declaration_hash
from harness.ledger.postgres import open_ledger
from harness.config.ledger_spec import is_url, shown
from harness.ledger.store import LedgerError
from harness.stats.fdr.online import NAMES
from harness.stats.fdr.asynchronous import next_alpha

def _stream_alpha(method: str, level: float):
    def alpha_for(tests):
        return next_alpha(method, [t["pvalue"] for t in tests], [bool(t["rejected"]) for t in tests], level=level,
                          decision_times=[t.get("decision_time") for t in tests])
    return alpha_for


def assign_alpha(declaration, folder, ledger_path, earlier=None):
    """``declaration`` with alpha_t from the ledger when it declares ``stats.fdr``, else unchanged.
    ``earlier``: the folder's declaration.json, whose assignment is kept when it is of this very
    declaration (a resumed experiment keeps its level whatever the ledger says now)."""
    fdr = declaration.fdr
    if not fdr or "alpha_t" in fdr:
        return declaration
    key = declaration_hash(declaration)
    if earlier is not None and earlier.fdr and "alpha_t" in earlier.fdr and declaration_hash(earlier) == key:
        return replace(declaration, alpha=earlier.alpha, fdr=earlier.fdr)
    ledger = open_ledger(ledger_path)
    row, position = ledger.reserve_test(folder=_folder(folder), experiment=declaration.experiment, declaration=key,
                                        method=fdr["method"], level=fdr["level"],
                                        alpha_for=_stream_alpha(fdr["method"], fdr["level"]))
    assigned = {**fdr, "alpha_t": row["alpha"], "claim": position, "test": row["id"],
                "ledger": str(ledger_path if is_url(ledger_path) else Path(ledger_path)),
                "declared_alpha": declaration.alpha}
    return replace(declaration, alpha=row["alpha"], fdr=assigned)


def fdr_words(fdr) -> str:
    """'at alpha_t = 0.0123 (LORD++ at FDR 0.1, claim 14 of this ledger)'; '' without stats.fdr."""
    if not fdr or "alpha_t" not in fdr:
        return ""
    return (f"at α_t = {fdr['alpha_t']:.4g} ({NAMES.get(fdr['method'], fdr['method'])} at FDR {fdr['level']:g}, "
            f"claim {fdr['claim']} of this ledger)")


def record_analysis(analysis: dict, folder, declaration, ledger_path, warn) -> int | None:
    """Append the analysis's claims to the ledger (and settle its online FDR test); the number of rows
    added, or None when the ledger could not be written (said with ``warn``: the analysis stands)."""
    try:
        ledger = open_ledger(ledger_path)
        rows = claim_rows(analysis, folder, declaration)
        added = ledger.append_claims(rows)
        test = (declaration.fdr or {}).get("test")
        decided = [r["p_decision"] for r in rows if r["p_decision"] is not None]
        if test is not None and not analysis.get("departures") and decided:
            p = min(decided)  # each already x the comparisons (Bonferroni): the experiment's one test
            ledger.settle_test(test, p, p <= declaration.alpha)
        return added
    except (LedgerError, OSError, ValueError) as e:
        warn(shown(f"the claims were not written to the ledger {ledger_path} ({e}); the analysis in {folder} is "
                   "complete. They are added when the experiment is run again (it resumes: nothing is retrained)."))
        return None


DEFAULT_LEDGER = "outputs/ledger.sqlite"  # under the launch directory


def default_path():
    """The ledger when ledger.path is not set: $HARNESS_LEDGER if set (the test suite points it at a
    folder of its own, so its claims never enter a project's ledger), else outputs/ledger.sqlite. A
    postgresql:// URL there stays a URL (as a path it would lose a slash and name a file)."""
    where = os.environ.get("HARNESS_LEDGER") or DEFAULT_LEDGER
    return where if is_url(where) else Path(where)


def ledger_path(settings):
    """The ledger the config's ``ledger`` node names: ledger.url (PostgreSQL) when set, else
    ledger.path (relative to the launch directory); None when ledger.enabled is false."""
    settings = settings or {}
    if not settings.get("enabled", True):
        return None
    if settings.get("url"):
        return str(settings["url"])
    return Path(str(settings["path"])) if settings.get("path") else default_path()


def assign_for_config(settings, declaration, folder):
    """assign_alpha for an experiment about to run into ``folder`` (``settings``: the config's ``ledger``
    node, all the ledger reads of it); LedgerError when stats.fdr asks for
    a level and the ledger cannot give one (nothing may run at a level that was not fixed first)."""
    if not declaration.fdr:
        return declaration
    path = ledger_path(settings)
    if path is None:
        raise LedgerError("stats.fdr.method is set, and its level comes from the ledger, but ledger.enabled=false; "
                          "set ledger.enabled=true or stats.fdr.method=none.")
    from harness.config.declaration import read
    from harness.config.metric_spec import DeclarationError

    try:
        earlier = read(folder)
    except DeclarationError:
        earlier = None
    return assign_alpha(declaration, folder, path, earlier)


def record_for_config(settings, analysis: dict, folder, declaration, warn) -> int | None:
    path = ledger_path(settings)
    return None if path is None else record_analysis(analysis, folder, declaration, path, warn)


def record_written(analysis: dict, folder, warn, ledger=None) -> int | None:
    """Record an analysis written outside an experiment's run (python -m harness.analyze, a sweep's
    callback): to ``ledger``, else the one its declaration's stats.fdr took its level from, else the
    default ledger when it exists (a re-analysis never starts a ledger of its own)."""
    from harness.config.declaration import Declaration

    declaration = Declaration.from_dict(analysis["declaration"])
    path = ledger or (declaration.fdr or {}).get("ledger") or default_path()
    if ledger is None and not is_url(path) and not Path(path).is_file():
        return None
    return record_analysis(analysis, folder, declaration, path, warn)


def record_declared(analysis: dict, folder, settings=None, warn=None) -> int | None:
    """The hook of the analyses that write their own files (ab.conditions, a grid, a race): their claims
    into the ledger ``settings`` (the config's ``ledger`` node, when a run wrote them) names, else,
    re-analysed by python -m harness.analyze, into the ledger record_written finds."""
    if warn is None:
        import logging

        warn = logging.getLogger("harness").warning
    if settings is None:
        return record_written(analysis, folder, warn)
    path = ledger_path(settings)
    return None if path is None else record_written(analysis, folder, warn, ledger=path)


def sweep_level(settings, declaration, root, swept=()):
    """A sweep's declaration with alpha_t from the ledger (stats.fdr), taken by the launching process
    before any job (``settings``: the config's ledger node): the sweep is one experiment, its analysis
    (by the launcher) one test. LedgerError for a grid (``swept``: keys swept besides seed and arm),
    whose every setting would be a claim under one level, and for a ledger that cannot give it."""
    if not declaration.fdr:
        return declaration
    if swept:
        raise LedgerError(f"stats.fdr.method={declaration.fdr['method']} takes one level for one experiment, but this "
                          f"sweep is a grid over {', '.join(swept)}: each setting would be a claim of its own under "
                          "that one level. Run each setting as a sweep of its own, or stats.fdr.method=none.")
    return assign_for_config(settings, declaration, root)


def sweep_level_problem(sweep_root, declaration) -> str | None:
    """Why a job of a sweep with stats.fdr may not run (None: its launcher took the level first)."""
    from harness.config.declaration import read
    from harness.config.metric_spec import DeclarationError

    try:
        root = read(sweep_root) if sweep_root is not None else None
    except DeclarationError:
        root = None
    if root is not None and root.fdr and "alpha_t" in root.fdr:
        return None
    return (f"stats.fdr.method={declaration.fdr['method']} is set, but this job's sweep has no level from the ledger in "
            f"{sweep_root}/declaration.json: a sweep's level is taken by the process that launches it (the plain "
            "sweeper and Hydra's basic one do; the race and sequential sweepers decide otherwise: use "
            "stats.fdr.method=none there). Nothing was run.")
