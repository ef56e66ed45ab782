"""CLI ``simulate --thresholds`` and ``simulate --controls`` (issue 11 items 1, 2, 4)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

SMALL = ["simulate", "--K", "50", "--logits", "1.0x5,0.0x45", "--correct", "0..9",
         "--subset", "one=3", "--N", "8", "--steps", "60", "--lr", "0.3"]  # fmt: skip


def test_thresholds_summary_matches_the_library(cli):
    from fgrpo_theory.sim import SimConfig, simulate

    r = cli(*SMALL, "--seeds", "4", "--thresholds", "0.5,0.9999", "--format", "csv")
    assert r.code == 0, r.err
    got = pd.read_csv(io.StringIO(r.out))
    assert list(got["threshold"]) == [0.5, 0.9999]
    cfg = SimConfig(K=50, logits="1.0x5,0.0x45", correct="0..9", subsets={"one": "3"}, N=8,
                    steps=60, lr=0.3, seeds=4, thresholds=(0.5, 0.9999))  # fmt: skip
    thr = simulate(cfg, tables=True).thresholds
    hit = thr[(thr["threshold"] == 0.5) & thr["reached"]]
    assert got["reached"][0] == len(hit) > 0
    assert got["m_ret"][0] == pytest.approx(hit["m_ret"].median(), rel=1e-14)
    assert got["step"][0] == hit["step"].median()
    assert got["reached"][1] == 0 and pd.isna(got["m_ret"][1])  # empty in CSV, never imputed
    rows = json.loads(cli(*SMALL, "--thresholds", "0.9999", "--format", "json").out)
    assert rows[0]["m_ret"] is None and rows[0]["reached"] == 0


def test_thresholds_out_writes_log_and_table(cli, tmp_path):
    out = tmp_path / "run.parquet"
    r = cli(*SMALL, "--seeds", "2", "--thresholds", "0.5", "--log-every", "30", "--out", out)
    assert r.code == 0, r.err
    assert len(pd.read_parquet(out)) == 2 * 3
    thr = pd.read_parquet(tmp_path / "run.thresholds.parquet")
    assert len(thr) == 2 and {"reached", "step", "m_ret", "nll_rise_one"} <= set(thr.columns)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--thresholds", "0.5,1"], "thresholds must be in (0, 1); got 1"),
        (["--thresholds", "0"], "thresholds must be in (0, 1); got 0"),
        (["--thresholds", "0.5", "--gamma", "0,1"], "--thresholds must be used with a single"),
    ],
)
def test_threshold_errors_are_one_line_exit_2(cli, args, message):
    r = cli(*SMALL, *args)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("Error: ") and message in r.err
    assert r.err.count("\n") == 1
