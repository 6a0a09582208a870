"""stats.fdr, checked: the online false discovery rate an experiment's claims are tested under.

``{method: none|lond|lord++|saffron|addis|lond_dep|lord_dep, level: 0.1}``. none (the default): each
claim at stats.alpha, untouched by the ledger. A method: the experiment's level alpha_t comes from the project's
ledger when it is declared (harness/ledger/record.py), before any data, and is written into
declaration.json. lond_dep and lord_dep hold the FDR under any dependence between claims. The schema
(schema.py) refuses any other name when Hydra composes; a recorded config is checked here.
"""

from __future__ import annotations

# harness.stats.fdr.online.ALL_METHODS with none first (tests/test_ledger_run.py checks they agree)
FDR_METHODS = ("none", "lond", "lord++", "saffron", "addis", "lond_dep", "lord_dep")


def fdr_spec(value, problems: list, *, sequential: bool, conditions: bool):
    """{method, level} for a method, None for none; a sentence in ``problems`` for a bad value."""
    value = dict(value or {})
    method = str(getattr(value.get("method"), "value", value.get("method", "none"))).lower()  # the schema's Enum
    level = value.get("level", 0.1)
    if method not in FDR_METHODS:
        problems.append(f"stats.fdr.method={value.get('method')!r} is not an online FDR method; one of "
                        f"{', '.join(FDR_METHODS)} (none: each claim at stats.alpha).")
        return None
    if method == "none":
        return None
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        problems.append(f"stats.fdr.level={level!r} must be a number between 0 and 1 (the false discovery rate "
                        "held over the ledger's claims, e.g. 0.1).")
        return None
    if sequential or conditions:
        problems.append(f"stats.fdr.method={method} is built for a fixed-seed A/B; with "
                        f"{'ab.sequential' if sequential else 'ab.conditions'} the level is not taken from the "
                        "ledger. Run it with stats.fdr.method=none.")
        return None
    return {"method": method, "level": float(level)}
