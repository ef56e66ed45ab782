"""The ``mass`` command: default paper policy, small policies, formats, files, bad input."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

SMALL = ["--correct", "2.0x1,1.0x3", "--incorrect", "0.0x4", "--N", "4", "--eta", "0.5"]


def _csv(out: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(out))


def _value(df: pd.DataFrame, scope: str, quantity: str, method: str | None = None) -> float:
    rows = df[(df.scope == scope) & (df.quantity == quantity)]
    if method is not None:
        rows = rows[rows.method == method]
    assert len(rows) == 1, (scope, quantity, method)
    return float(rows.value.iloc[0])


def test_default_run_on_paper_policy(cli):
    r = cli("mass", "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    assert list(df.columns) == ["scope", "quantity", "value", "stderr", "method", "n"]
    assert _value(df, "policy", "K") == 128_000 and _value(df, "policy", "n_correct") == 10_000
    assert _value(df, "policy", "mu") == pytest.approx(0.63, abs=1e-3)
    assert _value(df, "group", "N") == 8
    # The group decomposition adds up and first order is close to exact.
    parts = sum(
        _value(df, "group", q)
        for q in ("dq_pos_sampled_correct", "dq_pos_sampled_incorrect", "dq_pos_unsampled")
    )
    assert parts == pytest.approx(_value(df, "group", "dq_pos_first_order"), rel=1e-12)
    drift = _value(df, "group", "direct_drift") + _value(df, "group", "coupling")
    first_u = _value(df, "group", "dq_unsampled_correct_first_order")
    assert drift == pytest.approx(first_u, rel=1e-12)
    assert _value(df, "group", "dq_unsampled_correct_exact") == pytest.approx(first_u, rel=1e-6)
    assert set(df[df.scope == "group"].method) == {"statistic", "P-17", "P-10", "exact"}
    mc = df[(df.scope == "expected") & (df.method == "monte-carlo")]
    assert len(mc) > 5 and (mc.n == 10_000).all() and (mc.stderr > 0).any()
    # Monte Carlo E[U2] agrees with the closed form.
    u2_mc = mc[mc.quantity == "U2"]
    u2 = _value(df, "expected", "U2", "closed form")
    assert abs(float(u2_mc.value.iloc[0]) - u2) <= 4.5 * float(u2_mc.stderr.iloc[0])


def test_default_table_and_json(cli):
    r = cli("mass")
    assert r.code == 0 and "dq_unsampled_correct_exact" in r.out and "monte-carlo" in r.out
    r = cli("mass", "--format", "json", "--samples", "200")
    assert r.code == 0
    records = json.loads(r.out)
    assert {rec["quantity"] for rec in records} >= {"dq_pos_exact", "coupling", "U2"}


@pytest.mark.parametrize("rule", ["theory", "paper-sim", "logprob"])
def test_small_policy_enumerates(cli, rule):
    r = cli("mass", *SMALL, "--rule", rule, "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    exp = df[(df.scope == "expected") & (df.method == "enumeration")]
    assert len(exp) > 5 and (exp.n == 330).all() and (exp.stderr == 0).all()
    first = "P-17" if rule == "theory" else "P-19"
    assert first in set(df.method)
    if rule == "logprob":  # section 6 closed form equals the enumerated first-order drift
        closed = _value(df, "expected", "dq_pos_first_order", "section 6")
        enum = _value(df, "expected", "dq_pos_first_order", "enumeration")
        assert closed == pytest.approx(enum, rel=1e-10)
        assert _value(df, "expected", "direct_drift", "enumeration") == 0.0


def test_given_group_and_monte_carlo_option(cli):
    r = cli("mass", *SMALL[:-4], "--group", "0x3,5", "--method", "monte-carlo", "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    assert _value(df, "group", "N") == 4 and _value(df, "group", "X") == 3
    assert _value(df, "group", "n_distinct") == 2
    assert (df[df.scope == "expected"].method.isin(["monte-carlo", "closed form"])).all()


def test_same_seed_same_output_and_gamma(cli):
    a = cli("mass", *SMALL, "--rule", "paper-sim", "--gamma", "1", "--seed", "3", "--format", "csv")
    b = cli("mass", *SMALL, "--rule", "paper-sim", "--gamma", "1", "--seed", "3", "--format", "csv")
    assert a.code == 0 and a.out == b.out
    df = _csv(a.out)
    x, n = _value(df, "group", "X"), _value(df, "group", "N")
    assert _value(df, "group", "g") == pytest.approx(1 - x / n)


def test_logits_file_and_output(cli, tmp_path):
    z = np.array([2.0, 1.0, 1.0, 0.0, 0.0])
    np.save(tmp_path / "z.npy", z)
    (tmp_path / "mask.csv").write_text("1,1,1,0,0\n")
    out = tmp_path / "res.csv"
    r = cli(
        "mass",
        "--logits",
        tmp_path / "z.npy",
        "--correct-mask",
        tmp_path / "mask.csv",
        "--N",
        "3",
        "--output",
        out,
    )
    assert r.code == 0, r.err
    assert r.out == "" and "wrote" in r.err
    df = pd.read_csv(out)
    mu = np.exp(z)[:3].sum() / np.exp(z).sum()
    assert _value(df, "policy", "mu") == pytest.approx(mu, rel=1e-14)
    r = cli("mass", "--logits", tmp_path / "z.npy", "--n-correct", "2", "--N", "2")
    assert r.code == 0, r.err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--correct", "1.0x-3"], "--correct must"),
        (["--correct", "1.0x0"], "'1.0x0'"),
        (["--incorrect", "0.0x-1"], "--incorrect must"),
        (["--correct", ""], "--correct must be non-empty"),
        (["--correct", "nanx2"], "'nanx2'"),
        (["--incorrect", "1.0,nan"], "'nan'"),
        (["--N", "0"], "--N must be >= 1; got 0"),
        (["--N", "-3"], "--N must be >= 1; got -3"),
        (["--eta", "0"], "--eta must be > 0.0; got 0.0"),
        (["--eta", "-0.1"], "--eta must be > 0.0; got -0.1"),
        (["--eta", "nan"], "--eta must be a finite number; got nan"),
        (["--rewards", "0,1"], "--rewards must be two numbers R_c,R_w with R_c > R_w; got '0,1'"),
        (["--rewards", "1,1"], "got '1,1'"),
        (["--rewards", "1"], "got '1'"),
        (["--gamma", "-1"], "--gamma must be >= 0.0; got -1.0"),
        (["--samples", "1"], "--samples must be >= 2; got 1"),
        (["--convention", "trl"], "--convention must be left out for --rule theory"),
        (["--rule", "logprob", "--convention", "nope"], "convention must be one of"),
        (["--rule", "ppo"], "ppo"),
        (["--group", "0x2,999999"], "--group must be an item whose action is in"),
        (["--group", "0x2", "--N", "3"], "--N must be equal to the size of --group (2)"),
        (["--group", "0x0"], "--group must be ACTIONxCOUNT with COUNT >= 1; got '0x0'"),
        (["--n-correct", "2"], "--n-correct must be used only together with --logits"),
        (["--method", "enumerate"], "--method must be used with at most 5000000 group outcomes"),
    ],
)
def test_bad_input_one_line_exit_2(cli, args, fragment):
    extra = ["--seed", "0"] if "--samples" in args else ["--samples", "5"]
    r = cli("mass", *args, *extra)
    assert r.code == 2, (args, r.out)
    assert r.err.startswith("Error: ") and r.err.count("\n") == 1, r.err
    assert fragment in r.err, r.err


def test_bad_files(cli, tmp_path):
    np.save(tmp_path / "z.npy", np.array([1.0, np.nan]))
    np.save(tmp_path / "ok.npy", np.array([1.0, 0.0]))
    np.save(tmp_path / "none.npy", np.array([False, False]))
    cases = [
        (["--logits", tmp_path / "z.npy", "--n-correct", "1"], "--logits must be a finite"),
        (["--logits", tmp_path / "ok.npy", "--n-correct", "0"], "--n-correct must be >= 1; got 0"),
        (
            ["--logits", tmp_path / "ok.npy", "--correct-mask", tmp_path / "none.npy"],
            "--correct-mask must be a mask with at least one correct action",
        ),
        (["--logits", tmp_path / "ok.npy", "--correct", "1x2"], "--correct must be left out"),
        (
            ["--logits", tmp_path / "missing.npy", "--n-correct", "1"],
            "--logits must be an existing file",
        ),
    ]
    for args, fragment in cases:
        r = cli("mass", *args, "--samples", "5")
        assert r.code == 2 and r.err.count("\n") == 1 and fragment in r.err, (args, r.err)


def test_help_has_example(cli):
    r = cli("mass", "--help")
    assert r.code == 0 and "Example: fgrpo-theory mass" in r.out
