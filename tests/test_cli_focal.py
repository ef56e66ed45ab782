"""CLI commands focal, lr-multiplier and passk: columns, values, formats and the error contract."""

from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest


def _csv(out: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(out))


def test_focal_csv_columns_and_values(cli):
    r = cli("focal", "--N", "4", "--gamma", "0,1", "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    assert list(df.columns) == ["gamma", "N", "X", "mu_hat", "g", "adv_pos", "adv_neg"]
    assert len(df) == 2 * 5
    row = df[(df.gamma == 0) & (df.X == 1)].iloc[0]
    # population std: A+ = sqrt((1-x)/x) = sqrt(3), A- = -sqrt(x/(1-x)) = -1/sqrt(3) at x = 1/4
    assert row.adv_pos == pytest.approx(math.sqrt(3), rel=1e-14)
    assert row.adv_neg == pytest.approx(-1 / math.sqrt(3), rel=1e-14)
    row = df[(df.gamma == 1) & (df.X == 1)].iloc[0]
    assert row.g == 0.75
    assert row.adv_pos == pytest.approx(0.75 * math.sqrt(3), rel=1e-14)
    # inactive groups: no correct (X=0) / no incorrect (X=N) rollout -> 0, never NaN
    edge = df[df.X.isin([0, 4])]
    assert (edge.adv_pos == 0).all() and (edge.adv_neg == 0).all()
    assert not df.isna().any().any()


def test_focal_convention_and_json(cli):
    r = cli("focal", "--N", "4", "--gamma", "0", "--advantage", "trl", "--format", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert len(rows) == 5
    # TRL, X = 2 of 4, rewards 1,-1: centred +-1, Bessel std 2 sqrt(1/3), eps 1e-4
    assert rows[2]["adv_pos"] == pytest.approx(1 / (2 * math.sqrt(1 / 3) + 1e-4), rel=1e-14)
    r = cli("focal", "--N", "1", "--gamma", "0", "--advantage", "verl", "--format", "json")
    rows = json.loads(r.out)
    assert rows[1]["adv_pos"] == pytest.approx(1 / (1 + 1e-6), rel=1e-14)


def test_focal_table_and_output_file(cli, tmp_path):
    r = cli("focal", "--N", "2,3", "--format", "table")
    assert r.code == 0 and "adv_pos" in r.out and "┃" in r.out
    out = tmp_path / "focal.csv"
    r = cli("focal", "--N", "2..8:x2", "--gamma", "0.5", "--output", out)
    assert r.code == 0 and "wrote 17 rows" in r.err  # (2+1) + (4+1) + (8+1)
    assert sorted(pd.read_csv(out).N.unique()) == [2, 4, 8]


def test_lr_multiplier(cli):
    r = cli("lr-multiplier", "--gamma", "0,0.5,1,2", "--format", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert [row["gamma"] for row in rows] == [0, 0.5, 1, 2]
    expected = [1.0, 32 / (15 * math.pi), 0.5, 5 / 16]  # B(3/2, g+3/2) / (pi/8) by hand
    for row, e in zip(rows, expected, strict=True):
        assert row["lr_multiplier"] == pytest.approx(e, rel=1e-14)
    r = cli("lr-multiplier", "--format", "csv")
    assert list(_csv(r.out).columns) == ["gamma", "lr_multiplier"]


def test_passk_grid(cli):
    r = cli("passk", "--n", "1024", "--c", "3,10", "--k", "1,256", "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    assert list(df.columns) == ["n", "c", "k", "pass_at_k"]
    assert len(df) == 4
    assert df.pass_at_k[(df.c == 3) & (df.k == 1)].item() == 3 / 1024
    # 1 - C(1021, 256)/C(1024, 256) = 1 - (768*767*766)/(1024*1023*1022)
    ref = 1 - (768 * 767 * 766) / (1024 * 1023 * 1022)
    assert df.pass_at_k[(df.c == 3) & (df.k == 256)].item() == pytest.approx(ref, rel=1e-14)


def test_passk_from_csv(cli, tmp_path):
    src = tmp_path / "counts.csv"
    src.write_text("problem,n,c\nA,1024,3\nB,16,16\nC,8,0\n")
    r = cli("passk", "--from-csv", src, "--k", "1,8", "--format", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert [(x["problem"], x["k"]) for x in rows] == [
        ("A", 1),
        ("A", 8),
        ("B", 1),
        ("B", 8),
        ("C", 1),
        ("C", 8),
    ]
    assert rows[0]["pass_at_k"] == 3 / 1024
    assert rows[2]["pass_at_k"] == 1.0 and rows[5]["pass_at_k"] == 0.0


@pytest.mark.parametrize("command", ["focal", "lr-multiplier", "passk"])
def test_help_has_example_on_one_line(cli, command):
    r = cli(command, "--help")
    assert r.code == 0
    lines = [ln.strip() for ln in r.out.splitlines()]
    example = [ln for ln in lines if ln.startswith(f"fgrpo-theory {command} --")]
    assert example, r.out  # the whole example on one line, nothing before it
    assert "--format" in r.out and "--output" in r.out


def test_focal_rewards_default_and_help_defaults(cli):
    r = cli("focal", "--help")
    flat = " ".join(r.out.split())
    assert "--rewards" in flat and "[default: 1,-1]" in flat and "[default: grpo]" in flat
    assert "--r-correct" not in flat and "--convention" not in flat
    # default rewards 1,-1: a group of 2 with one correct has centred rewards +-1, std 1
    r = cli("focal", "--N", "2", "--gamma", "0", "--rewards", "1,-1", "--format", "csv")
    d = cli("focal", "--N", "2", "--gamma", "0", "--format", "csv")
    assert r.out == d.out and _csv(d.out).adv_pos.tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("focal", "--N", "0"), "--N must be >= 1; got 0"),
        (("focal", "--gamma", "-1"), "--gamma must be >= 0; got -1.0"),
        (("focal", "--gamma", "x"), "--gamma must be a number; got 'x'"),
        (("focal", "--advantage", "ppo"), "--advantage must be one of"),
        (("focal", "--N", "1", "--advantage", "openrlhf"), "--N must be >= 2 for advantage"),
        (("focal", "--rewards", "0,0"), "--rewards (R_c) must be > --rewards (R_w) = 0.0; got 0.0"),
        (("focal", "--rewards", "1"), "--rewards must be two comma-separated numbers"),
        (("focal", "--N", "1..2000000"), "--N must be"),
        (("lr-multiplier", "--gamma", "-0.5"), "--gamma must be >= 0; got -0.5"),
        (("passk", "--n", "10", "--c", "11"), "--c must be <= n = 10; got 11"),
        (("passk", "--n", "10", "--c", "1", "--k", "11"), "--k must be <= n = 10; got 11"),
        (("passk", "--n", "10", "--c", "1", "--k", "0"), "--k must be >= 1; got 0"),
        (("passk", "--c", "1"), "--n must be given unless --from-csv is used"),
        (("passk", "--n", "10"), "--c must be given unless --from-csv is used"),
        (("passk", "--from-csv", "/nonexistent/counts.csv"), "--from-csv must be an existing file"),
        (("passk", "--n", "10", "--format", "xml"), "xml"),
    ],
)
def test_bad_input_one_line_exit_2(cli, args, fragment):
    r = cli(*args)
    assert r.code == 2
    assert r.out == ""
    assert r.err.startswith("Error: ") and r.err.count("\n") == 1
    assert fragment in r.err


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("problem,n\nA,10\n", "a CSV with columns n and c"),
        ("n,c\n10,11\n", "--from-csv column c must be <= n = 10; got 11"),
        ("n,c\n10,2.5\n", "--from-csv column c (row 2 of "),
        ("n,c\n10,2.5\n", ") must be an integer in [0, 2**53]; got '2.5'"),
        ("n,c\n10,\n", "must be an integer in [0, 2**53]; got ''"),
        ("", "a readable CSV file"),
        ("n,c\n", "at least one row"),
    ],
)
def test_passk_bad_csv(cli, tmp_path, content, fragment):
    src = tmp_path / "bad.csv"
    src.write_text(content)
    r = cli("passk", "--from-csv", src)
    assert r.code == 2
    assert r.err.startswith("Error: ") and r.err.count("\n") == 1
    assert fragment in r.err


def test_passk_from_csv_excludes_grid_options(cli, tmp_path):
    src = tmp_path / "counts.csv"
    src.write_text("n,c\n10,1\n")
    r = cli("passk", "--from-csv", src, "--n", "10")
    assert r.code == 2 and "--from-csv must be used without --n and --c" in r.err


def test_passk_from_csv_names_first_bad_row_only(cli, tmp_path):
    # issue 10 item 9: a 1,000-row file with one non-numeric c cell -> one short line
    rows = [f"{1000},{i % 7}" for i in range(1000)]
    rows[637] = "1000,abc"
    src = tmp_path / "big.csv"
    src.write_text("n,c\n" + "\n".join(rows) + "\n")
    r = cli("passk", "--from-csv", src)
    assert r.code == 2 and r.err.count("\n") == 1 and len(r.err) < 200
    assert "row 639" in r.err and "got 'abc'" in r.err


def test_passk_from_stdin(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("n,c\n4,1\n"))
    r = cli("passk", "--from-csv", "-", "--k", "2", "--format", "csv")
    assert r.code == 0, r.err
    assert _csv(r.out).pass_at_k.tolist() == [0.5]


@pytest.mark.parametrize(
    "args",
    [
        ("--n", "9007199254740992", "--c", "4503599627370496", "--k", "4503599627370496"),
        ("--n", "2000000000", "--c", "1000000000", "--k", "1000000000"),
    ],
)
def test_passk_huge_counts_need_no_huge_arrays(cli, args):
    # issue 10 item 5: formerly allocated O(min(c, k)) floats (32 PiB for the first)
    import tracemalloc

    tracemalloc.start()
    r = cli("passk", *args, "--format", "csv")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert r.code == 0, r.err
    assert _csv(r.out).pass_at_k.tolist() == [1.0]
    assert peak < 50_000_000


def test_focal_and_passk_tables_are_what_the_cli_prints(cli):
    from fgrpo_theory.tables import focal_table, passk_table

    r = cli("focal", "--N", "2,5", "--gamma", "0,2", "--advantage", "rloo", "--format", "csv")
    lib = focal_table([2, 5], [0, 2], advantage="rloo")
    pd.testing.assert_frame_equal(lib, _csv(r.out), check_dtype=False)
    # RLOO, X = 1 of 2, rewards 1,-1: A+ = R - mean of the others = 1 - (-1) = 2; g = (1/2)^2
    row = lib[(lib.gamma == 2) & (lib.N == 2) & (lib.X == 1)].iloc[0]
    assert row.g == 0.25 and row.adv_pos == pytest.approx(0.5, rel=1e-15)
    n = pd.Series([4, 1024], index=["p1", "p2"])
    t = passk_table(n, pd.Series([1, 3], index=["p1", "p2"]), 2)
    assert t.index.tolist() == ["p1", "p2"] and t.loc["p1", "pass_at_k"] == 0.5
    with pytest.raises(ValueError, match="^c must be <= n = 4; got 5"):
        passk_table(4, 5, 1)
