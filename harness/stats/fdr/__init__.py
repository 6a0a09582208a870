"""Across claims: the online false discovery rate, each claim's level alpha_t from the claims before it.

    online.py        LOND, LORD++, SAFFRON, ADDIS, as the R package onlineFDR computes them
    dependent.py     LOND and LORD under arbitrary dependence
    asynchronous.py  Zrnic et al.'s rules for claims that overlap in time; the ledger's next level
    simulate.py      their simulated FDR and power, claims decided in turn or overlapping
"""
