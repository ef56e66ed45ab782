"""CLI commands ``miss-prob`` and ``peak``: output formats, values, errors, import hygiene."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

MISS_COLUMNS = [
    "N",
    "mu",
    "tau",
    "rho",
    "p_active",
    "p_tail_miss",
    "p_tail_miss_given_active",
    "p_hit",
]
PEAK_COLUMNS = ["mu", "tau", "rho", "n_star", "n_star_continuous", "p_peak"]


def _csv(r) -> pd.DataFrame:
    assert r.code == 0, r.err
    return pd.read_csv(io.StringIO(r.out))


def test_miss_prob_csv_columns_rows_and_hand_values(cli):
    df = _csv(cli("miss-prob", "--N", "1..3", "--mu", "0.5", "--rho", "0.5", "--format", "csv"))
    assert list(df.columns) == MISS_COLUMNS
    assert df["N"].tolist() == [1, 2, 3]
    assert (df["tau"] == 0.25).all() and (df["rho"] == 0.5).all()
    # hand-computed: a = 0.75, b = 0.25, c = 0.5
    np.testing.assert_allclose(df["p_tail_miss"], [0.0, 0.25, 18 / 64], rtol=1e-15)
    np.testing.assert_allclose(df["p_active"], [0.0, 0.5, 0.75], rtol=1e-15)
    np.testing.assert_allclose(df["p_hit"], [0.25, 1 - 0.75**2, 1 - 0.75**3], rtol=1e-15)
    # Pr(B | A_N) = Pr(B) / Pr(A_N): 0.25 / 0.5 and (18/64) / 0.75; 0 at N = 1 (no active group)
    np.testing.assert_allclose(df["p_tail_miss_given_active"], [0.0, 0.5, 0.375], rtol=1e-14)


def test_miss_prob_lists_give_one_row_per_mu_tau_N(cli):
    args = ["--N", "4..64:x2", "--mu", "0.2,0.5,0.8", "--rho", "0.05,0.1", "--format", "csv"]
    df = _csv(cli("miss-prob", *args))
    assert len(df) == 5 * 3 * 2
    assert df.groupby(["mu", "rho"]).size().eq(5).all()
    assert df["mu"].unique().tolist() == [0.2, 0.5, 0.8]  # mu order kept, outermost
    row = df[(df["mu"] == 0.8) & (df["rho"] == 0.1) & (df["N"] == 16)].iloc[0]
    a, b, c = 1 - 0.08, 0.8 - 0.08, 0.2
    assert row["tau"] == pytest.approx(0.08, rel=1e-15)
    assert row["p_tail_miss"] == pytest.approx(a**16 - b**16 - c**16, rel=1e-12)


def test_miss_prob_with_tau(cli):
    df = _csv(cli("miss-prob", "--N", "8", "--mu", "0.3,0.6", "--tau", "0.015", "--format", "csv"))
    assert list(df.columns) == MISS_COLUMNS
    assert (df["tau"] == 0.015).all()
    np.testing.assert_allclose(df["rho"], [0.05, 0.025], rtol=1e-15)
    assert df["p_tail_miss"].iloc[0] == pytest.approx(0.985**8 - 0.285**8 - 0.7**8, rel=1e-12)


def test_miss_prob_json_and_table(cli):
    r = cli("miss-prob", "--N", "2,4", "--mu", "0.3", "--rho", "0.1", "--format", "json")
    assert r.code == 0
    records = json.loads(r.out)
    assert len(records) == 2 and list(records[0]) == MISS_COLUMNS
    assert records[0]["N"] == 2 and isinstance(records[0]["N"], int)
    r = cli("miss-prob", "--N", "4..64", "--mu", "0.3", "--rho", "0.05")
    assert r.code == 0
    for col in MISS_COLUMNS:
        assert col in r.out


def test_miss_prob_output_file(cli, tmp_path):
    out = tmp_path / "miss.csv"
    r = cli("miss-prob", "--N", "1..8", "--mu", "0.3", "--rho", "0.05", "--output", out)
    assert r.code == 0 and r.out == ""
    assert "wrote 8 rows" in r.err
    assert list(pd.read_csv(out).columns) == MISS_COLUMNS
    out_json = tmp_path / "miss.json"
    r = cli("miss-prob", "--N", "1..8", "--mu", "0.3", "--rho", "0.05", "--format", "json",
            "--output", out_json)  # fmt: skip
    assert r.code == 0 and len(json.loads(out_json.read_text())) == 8


def test_miss_prob_plot_png(cli, tmp_path):
    png = tmp_path / "fig1a.png"
    r = cli("miss-prob", "--N", "1..128", "--mu", "0.3", "--rho", "0.05,0.1,0.2", "--format", "csv",
            "--plot", png)  # fmt: skip
    assert r.code == 0, r.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(_csv(r)) == 3 * 128


def test_peak_csv_matches_brute_force(cli):
    df = _csv(cli("peak", "--mu", "0.3,0.8", "--rho", "0.05,0.1,0.2", "--format", "csv"))
    assert list(df.columns) == PEAK_COLUMNS
    assert len(df) == 6
    N = np.arange(1, 500, dtype=float)
    for row in df.itertuples():
        direct = (1 - row.tau) ** N - (row.mu - row.tau) ** N - (1 - row.mu) ** N
        assert row.n_star == int(N[np.argmax(direct)])
        assert row.p_peak == pytest.approx(direct.max(), rel=1e-12)
        assert np.floor(row.n_star_continuous) <= row.n_star <= np.ceil(row.n_star_continuous)


def test_peak_tau_json_and_table(cli):
    r = cli("peak", "--mu", "0.999999999999", "--tau", "1e-12", "--format", "json")
    assert r.code == 0
    (rec,) = json.loads(r.out)
    assert list(rec) == PEAK_COLUMNS
    assert isinstance(rec["n_star"], int) and 6.9e11 < rec["n_star"] < 7.0e11
    r = cli("peak", "--mu", "0.3", "--rho", "0.05")
    assert r.code == 0 and "n_star" in r.out


@pytest.mark.parametrize("command", ["miss-prob", "peak"])
def test_help_has_example(cli, command):
    r = cli(command, "--help")
    assert r.code == 0
    assert "Example" in r.out and f"fgrpo-theory {command} --" in r.out
    for opt in ["--mu", "--rho", "--tau", "--format", "--output"]:
        assert opt in r.out


BASE = ["--mu", "0.3", "--rho", "0.05"]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["miss-prob", "--N", "64..4", *BASE], ["--N", "64..4"]),
        (["miss-prob", "--N", "0..8", *BASE], ["--N", ">= 1", "got 0"]),
        (["miss-prob", "--N", "1..1e9", *BASE], ["--N", "1..1e9"]),
        (["miss-prob", "--N", "abc", *BASE], ["--N", "'abc'"]),
        (["miss-prob", "--N", "", *BASE], ["--N", "non-empty"]),
        (["miss-prob", "--N", "8", "--mu", "1.5", "--rho", "0.05"], ["--mu", "(0, 1)", "1.5"]),
        (["miss-prob", "--N", "8", "--mu", "", "--rho", "0.05"], ["--mu", "non-empty"]),
        (["miss-prob", "--N", "8", "--mu", "0.3", "--rho", "0"], ["--rho", "(0, 1)", "got 0.0"]),
        (["miss-prob", "--N", "8", "--mu", "0.3", "--rho", "1"], ["--rho", "got 1.0"]),
        (["miss-prob", "--N", "8", "--mu", "0.3", "--rho", ","], ["--rho", "non-empty"]),
        (["miss-prob", "--N", "8", "--mu", "0.3", "--tau", "0.4"], ["--tau", "< --mu", "0.4"]),
        (["miss-prob", "--N", "8", "--mu", "0.2,0.5", "--tau", "0.3"], ["--tau", "0.2", "0.3"]),
        (["miss-prob", "--N", "8", "--mu", "0.3"], ["--rho/--tau", "neither"]),
        (["miss-prob", "--N", "8", *BASE, "--tau", "0.01"], ["--rho/--tau", "both"]),
        (["miss-prob", "--N", "8", *BASE, "--format", "xml"], ["--format", "xml"]),
        (["miss-prob", "--N", "8", *BASE, "--output", "/no/such/dir/x.csv"], ["--output", "/no/"]),
        (["miss-prob", "--N", "8", *BASE, "--plot", "/no/such/dir/x.png"], ["--plot", "/no/"]),
        (["miss-prob", "--N", "8", *BASE, "--plot", "fig.jpg"], ["--plot", ".png or .pdf"]),
        (["miss-prob", "--N", "1..1000000", "--mu", "0.3", "--rho", "0.1,0.2"], ["--N"]),
        (["peak", "--mu", "1.5", "--rho", "0.05"], ["--mu", "1.5"]),
        (["peak", "--mu", "0.3", "--rho", "0"], ["--rho", "got 0.0"]),
        (["peak", "--mu", "0.3", "--tau", "0.5"], ["--tau", "< --mu", "0.5"]),
        (["peak", "--mu", "0.3"], ["--rho/--tau", "neither"]),
        (["peak", "--mu", "0.3", "--rho", "x"], ["--rho", "'x'"]),
        (["peak", *BASE, "--output", "/no/such/dir/p.csv"], ["--output", "/no/"]),
    ],
)
def test_bad_input_one_line_exit_2(cli, args, fragments):
    r = cli(*args)
    assert r.code == 2
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "Traceback" not in r.err
    for frag in fragments:
        assert frag in lines[0]


def test_fast_path_imports_neither_numba_nor_matplotlib():
    code = (
        "import sys\n"
        "import fgrpo_theory\n"
        "import fgrpo_theory.cli as c\n"
        "assert 'numba' not in sys.modules, 'numba imported by fgrpo_theory.cli'\n"
        "rc = c.main(['miss-prob', '--N', '4..64', '--mu', '0.3', '--rho', '0.05',"
        " '--format', 'csv'])\n"
        "assert rc == 0\n"
        "bad = [m for m in ('numba', 'matplotlib') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(
        "N,mu,tau,rho,p_active,p_tail_miss,p_tail_miss_given_active,p_hit\n"
    )
    assert len(proc.stdout.strip().splitlines()) == 1 + 61


def test_peak_with_rho_names_rho_not_tau(cli):
    # issue 10 item 7: `peak --mu 1e-300 --rho 0.5` talked about tau
    r = cli("peak", "--mu", "1e-300", "--rho", "0.5")
    assert r.code == 2 and r.err.count("\n") == 1
    assert r.err.startswith("Error: --rho must be") and r.err.rstrip().endswith("got 0.5")


def test_tables_match_cli_and_keep_a_series_index(cli):
    from fgrpo_theory.tables import peak_table, tail_miss_table

    df = _csv(cli("miss-prob", "--N", "1..4", "--mu", "0.2,0.5", "--rho", "0.1", "--format", "csv"))
    lib = tail_miss_table(list(range(1, 5)), [0.2, 0.5], rho=0.1)
    assert list(lib.columns) == MISS_COLUMNS
    pd.testing.assert_frame_equal(lib.reset_index(drop=True), df, check_dtype=False)
    # a Series broadcasts element by element and keeps its index
    mu = pd.Series([0.3, 0.6], index=["easy", "hard"])
    t = tail_miss_table(8, mu, tau=pd.Series([0.015, 0.03], index=["easy", "hard"]))
    assert t.index.tolist() == ["easy", "hard"] and t["N"].tolist() == [8, 8]
    # hand value: (1-tau)^N - (mu-tau)^N - (1-mu)^N
    assert t.loc["easy", "p_tail_miss"] == pytest.approx(0.985**8 - 0.285**8 - 0.7**8, rel=1e-14)
    p = peak_table(mu, rho=0.05)
    assert p.index.tolist() == ["easy", "hard"] and list(p.columns) == PEAK_COLUMNS
    assert p.loc["easy", "n_star"] == 9  # paper Fig. 3 / peak_group_size docstring
    with pytest.raises(ValueError, match="^rho must be in"):
        tail_miss_table(4, 0.3, rho=1.5)
