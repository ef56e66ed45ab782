"""CLI ``fgrpo-theory simulate``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["simulate", "--K", "6", "--logits", "0.5x1,0.0x5", "--correct", "0", "--steps", "20",
         "--seeds", "3", "--log-every", "10"]  # fmt: skip


def test_help_has_example(cli):
    r = cli("simulate", "--help")
    assert r.code == 0
    assert "Example" in r.out and "--config" in r.out and "--gamma" in r.out


def test_summary_table_csv_json(cli):
    r = cli(*SMALL, "--N", "8", "--gamma", "0,1", "--subset", "top=0", "--pass-k", "1,4")
    assert r.code == 0, r.err
    assert "q_pos" in r.out and "mass_top" in r.out
    r = cli(*SMALL, "--N", "2,8", "--format", "csv")
    df = pd.read_csv(io.StringIO(r.out))
    assert list(df.N) == [2, 8] and (df.runs == 3).all() and (df.step == 20).all()
    assert ((df.q_pos > 0) & (df.q_pos < 1)).all()
    r = cli(*SMALL, "--format", "json")
    rows = json.loads(r.out)
    assert len(rows) == 1 and rows[0]["N"] == 8


def test_summary_matches_library(cli):
    from fgrpo_theory.sim import SimConfig, simulate

    r = cli(*SMALL, "--N", "4", "--algo", "cispo", "--rule", "linear", "--optimizer", "adam",
            "--lr", "0.05", "--format", "csv")  # fmt: skip
    got = pd.read_csv(io.StringIO(r.out))
    cfg = SimConfig(K=6, logits="0.5x1,0.0x5", correct="0", steps=20, seeds=3, log_every=10, N=4,
                    algo="cispo", rule="linear", optimizer="adam", lr=0.05)  # fmt: skip
    df = simulate(cfg)
    assert got.q_pos[0] == pytest.approx(df[df.step == 20].q_pos.mean(), rel=1e-14)


def test_out_file_and_sweep_folder(cli, tmp_path):
    out = tmp_path / "run.parquet"
    r = cli(*SMALL, "--N", "4", "--out", str(out))
    assert r.code == 0, r.err
    assert f"wrote 9 rows to {out}" in r.err
    df = pd.read_parquet(out)
    assert len(df) == 3 * 3 and set(df.step) == {0, 10, 20}
    csv = tmp_path / "run.csv"
    assert cli(*SMALL, "--out", str(csv)).code == 0
    assert len(pd.read_csv(csv)) == 9
    folder = tmp_path / "sweep"
    r = cli(*SMALL, "--N", "2,4", "--gamma", "0,1", "--out", str(folder))
    assert r.code == 0, r.err
    files = sorted(folder.glob("*.parquet"))
    assert len(files) == 4
    stamps = [f.stat().st_mtime_ns for f in files]
    r = cli(*SMALL, "--N", "2,4", "--gamma", "0,1", "--out", str(folder))
    assert r.code == 0 and [f.stat().st_mtime_ns for f in files] == stamps  # resumed


def test_config_file_with_overrides(cli, tmp_path):
    cfg = ROOT / "experiments" / "configs" / "fig2_paper_logprob_adam.toml"
    r = cli("simulate", "--config", str(cfg), "--N", "16", "--gamma", "0", "--steps", "3",
            "--seeds", "1", "--format", "json")  # fmt: skip
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)
    assert (row["K"], row["N"], row["optimizer"], row["rule"]) == (128000, 16, "adam", "logprob")
    assert 0.6 < row["q_pos"] < 0.7 and "mass_rare" in row and "pass_at_256" in row


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--K", "1"], "K must be >= 2; got 1"),
        (["--algo", "ppo"], "algo must be one of grpo, dapo, cispo; got 'ppo'"),
        (["--lr", "0"], "lr must be > 0.0; got 0.0"),
        (["--N", "0"], "--N must be >= 1; got 0"),
        (["--steps", "0"], "steps must be >= 1; got 0"),
        (["--correct", "9"], "correct must be an action index in [0, 5] (K = 6); got 9"),
        (["--subset", "rare=0..99"], "subsets.rare must be an action index in [0, 5]"),
        (["--subset", "rare"], "--subset must be NAME=SPEC such as rare=1..9999; got 'rare'"),
        (["--rule", "exp"], "rule must be one of linear, logprob; got 'exp'"),
        (["--out", "/nonexistent-dir/x.parquet"], "--out must be a path in an existing folder"),
        (["--out", "x.txt"], "--out must be a .parquet or .csv file"),
        (["--config", "/nonexistent.toml"], "config must be an existing TOML file"),
        (["--threads", "0"], "--threads must be >= 1; got 0"),
    ],
)
def test_errors_are_one_line_exit_2(cli, args, message):
    base = ["simulate", "--K", "6", "--steps", "5"]
    if args[0] == "--K":
        base = ["simulate", "--steps", "5"]
    r = cli(*base, *args)
    assert r.code == 2
    assert r.out == ""
    assert r.err.startswith("Error: ") and message in r.err
    assert r.err.count("\n") == 1


def test_unwritable_sweep_folder(cli, tmp_path):
    f = tmp_path / "afile"
    f.write_text("")
    r = cli("simulate", "--K", "6", "--N", "2,4", "--out", str(f))
    assert r.code == 2 and "--out must be a folder (it is a file)" in r.err


def test_repeated_subset_name_and_overflowing_lr_are_user_errors(cli):
    base = ["simulate", "--K", "6", "--N", "4", "--steps", "20", "--seeds", "1"]
    r = cli(*base, "--subset", "a=1", "--subset", "a=2")
    assert r.code == 2 and "--subset must be a NAME given once; got 'a=2'" in r.err
    r = cli(*base, "--optimizer", "adam", "--lr", "1e308")
    assert r.code == 2 and r.err.startswith("Error: lr must be small enough that the logits")
