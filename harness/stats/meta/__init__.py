"""Across conditions: one effect per condition (a grid, ab.conditions), pooled or compared.

    random_effects.py  the random-effects model (REML, Hartung-Knapp), effect slopes, common scale
    claims.py          the claims across conditions, decided with the conditions' estimated variances
    aggregates.py      rliable's aggregates (what peers report across tasks)
    trend.py           dose trends over a numeric factor
"""
