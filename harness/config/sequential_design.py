"""The sequential design a declaration declares: ``ab.sequential`` with the margin of ``stats.margin``.

Validating a design is the declaration's job, so it lives beside it: ``settings_problems`` names each
bad value (the preflight lists them before any run), ``design_of`` turns a declaration into the
statistics core's SequentialDesign (harness.stats.sequential.design). The bookkeeping of a running design,
which seeds count and what runs next, is harness.experiment.adaptive.sequential_plan's.
"""

from __future__ import annotations

import math

_SPENDINGS = ("pocock", "obrien-fleming", "hsd")
_FUTILITY_RULES = ("reach", "better")  # the core's FUTILITY_RULES (harness.stats.sequential.design)


def _v(x):
    return getattr(x, "value", x)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def baseline_and_arms(decl) -> tuple[str, list[str]]:
    """The declaration's baseline and the arms compared with it."""
    return decl.baseline, decl.others


def settings_problems(decl) -> list[str]:
    """Problems of a declaration's sequential design (ab.sequential and stats.margin), one sentence
    each naming the key, the value and what is allowed."""
    s = decl.sequential
    p: list[str] = []
    key = "ab.sequential."

    def whole(name, low, allow_none=False):
        v = getattr(s, name)
        if v is None and allow_none:
            return True
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            p.append(f"{key}{name}={v!r} must be an integer >= {low}" + (" or null" if allow_none else "")
                     + {"seeds_per_look": " (seeds added between looks; 0 would never reach the next look)",
                        "max_seeds": " (the most seeds any arm gets)"}.get(name, "") + ".")
            return False
        return True

    ok = whole("max_seeds", 2) & whole("seeds_per_look", 1) & whole("min_seeds", 2, allow_none=True)
    # 3: the sd of fewer differences has one degree of freedom or none, and an analysis needs 3 pairs
    if whole("futility_from", 3, allow_none=True) and s.futility_from is not None and (
            s.futility_rule != "better" or s.futility == 0):
        p.append(f"{key}futility_from={s.futility_from} asks for futility-only looks before the first claim look, "
                 f"which need {key}futility_rule=better (got {s.futility_rule}: the rule reach plans over the look's "
                 f"interval, and a look that spends no alpha has none) and {key}futility > 0 (got {s.futility}). "
                 f"Set both, or {key}futility_from=null.")
    whole("max_failures", 0)
    if ok and s.min_seeds is not None and s.max_seeds < s.min_seeds:
        p.append(f"{key}max_seeds={s.max_seeds} is below {key}min_seeds={s.min_seeds}: the first look would "
                 f"come after the last. Raise max_seeds or lower min_seeds.")
    if s.alpha is not None and not (_number(s.alpha) and 0 < s.alpha < 0.5):
        p.append(f"{key}alpha={s.alpha!r} must be a number between 0 and 0.5 (e.g. 0.05), or null for stats.alpha.")
    if s.equivalence is True and not (_number(decl.margin) and decl.margin > 0):
        p.append(f"{key}equivalence=true asks for 'equivalent' claims, but stats.margin={decl.margin!r}: "
                 f"equivalence is only claimed within a margin declared before the data. Set "
                 f"stats.margin=<the smallest effect that matters, in {decl.metric}'s units>, or "
                 f"{key}equivalence=false (or null).")
    if s.spending not in _SPENDINGS:
        p.append(f"{key}spending={s.spending!r} is not a spending function; allowed: {', '.join(_SPENDINGS)}.")
    if not (_number(s.gamma)):
        p.append(f"{key}gamma={s.gamma!r} must be a finite number (used with spending=hsd).")
    if not (_number(s.futility) and 0 <= s.futility < 0.5):
        p.append(f"{key}futility={s.futility!r} must lie in [0, 0.5) (0 turns futility stopping off).")
    if s.futility_rule not in _FUTILITY_RULES:
        p.append(f"{key}futility_rule={s.futility_rule!r} is not a futility rule; allowed: reach (stop when no "
                 f"effect inside the interval gives any claim a {key}futility chance by max_seeds) or better (stop "
                 f"when the predictive chance that max_seeds shows better is below {key}futility).")
    return p


def design_of(decl):
    """The SequentialDesign a declaration (harness.config.declaration) declares: ab.sequential with the
    margin of stats.margin. ValueError: one paragraph per problem."""
    from harness.stats.sequential.design import SequentialDesign

    problems = []
    baseline, others = baseline_and_arms(decl)
    if not others:
        problems.append(f"ab.arms has {len(decl.arms)} arm(s): the sequential mode compares at least two.")
    if decl.sequential is None:
        problems.append("ab.sequential.enabled is false: there is no sequential design to run.")
    else:
        problems += settings_problems(decl)
    if problems:
        raise ValueError(" ".join(problems))
    s = decl.sequential
    direction = decl.primary.direction
    margin = float(decl.margin) if decl.margin is not None else None
    equivalence = bool(margin) if s.equivalence is None else bool(s.equivalence)
    alpha = decl.sequential_alpha
    kw = dict(max_seeds=int(s.max_seeds), seeds_per_look=int(s.seeds_per_look), alpha=alpha, margin=margin,
              direction=direction, equivalence=equivalence, spending=str(s.spending), gamma=float(s.gamma),
              futility=float(s.futility), futility_rule=str(s.futility_rule), arms=len(others),
              futility_from=None if s.futility_from is None else int(s.futility_from))
    floor = min_claim_seeds(alpha, len(others), margin)
    if s.min_seeds is not None:
        min_seeds = int(s.min_seeds)
    elif kw["max_seeds"] < floor:
        min_seeds = floor  # refused below, naming max_seeds
    else:
        # the first look at which the exact sign-flip test can reach that look's level (2**-n at most
        # its nominal level): looks before it could only stop for futility, their alpha unused
        from harness.stats.sequential.design import first_claim_seeds
        try:
            min_seeds = first_claim_seeds(**kw)
        except ValueError as e:  # a rule of the core not mirrored above: its own sentence, under our key
            raise ValueError(f"ab.sequential: {e}") from None
    if min_seeds < floor:
        raise ValueError(
            f"ab.sequential.min_seeds={min_seeds} is too few: with alpha {alpha:g}, {len(others)} arm(s) against "
            f"the baseline and {'a margin' if margin else 'no margin'}, each claim is tested one-sided at "
            f"{one_sided_alpha(alpha, len(others), margin):.4g}, and the exact sign-flip test on n pairs cannot "
            f"go below 2**-n: a claim needs at least {floor} seeds. Set ab.sequential.min_seeds >= {floor} "
            f"(or null, which takes {floor}).")
    if min_seeds > kw["max_seeds"]:
        raise ValueError(f"ab.sequential.max_seeds={kw['max_seeds']} is below the first look at {min_seeds} seeds "
                         f"(ab.sequential.min_seeds{'=null: the fewest seeds a claim can rest on' if s.min_seeds is None else ''}). "
                         f"Raise max_seeds to at least {min_seeds}.")
    try:
        return SequentialDesign(min_seeds=min_seeds, **kw)
    except ValueError as e:  # a rule of the core not mirrored above: its own sentence, under our key
        raise ValueError(f"ab.sequential: {e}") from None


def one_sided_alpha(alpha: float, arms: int, margin) -> float:
    """The core's level of each one-sided claim (SequentialDesign.one_sided_alpha)."""
    return alpha / arms / (1 if margin else 2)


def min_claim_seeds(alpha: float, arms: int, margin) -> int:
    """The core's floor (SequentialDesign.min_claim_seeds): the exact sign-flip test's 2**-n <= a1.

    The least ``min_seeds`` may be. The default first look (``min_seeds`` null) is later where the
    first look's nominal level is below 2**-floor (harness.stats.sequential.design.first_claim_seeds)."""
    return max(3, math.ceil(math.log2(1.0 / one_sided_alpha(alpha, arms, margin)) - 1e-12))
