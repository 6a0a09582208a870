"""The ledger's address, checked before anything is written: a password is never printed or stored,
and only a PostgreSQL URL is a URL (harness/config/ledger_spec.py).

A password inside ledger.url would be recorded in experiment.json, every result's config, Hydra's
.hydra/ files and the output folder's name; it is refused (exit 2, nothing written) with the ways
PostgreSQL keeps one. No server is needed: 127.0.0.1:1 is a closed port."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run_cli
from .test_ledger_run import SYN

SECRET = "Sup3rSecretPw"


def _everything_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


def _secret_anywhere(folder: Path, proc) -> list[str]:
    """Where SECRET is: the captured output, any file's name or content under ``folder``."""
    found = [name for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)) if SECRET in text]
    for path in _everything_under(folder):
        if SECRET in str(path) or (path.is_file() and SECRET.encode() in path.read_bytes()):
            found.append(str(path))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("mode, args", [
    ([], [f"ledger.url=postgresql://harness:{SECRET}@127.0.0.1:1/ledger"]),
    ([], [f"ledger.url='postgres://harness@127.0.0.1:1/ledger?password={SECRET}'"]),  # quoted, as Hydra needs
    (["-m"], ["seed=0,1", f"ledger.url=postgresql://harness:{SECRET}@127.0.0.1:1/ledger"]),
], ids=["userinfo", "query", "sweep"])
def test_an_inline_password_is_refused_before_anything_is_written(tmp_path, mode, args):
    proc = run_cli([*mode, *SYN, *args], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "ledger.url" in proc.stderr and "PGPASSWORD" in proc.stderr and ".pgpass" in proc.stderr, proc.stderr
    assert not _secret_anywhere(tmp_path, proc)
    assert not _everything_under(tmp_path), "a refused run wrote files"


@pytest.mark.slow
def test_a_password_in_the_yaml_is_refused_as_well(tmp_path):
    conf, work = tmp_path / "conf", tmp_path / "work"
    (conf / "team").mkdir(parents=True)
    work.mkdir()
    (conf / "team" / "ledger.yaml").write_text(
        f"# @package _global_\nledger:\n  url: postgresql://harness:{SECRET}@127.0.0.1:1/ledger\n")
    proc = run_cli(["--config-dir", str(conf), *SYN, "+team=ledger"], cwd=work)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "ledger.url" in proc.stderr and "PGPASSWORD" in proc.stderr, proc.stderr
    assert not _secret_anywhere(work, proc)
    assert not _everything_under(work), "a refused run wrote files"


@pytest.mark.slow
def test_a_password_from_pgpassword_is_not_printed_when_the_server_cannot_be_reached(tmp_path):
    # stats.fdr takes the level from the ledger before any run: the closed port is met at once
    proc = run_cli([*SYN, "ledger.url=postgresql://harness@127.0.0.1:1/ledger", "stats.fdr.method=lond",
                    f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, env={"PGPASSWORD": SECRET})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "cannot be reached" in proc.stderr, proc.stderr
    assert not _secret_anywhere(tmp_path, proc)


def test_a_ledger_that_cannot_be_written_is_named_without_its_password(tmp_path):
    """The warning of record_analysis (a URL that reached it from an older caller) masks the password."""
    from harness.ledger.record import record_analysis

    said = []
    url = f"postgresql://harness:{SECRET}@127.0.0.1:1/ledger"
    assert record_analysis({}, tmp_path, None, url, warn=said.append) is None
    assert said and "127.0.0.1:1/ledger" in said[0] and SECRET not in said[0], said


@pytest.mark.parametrize("url, secret", [
    ("postgresql://harness:pa%40ss@db.lab:5432/ledger", True),
    ("postgres://harness@db.lab/ledger?sslmode=require&password=pw", True),
    ("postgresql://harness@db.lab/ledger?sslpassword=pw", True),
    ("postgresql://:pw@db.lab/ledger", True),
    ("postgresql://harness@db.lab/ledger", False),
    ("postgresql://db.lab:5432/ledger?options=a@b", False),  # libpq's credentials end at the first '/'
    ("postgresql://postgres@/ledger?host=/tmp/pg&port=5433", False),
    ("postgresql:///?service=ledger", False),
])
def test_a_password_is_found_where_libpq_reads_one_and_never_shown(url, secret):
    from harness.config.ledger_spec import has_password, shown

    assert has_password(url) is secret
    assert "pw" not in shown(url) and "pa%40ss" not in shown(url)
    if not secret:
        assert shown(url) == url  # a URL without a password is shown as it is


@pytest.mark.slow
@pytest.mark.parametrize("args, key", [
    (["ledger.url=mysql://harness@127.0.0.1/ledger"], "ledger.url"),
    (["ledger.url=ledger.sqlite"], "ledger.url"),
    (["ledger.path=postgresql://harness@127.0.0.1:1/ledger"], "ledger.path"),
], ids=["mysql", "a-file-as-url", "url-as-path"])
def test_a_ledger_address_of_the_wrong_kind_is_refused_before_any_unit(tmp_path, args, key):
    proc = run_cli([*SYN, *args], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert key in proc.stderr and "postgresql://" in proc.stderr, proc.stderr
    assert not _everything_under(tmp_path), "a refused run wrote files"


def test_the_ledger_command_refuses_a_url_it_cannot_read(tmp_path, capsys, monkeypatch):
    from harness.ledger import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["--ledger", "mysql://harness@127.0.0.1/ledger"]) == 2
    assert "--ledger" in capsys.readouterr().err
    assert not _everything_under(tmp_path)


def test_a_postgresql_url_in_harness_ledger_is_the_ledger_not_a_file_named_like_it(monkeypatch):
    from harness.ledger.record import ledger_path

    monkeypatch.setenv("HARNESS_LEDGER", "postgresql://ci@localhost:5432/claims")
    assert ledger_path({}) == "postgresql://ci@localhost:5432/claims"
