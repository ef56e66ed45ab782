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
    out = tmp_path / "fill.csv"
    r = cli("population", "--preset", "quick", "--steps", "10", "--seeds", "1",
            "--dynamic-sampling", "dapo", "--ds-fill", "next-prompt", "--out", out)  # fmt: skip
    assert r.code == 0, r.err
    fill = pd.read_csv(out)
    assert set(fill["ds_fill"]) == {"next-prompt"}
    tr = fill[(fill.split == "train") & (fill.bucket == "all") & (fill.step > 0)]
    assert (tr["groups"] == 8 * 10 + tr["resamples"]).all() and tr["resamples"].sum() > 0
    r = cli("population", "--preset", "quick", "--ds-fill", "next-prompt")
    assert r.code == 2 and r.err.startswith("Error: --ds-fill must be 'redraw' unless")
    train = {k: v[v.split == "train"] for k, v in got.items()}
    assert train["dapo"]["resamples"].sum() > 0 and train["off"]["resamples"].sum() == 0
    assert np.array_equal(train["dapo"]["pass_at_1"], train["openrlhf"]["pass_at_1"])
    r = cli("population", "--preset", "quick", "--dynamic-sampling", "yes")
    assert r.code == 2 and r.err.startswith("Error: --dynamic-sampling must be one of off, dapo")
    r = cli("population", "--preset", "quick", "--ds-range", "0.2,0.8")
    assert r.code == 2 and "--ds-range must be None unless --dynamic-sampling" in r.err


def test_population_algorithm_options(cli, tmp_path):
    """--algo / --inner-updates / --clip-low / --clip-high / --dual-clip as simulate has them:
    they reach the config (columns, changed numbers) and bad values get simulate's one line."""
    base = ["population", "--preset", "quick", "--steps", "6", "--seeds", "1"]
    got = {}
    for name, extra in [
        ("one", []),
        ("cispo", ["--algo", "cispo", "--inner-updates", "3", "--clip-low", "0.1"]),
        ("dual", ["--inner-updates", "3", "--clip-high", "0.5", "--dual-clip", "1.5"]),
        ("dual-off", ["--inner-updates", "3", "--clip-high", "0.5", "--dual-clip", "off"]),
    ]:
        out = tmp_path / f"{name}.csv"
        r = cli(*base, *extra, "--out", out)
        assert r.code == 0, r.err
        got[name] = pd.read_csv(out)
    assert set(got["cispo"]["algo"]) == {"cispo"} and set(got["cispo"]["inner_updates"]) == {3}
    assert not np.array_equal(got["one"]["pass_at_1"], got["cispo"]["pass_at_1"])
    assert set(got["one"]["inner_updates"]) == {1}
    assert set(got["dual"]["config_hash"]) != set(got["dual-off"]["config_hash"])
    for args, msg in [
        (["--inner-updates", "0"], "Error: --inner-updates must be >= 1; got 0"),
        (["--clip-low", "2"], "Error: --clip-low must be in [0.0, 1.0]; got 2.0"),
        (["--dual-clip", "1,2"], "Error: --dual-clip must be one number c > 1 (e.g. 3) or off"),
        (["--algo", "cispo", "--dual-clip", "3"], "Error: --dual-clip must be None for algo"),
        (["--algo", "ppo"], "Error: --algo must be one of grpo, dapo, cispo; got 'ppo'"),
    ]:
        r = cli(*base, *args)
        assert r.code == 2 and r.err.startswith(msg) and "\n" not in r.err.strip(), r.err


def test_population_seeds_option_sweeps_draws(cli):
    r = cli("population", "--preset", "quick", "--seeds", "1", "--steps", "5",
            "--population-seeds", "3..4", "--format", "csv")  # fmt: skip
    assert r.code == 0, r.err
    summ = pd.read_csv(io.StringIO(r.out))
    assert sorted(set(summ["population_seed"])) == [3, 4]
    bad = cli("population", "--preset", "quick", "--population-seeds", "-1")
    assert bad.code == 2 and "--population-seeds" in bad.err
