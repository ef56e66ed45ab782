"""The ``mass`` command: default paper policy, small policies, formats, files, bad input."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

SMALL = ["--logits", "2.0x1,1.0x3,0.0x4", "--correct", "0..3", "--N", "4", "--lr", "0.5"]


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


@pytest.mark.parametrize("rule", ["theory", "linear", "logprob"])
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
    a = cli("mass", *SMALL, "--rule", "linear", "--gamma", "1", "--seed", "3", "--format", "csv")
    b = cli("mass", *SMALL, "--rule", "linear", "--gamma", "1", "--seed", "3", "--format", "csv")
    assert a.code == 0 and a.out == b.out
    df = _csv(a.out)
    x, n = _value(df, "group", "X"), _value(df, "group", "N")
    assert _value(df, "group", "g") == pytest.approx(1 - x / n)


def test_logits_file_and_output(cli, tmp_path):
    z = np.array([2.0, 1.0, 1.0, 0.0, 0.0])
    np.save(tmp_path / "z.npy", z)
    out = tmp_path / "res.csv"
    r = cli(
        "mass", "--logits", tmp_path / "z.npy", "--correct", "0..2", "--N", "3", "--output", out
    )
    assert r.code == 0, r.err
    assert r.out == "" and "wrote" in r.err
    df = pd.read_csv(out)
    mu = np.exp(z)[:3].sum() / np.exp(z).sum()
    assert _value(df, "policy", "mu") == pytest.approx(mu, rel=1e-14)
    # an index set in any order and with single indices: actions 0 and 4 correct
    r = cli(
        "mass", "--logits", tmp_path / "z.npy", "--correct", "4,0", "--N", "2", "--format", "csv"
    )
    assert r.code == 0, r.err
    df = _csv(r.out)
    mu = (np.exp(z[0]) + np.exp(z[4])) / np.exp(z).sum()
    assert _value(df, "policy", "mu") == pytest.approx(mu, rel=1e-14)
    assert _value(df, "policy", "n_correct") == 2


def test_rewards_and_advantage_options(cli):
    # LLM encoding R_w = 0: S_R = P_pos for the given group (hand-computed from the softmax)
    r = cli("mass", *SMALL[:-4], "--rewards", "1,0", "--group", "0,5", "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    p = np.exp([2.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    p /= p.sum()
    assert _value(df, "group", "S_R") == pytest.approx(p[0], rel=1e-14)
    # linear defaults to dr-grpo (A = R - mean R): the same numbers as naming it
    a = cli("mass", *SMALL, "--rule", "linear", "--format", "csv")
    b = cli("mass", *SMALL, "--rule", "linear", "--advantage", "dr-grpo", "--format", "csv")
    assert a.code == 0 and a.out == b.out


def test_help_shows_every_default(cli):
    r = cli("mass", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    for token in ("5.0x1,3.0x9999,0.0x118000", "0..9999", "1,-1", "0.01", "theory", "auto"):
        assert token in text, token
    for option in ("--logits", "--correct", "--lr", "--rewards", "--advantage", "--N"):
        assert option in text, option
    assert "Example: fgrpo-theory mass" in r.out


@pytest.mark.parametrize(
    "old", ["--eta", "--convention", "--incorrect", "--correct-mask", "--n-correct"]
)
def test_old_options_are_gone(cli, old):
    r = cli("mass", old, "1")
    assert r.code == 2 and "No such option" in r.err, r.err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--logits", "1.0x-3"], "--logits must"),
        (["--logits", ""], "--logits must"),
        (["--logits", "nanx2"], "--logits must"),
        (["--correct", "5..3"], "--correct must"),
        (["--correct", "0..200000"], "--correct must"),
        (["--correct", "-1"], "--correct must"),
        (["--N", "0"], "--N must be >= 1; got 0"),
        (["--N", "-3"], "--N must be >= 1; got -3"),
        (["--lr", "0"], "--lr must be > 0.0; got 0.0"),
        (["--lr", "-0.1"], "--lr must be > 0.0; got -0.1"),
        (["--lr", "nan"], "--lr must be a finite number; got nan"),
        (["--rewards", "0,1"], "--rewards R_c must be > r_incorrect = 1.0; got 0.0"),
        (["--rewards", "1,1"], "--rewards R_c must be > r_incorrect = 1.0; got 1.0"),
        (["--rewards", "1"], "--rewards must"),
        (["--gamma", "-1"], "--gamma must be >= 0.0; got -1.0"),
        (["--samples", "1"], "--samples must be >= 2; got 1"),
        (["--seed", "-1"], "--seed must be >= 0; got -1"),
        (["--advantage", "trl"], "--advantage must be None for rule 'theory'"),
        (["--rule", "logprob", "--advantage", "nope"], "--advantage must be one of"),
        (["--rule", "paper-sim"], "paper-sim"),
        (["--group", "0x2,999999"], "--group must"),
        (["--group", "0x2", "--N", "3"], "--N must be equal to the size of group (2)"),
        (["--group", "0x0"], "--group must"),
        (["--method", "enumerate"], "--method must be used with at most 5000000 outcomes"),
        # issue 10 item 5: refused before allocating or looping, naming the option and the bound
        (["--N", "1000000000"], "--N must be <= 1048576; got 1000000000"),
        (["--N", "2000000"], "--N must be <= 1048576; got 2000000"),
    ],
)
def test_bad_input_one_line_exit_2(cli, args, fragment):
    extra = [] if {"--samples", "--seed"} & set(args) else ["--samples", "5"]
    r = cli("mass", *args, *extra)
    assert r.code == 2, (args, r.out)
    assert r.err.startswith("Error: ") and r.err.count("\n") == 1, r.err
    assert fragment in r.err, r.err


def test_monte_carlo_work_is_bounded_before_it_starts(cli):
    # issue 10 item 5: 2**53 Monte Carlo groups used to loop for ever
    r = cli("mass", "--samples", "9007199254740992", "--method", "monte-carlo")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert "--samples must be <= 268435456 for N = 8" in r.err and "2**31" in r.err
    # the bound scales with N: 2**31 // 131072 = 16384 groups of the paper's largest N
    r = cli("mass", "--N", "131072", "--samples", "16385", "--method", "monte-carlo")
    assert r.code == 2 and "--samples must be <= 16384 for N = 131072" in r.err, r.err


def test_bad_files(cli, tmp_path):
    np.save(tmp_path / "z.npy", np.array([1.0, np.nan]))
    np.save(tmp_path / "ok.npy", np.array([1.0, 0.0]))
    cases = [
        (["--logits", tmp_path / "z.npy", "--correct", "0"], "--logits must"),
        (["--logits", tmp_path / "ok.npy", "--correct", "2"], "--correct must"),
        (["--logits", tmp_path / "missing.npy", "--correct", "0"], "--logits must"),
    ]
    for args, fragment in cases:
        r = cli("mass", *args, "--samples", "5")
        assert r.code == 2 and r.err.count("\n") == 1 and fragment in r.err, (args, r.err)
