"""The ledger in PostgreSQL (ledger.url, harness/ledger/postgres.py), against a real server.

.ci/run starts one (scripts/postgres_local.sh start, as root) and exports HARNESS_TEST_POSTGRES_URL;
elsewhere these tests skip, saying so. Each test works in a schema of its own, dropped afterwards."""

from __future__ import annotations

import os
import uuid

import pytest

from harness.ledger import cli
from harness.ledger.postgres import open_ledger
from harness.ledger.record import assign_alpha, record_analysis
from harness.ledger.store import LedgerError
from harness.stats.fdr import online as ofdr

from .test_ledger import _analysis, _declaration, check_two_writers

URL = os.environ.get("HARNESS_TEST_POSTGRES_URL")
pytestmark = [pytest.mark.services, pytest.mark.skipif(
    not URL, reason="no PostgreSQL server: run `sudo bash scripts/postgres_local.sh start` and export the "
                    "HARNESS_TEST_POSTGRES_URL it prints (.ci/run does both)")]


@pytest.fixture
def url():
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(URL, autocommit=True) as con:
        con.execute(f"CREATE SCHEMA {schema}")
    yield f"{URL}{'&' if '?' in URL else '?'}options=-csearch_path%3D{schema}"
    with psycopg.connect(URL, autocommit=True) as con:
        con.execute(f"DROP SCHEMA {schema} CASCADE")


def test_two_processes_writing_at_once_write_each_claim_and_test_once(url):
    check_two_writers(url)


def test_levels_keep_every_digit_and_the_cli_reads_the_url(url, tmp_path, capsys):
    fdr = {"method": "addis", "level": 0.1}
    levels = []
    for i, p in enumerate([1e-6, 0.3, 0.02]):
        decl = assign_alpha(_declaration(f"e{i}", fdr=fdr), tmp_path / f"e{i}", url)
        levels.append(decl.alpha)
        record_analysis(_analysis(p=p, alpha=decl.alpha), tmp_path / f"e{i}", decl, url, warn=pytest.fail)
    expected = ofdr.addis([1e-6, 0.3, 0.02], level=0.1)
    assert levels == expected.alpha.tolist()  # exactly: 8-byte floats
    assert cli.main(["--ledger", url, "--offline", "bh"]) == 0
    out = capsys.readouterr().out
    assert "3 claim(s)" in out and f"ADDIS at FDR 0.1: 3 tests (3 decided), {expected.rejected.sum()} rejected" in out


def test_a_database_with_other_tables_is_refused(url):
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE runs (x int)")
    with pytest.raises(LedgerError, match="other tables"):
        open_ledger(url)
