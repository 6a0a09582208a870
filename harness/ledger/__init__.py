"""The project's ledger of claims: every declared analysis's claims in one file, and the online FDR.

Owns: store.py (the SQLite file: tables, transactions, the damaged-file refusal), postgres.py (the
same tables in PostgreSQL, ledger.url; psycopg imported there only), record.py (an
analysis's claims as rows; an experiment's alpha_t from the ledger before its data; both hooked
where the experiment declares and analyses), cli.py (``python -m harness.ledger``: the claims, the
next alpha, Benjamini-Hochberg / -Yekutieli over them), figure.py (alpha_t and rejections over
time), wandb_table.py (the claims as a wandb run's tables, --wandb), claims.py (each kind of analysis's claims
as rows), __main__.py (its entry).
May import: harness.stats (the online FDR procedures) and harness.config (the declaration); imported
by harness.analysis (the report's level), harness.experiment (the hooks) and harness.tools
(harness.analyze records what it writes).
"""
