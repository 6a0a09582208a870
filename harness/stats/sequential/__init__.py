"""Decisions as seeds are added (docs/sequential.md), and the race of K configurations.

    bounds.py  alpha-spending, the boundaries, Hall's skewness-corrected t
    design.py  the sequential design, declared before the data
    looks.py   the looks and their decisions, on bounds.py, design.py and the exact sign-flip test
    race.py    Kim & Nelson's race of K configurations on common seeds (the race's statistics)
"""
