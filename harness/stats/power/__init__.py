"""Power and seeds needed: how likely a claim is to be made with n seeds, and the fewest seeds for it.

    t_test.py        the paired t test's power (the noncentral t tail by quadrature)
    exact_share.py   the exact sign-flip test's share of the t test's power below 20 pairs (a shipped
                     table, exact_share_table.json)
    margin.py        a margin claim's power averaged over an estimated margin, and bounds on it
    seeds_needed.py  power and seeds needed for each claim, on the three above
"""
