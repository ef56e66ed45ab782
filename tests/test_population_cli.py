"""CLI command ``population`` (registered in fgrpo_theory/cli/__init__.py)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd


def test_population_preset_out_and_resume(cli, tmp_path):
    out = tmp_path / "p.parquet"
    r = cli("population", "--preset", "quick", "--seeds", "2", "--steps", "20", "--out", out,
            "--format", "csv")  # fmt: skip
    assert r.code == 0, r.err
    summ = pd.read_csv(io.StringIO(r.out))
    assert list(summ["split"]) == ["train", "test"]
    df = pd.read_parquet(out)
    assert set(df["seed_index"]) == {0, 1}
    r2 = cli("population", "--preset", "quick", "--seeds", "2", "--steps", "20", "--out", out,
             "--format", "csv")  # fmt: skip
    assert r2.code == 0 and "reused" in r2.err
    assert r2.out == r.out


def test_population_config_file_and_errors(cli, tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("P = 16\nP_test = 8\nK = 8\nB = 4\nsteps = 5\nseeds = 1\nlr_prompt = 0.05\n")
    assert cli("population", "--config", f, "--format", "json").code == 0
    f.write_text("P = 16\nK = 8\nB = 40\n")
    r = cli("population", "--config", f)
    assert (
        r.code == 2
        and r.err.strip()
        == "Error: B must be <= P = 16 (prompts are drawn without replacement); got 40"
    )
    r = cli("population", "--preset", "quick", "--scheduler", "tcp://x:1")
    assert r.code == 2 and "--scheduler" in r.err
    f.write_text("P = 4\nbogus = 1\n")
    r = cli("population", "--config", f)
    assert r.code == 2 and "bogus" in r.err and "\n" not in r.err.strip()


def test_population_dynamic_sampling_filters(cli, tmp_path):
    """The filter names and --ds-range of simulate; dapo redraws, a wide openrlhf range keeps
    every mixed group like dapo (same numbers), off never redraws."""
    got = {}
    for name, extra in [("dapo", []), ("openrlhf", ["--ds-range", "0,1"]), ("off", [])]:
        out = tmp_path / f"{name}.csv"
        r = cli("population", "--preset", "quick", "--steps", "10", "--seeds", "1",
                "--dynamic-sampling", name, *extra, "--out", out)  # fmt: skip
        assert r.code == 0, r.err
        got[name] = pd.read_csv(out)
        assert set(got[name]["dynamic_sampling"]) == {name}
    train = {k: v[v.split == "train"] for k, v in got.items()}
    assert train["dapo"]["resamples"].sum() > 0 and train["off"]["resamples"].sum() == 0
    assert np.array_equal(train["dapo"]["pass_at_1"], train["openrlhf"]["pass_at_1"])
    r = cli("population", "--preset", "quick", "--dynamic-sampling", "yes")
    assert r.code == 2 and r.err.startswith("Error: --dynamic-sampling must be one of off, dapo")
    r = cli("population", "--preset", "quick", "--ds-range", "0.2,0.8")
    assert r.code == 2 and "--ds-range must be None unless dynamic_sampling" in r.err
