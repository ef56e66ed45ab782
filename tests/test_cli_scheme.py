"""CLI command ``scheme`` (section 15 closed forms) and ``scheme list`` (the registry)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest


def _csv(out: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(out))


def test_maxrl_csv_prints_H_F_and_section_15_weights(cli):
    r = cli("scheme", "--scheme", "maxrl", "--N", "8", "--mu", "0.3", "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    assert list(df.columns) == ["scheme", "N", "mu", "H", "F"] + [f"c_{k}" for k in range(1, 9)]
    row = df.iloc[0]
    # H = sum_{k<8} (1 - mu)^(k-1), F = sum_{k<8} pass@k / k (hand sums)
    assert row.H == pytest.approx(sum(0.7 ** (k - 1) for k in range(1, 8)), rel=1e-13)
    assert row.F == pytest.approx(sum((1 - 0.7**k) / k for k in range(1, 8)), rel=1e-13)
    for k in range(1, 8):
        assert row[f"c_{k}"] == pytest.approx(1 / k, rel=1e-13)
    assert row.c_8 == 0


def test_grpo_json_and_rows_per_mu(cli):
    r = cli("scheme", "--scheme", "grpo", "--N", "8", "--mu", "0.1,0.5", "--format", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert [x["mu"] for x in rows] == [0.1, 0.5]
    ref = [2.646, -1.875, 2.058, -1.279, 0.644, -0.132, 0.038, 0]
    for x in rows:
        assert [round(x[f"c_{k}"], 3) for k in range(1, 9)] == ref
    # H is the same polynomial in the pass@k basis: sum_k c_k k (1 - mu)^(k-1)
    for x in rows:
        h = sum(x[f"c_{k}"] * k * (1 - x["mu"]) ** (k - 1) for k in range(1, 9))
        assert x["H"] == pytest.approx(h, rel=1e-12)


def test_dr_grpo_with_plus_minus_one_rewards(cli):
    r = cli("scheme", "--scheme", "dr-grpo", "--N", "4", "--mu", "0.2", "--rewards", "1,-1")
    assert r.code == 0, r.err
    row = _csv(r.out).iloc[0]
    assert row.H == pytest.approx(2 * (1 - 1 / 4), rel=1e-14)
    assert row.c_1 == pytest.approx(1.5, rel=1e-14) and row.c_2 == 0


def test_scheme_list_shows_every_entry_with_its_paper(cli):
    from fgrpo_theory.schemes import SCHEMES

    r = cli("scheme", "list", "--format", "csv")
    assert r.code == 0, r.err
    df = _csv(r.out)
    assert list(df["name"]) == list(SCHEMES)
    assert df["paper"].notna().all()
    focal = df[df.name == "focal"].iloc[0]
    assert focal.role == "modifier" and focal.parameters == "gamma=1 (a number >= 0)"
    pkpo = df[df.name == "pkpo"].iloc[0]
    assert "k=4 (an integer >= 1)" in pkpo.parameters and "2505.15201" in pkpo.paper


@pytest.mark.parametrize(
    "args, message",
    [
        (["--scheme", "nope"], "--scheme must be one of grpo"),
        (["--scheme", "maxrl:k=2"], "--scheme maxrl must be a parameter of maxrl (none); got 'k'"),
        (["--scheme", "focal:gamma=-1"], "--scheme focal:gamma must be a number >= 0; got '-1'"),
        (["--scheme", "pkpo:k=9"], "--scheme pkpo:k must be <= N = 8; got 9"),
        (["--scheme", "trl-batch"], "--scheme must be a binary group scheme"),
        (["--scheme", "maxrl+grpo"], "two schemes where one is allowed"),
        (["--N", "44"], "--N must be small enough for trustworthy pass@k weights"),
        (["--N", "0"], "--N must be >= 1; got 0"),
        (["--mu", "1.5"], "--mu must be in [0, 1]; got 1.5"),
        (["--rewards", "0,1"], "--rewards"),
        (["lst"], "scheme must be 'list'"),
    ],
)
def test_errors_are_one_line_naming_the_option(cli, args, message):
    r = cli("scheme", *args, "--format", "csv")
    assert r.code == 2
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert message in lines[0], lines[0]
