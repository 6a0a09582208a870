"""The sequential design: what is declared before any data (looks, alpha, margin, spending, the
shapes the boundaries are calibrated for), its boundaries and nominal levels, and the first look at
which the exact sign-flip test can support a claim. The looks themselves are looks.py's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping

import numpy as np
from scipy import stats as sps

from harness.stats.sequential.bounds import SPENDINGS, _normal_bounds, _robust_bounds, _t_bounds, spend


MAX_SKEWNESS = 4.0  # the largest skewness a design may be calibrated for (gamma shape 0.25)
DECISIONS = ("continue", "better", "worse", "equivalent", "futile", "undecided")
CONTINUE, BETTER, WORSE, EQUIVALENT, FUTILE, UNDECIDED = range(6)
_FUTILITY_POINTS = 9  # effects inside the interval at which the chance to settle is evaluated
# what a futility stop asks (looks.py): "reach", no effect inside the interval gives any claim a
# ``futility`` chance by the last look; "better", the predictive chance that the last look shows
# "better" is below ``futility`` (for a keep/discard decision, where only "better" is acted on)
FUTILITY_RULES = ("reach", "better")


@dataclass(frozen=True)
class SequentialDesign:
    """A sequential paired comparison, declared before any data. Raises ValueError on bad values."""

    max_seeds: int = 50
    seeds_per_look: int = 2
    min_seeds: int = 6
    alpha: float = 0.05
    margin: float | None = None  # the smallest effect of interest, metric units, declared up front
    direction: str = "max"  # "max": higher is better; "min": lower is better
    equivalence: bool = True  # whether "equivalent within +-margin" may be claimed
    spending: str = "pocock"
    gamma: float = 1.0  # Hwang-Shih-DeCani parameter (spending="hsd" only)
    futility: float = 0.05  # stop as futile when no plausible effect settles a claim with >= this chance
    futility_rule: str = "reach"  # which chance ``futility`` bounds: FUTILITY_RULES
    # futility-only looks before the first claim look: at futility_from, then every seeds_per_look seeds
    # below min_seeds (None: none). They spend no alpha (no claim is possible there), so they never raise
    # an error rate; they spare the seeds of runs heading nowhere (futility_rule "better" only)
    futility_from: int | None = None
    arms: int = 1  # arms compared with the baseline; alpha is split evenly (Bonferroni)
    # the largest |skewness| of the differences the boundaries hold for (normal, or gamma-shaped up to
    # this, either direction): Hall's skewness-corrected t calibrated on those shapes;
    # 0: normal differences only, the plain t statistic
    skewness: float = 2.0
    _bounds: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        def bad(msg):
            raise ValueError(f"SequentialDesign: {msg}")

        for name in ("max_seeds", "seeds_per_look", "min_seeds", "arms", "futility_from"):
            v = getattr(self, name)
            if v is None and name == "futility_from":
                continue
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                bad(f"{name} must be a whole number, got {v!r}.")
        if not (isinstance(self.alpha, (int, float)) and 0.0 < self.alpha < 0.5):
            bad(f"alpha is the error rate allowed for each claim and must lie in (0, 0.5), got "
                f"{self.alpha!r}; 0.05 is the usual choice.")
        if self.direction not in ("max", "min"):
            bad(f"direction must be 'max' (higher is better) or 'min' (lower is better), got "
                f"{self.direction!r}; it is declared, never guessed from the metric's name.")
        if self.arms < 1:
            bad(f"arms (the number of arms compared with the baseline) must be >= 1, got {self.arms}.")
        if self.seeds_per_look < 1:
            bad(f"seeds_per_look must be >= 1, got {self.seeds_per_look}: each look must add at "
                "least one seed to every arm still running, or the run never ends.")
        floor = self.min_claim_seeds
        if self.min_seeds < floor:
            bad(f"min_seeds is {self.min_seeds}, but with alpha {self.alpha}, {self.arms} arm(s) and "
                f"{'a margin' if self.margin else 'no margin'} each claim is tested one-sided at "
                f"{self.one_sided_alpha:.4g}, and the exact sign-flip test on n pairs cannot go "
                f"below 2**-n: a claim needs at least {floor} seeds. Set min_seeds >= {floor}.")
        if self.max_seeds < self.min_seeds:
            bad(f"max_seeds ({self.max_seeds}) is below min_seeds ({self.min_seeds}): the first "
                "look would come after the last. Raise max_seeds or lower min_seeds.")
        if self.margin is not None and not (math.isfinite(self.margin) and self.margin >= 0):
            bad(f"margin must be a finite number >= 0 in the metric's units, got {self.margin!r}.")
        if self.equivalence and not self.margin:
            bad(f"margin is {self.margin!r} but an 'equivalent' claim is possible (equivalence="
                "True). Equivalence is only claimed within a margin declared before the data (the "
                "smallest effect that matters, in the metric's units): pass margin=..., or set "
                "equivalence=False to decide only better/worse than 0.")
        if self.spending not in SPENDINGS:
            bad(f"spending must be one of {SPENDINGS}, got {self.spending!r}.")
        if not (0.0 <= self.futility < 0.5):
            bad(f"futility must lie in [0, 0.5) (0 turns futility stopping off), got {self.futility!r}.")
        if self.futility_rule not in FUTILITY_RULES:
            bad(f"futility_rule must be one of {FUTILITY_RULES} ('reach': no plausible effect settles any claim; "
                f"'better': the predictive chance of showing better is below futility), got {self.futility_rule!r}.")
        if self.futility_from is not None and (self.futility_from < 3 or not self.futility
                                               or self.futility_rule != "better"):
            bad(f"futility_from={self.futility_from!r}: futility-only looks before the first claim look need at "
                f"least 3 seeds (the sd of fewer differences has one degree of freedom or none to plan with, and "
                f"an analysis needs 3 pairs), futility > 0 (got {self.futility!r}) and futility_rule 'better' (got "
                f"{self.futility_rule!r}): the rule 'reach' plans over the look's interval, and a look that spends no "
                "alpha has none. Use futility_from >= 3 with futility_rule='better', or None for no such looks.")
        if (isinstance(self.skewness, bool) or not isinstance(self.skewness, (int, float, np.integer, np.floating))
                or not 0.0 <= self.skewness <= MAX_SKEWNESS):
            bad(f"skewness is the largest |skewness| of the differences the boundaries must hold for and must "
                f"lie in [0, {MAX_SKEWNESS:g}], got {self.skewness!r}; 2 is the default, 0 assumes normal "
                "differences.")
        object.__setattr__(self, "_bounds", self._compute_bounds())

    @property
    def one_sided_alpha(self) -> float:
        """The level of each one-sided claim: alpha split across arms, halved when margin = 0."""
        return _one_sided_alpha(self.alpha, self.arms, self.margin)

    @property
    def min_claim_seeds(self) -> int:
        """The fewest pairs with which the exact sign-flip test can reach a1 at all (2^-n <= a1)."""
        return _min_claim_seeds(self.alpha, self.arms, self.margin)

    @property
    def claim_looks(self) -> tuple:
        """The looks at which a claim is possible: the exact sign-flip test's smallest p on n pairs,
        2^-n, is at most the look's nominal level. At the other looks only futility can stop."""
        return tuple(n for n, _, nominal, _ in self._bounds if 2.0**-n <= nominal)

    @property
    def futility_looks(self) -> tuple:
        """The futility-only looks before the first claim look (``futility_from``; empty when None)."""
        if self.futility_from is None:
            return ()
        return tuple(range(self.futility_from, self.min_seeds, self.seeds_per_look))

    @property
    def schedule(self) -> tuple:
        """Every look in order: the futility-only looks, then the looks that spend alpha (``looks``)."""
        return self.futility_looks + self.looks

    @property
    def looks(self) -> tuple:
        ns = list(range(self.min_seeds, self.max_seeds + 1, self.seeds_per_look))
        return tuple(ns if ns[-1] == self.max_seeds else ns + [self.max_seeds])

    def _compute_bounds(self):
        looks = self.looks
        a1 = self.one_sided_alpha
        cum = spend(self.spending, self.gamma, a1, np.array(looks) / self.max_seeds)
        cum[-1] = a1  # all of it is spent by the last look
        inc = tuple(np.diff(np.concatenate([[0.0], cum])).tolist())
        z = np.array(_normal_bounds(tuple(float(n) for n in looks), inc))
        crit = np.array(_t_bounds(looks, inc, tuple(sps.t.isf(sps.norm.sf(z), np.array(looks) - 1))))
        # the level each look spends (normal differences): the exact sign-flip test must reach it
        nominal = sps.t.sf(crit, np.array(looks) - 1)
        if self.skewness > 0:  # Hall's statistic, calibrated on every reference shape
            crit = np.array(_robust_bounds(looks, inc, float(self.skewness), not self.margin, tuple(crit.tolist())))
        return tuple(zip(looks, z.tolist(), nominal.tolist(), crit.tolist()))

    @property
    def boundaries(self) -> tuple:
        """Per look: (n, z boundary, nominal one-sided level, critical value): the critical value is on
        the scale of the look's statistic, Hall's skewness-corrected t (the t statistic when
        skewness is 0); the nominal level is what the look spends, which the exact sign-flip test
        must reach."""
        return self._bounds

    def critical(self, n: int) -> float:
        return self._boundary(n)[3]

    def nominal(self, n: int) -> float:
        """The one-sided nominal level of the look at n seeds (of the t test and the sign-flip test)."""
        return self._boundary(n)[2]

    def _boundary(self, n: int) -> tuple:
        for b in self._bounds:
            if b[0] == n:
                return b
        raise ValueError(f"{n} seeds is not a look of this design; the looks are {self.looks}.")

    @classmethod
    def from_dict(cls, d: Mapping) -> "SequentialDesign":
        """The design stored with a run (``to_dict``), for resuming: derived keys are ignored. A record
        from before the skewness calibration (no ``skewness`` key) was made with the normal
        boundaries, and resumes under them: a design never changes after looks were made."""
        stored = {k: d[k] for k in cls.__dataclass_fields__ if not k.startswith("_") and k in d}
        stored.setdefault("skewness", 0.0)
        return cls(**stored)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if not k.startswith("_")}
        if d["futility_rule"] == "reach":  # the records of designs made before the key stay as they were
            del d["futility_rule"]
        if d["futility_from"] is None:  # and before this one
            del d["futility_from"]
        else:
            d["futility_looks"] = list(self.futility_looks)
        d["looks"] = list(self.looks)
        d["one_sided_alpha"] = self.one_sided_alpha
        return d


def _one_sided_alpha(alpha: float, arms: int, margin) -> float:
    return alpha / arms / (1 if margin else 2)


def _min_claim_seeds(alpha: float, arms: int, margin) -> int:
    return max(3, math.ceil(math.log2(1.0 / _one_sided_alpha(alpha, arms, margin)) - 1e-12))


@lru_cache(maxsize=64)
def _first_claim_seeds(items: tuple) -> int:
    kw = dict(items)
    try:
        m = _min_claim_seeds(kw["alpha"], kw["arms"], kw["margin"])
    except (TypeError, ValueError, ZeroDivisionError):
        m = 1  # a bad value: the design below says which, in its own words
    while True:
        # at m = max_seeds a single look spends all of a1 >= 2^-floor, so this ends there at the latest
        # the nominal levels do not depend on the skewness the boundaries are calibrated for
        if 2.0**-m <= SequentialDesign(min_seeds=m, **{**kw, "skewness": 0.0}).boundaries[0][2] or m >= kw["max_seeds"]:
            return m
        m += 1


def first_claim_seeds(**design) -> int:
    """The smallest ``min_seeds`` whose first look can settle a claim: the exact sign-flip test's
    smallest p on n pairs, 2^-n, is at most that look's nominal level. ``design``: the other
    SequentialDesign arguments (min_seeds, if given, is ignored). Earlier looks could only stop for
    futility while their share of alpha went unused; the harness's default first look is this one.
    """
    defaults = {k: f.default for k, f in SequentialDesign.__dataclass_fields__.items() if not k.startswith("_")}
    kw = {**defaults, **{k: v for k, v in design.items() if k != "min_seeds"}}
    kw.pop("min_seeds")
    return _first_claim_seeds(tuple(sorted(kw.items())))
