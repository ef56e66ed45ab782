"""Population sweeps: grid expansion, per-config files with resume, and Dask equal to local.

Oracles: the local run (bit for bit, DataFrames and file bytes) for the Dask run; the file system
(one file per config named by its hash, mtime untouched when resumed, rewritten when the code
digest differs); hand-written grids for the expansion.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pandas as pd
import pytest

from fgrpo_theory._trust import KEY_NAME
from fgrpo_theory.population import (
    PopulationConfig,
    expand_population_grid,
    population_config_hash,
    run_population_sweep,
)

try:
    import distributed  # noqa: F401

    HAVE_DASK = True
except ImportError:  # pragma: no cover - the CI installs the extra
    HAVE_DASK = False

needs_dask = pytest.mark.skipif(not HAVE_DASK, reason='needs pip install "fgrpo-theory[dask]"')

SWEEP = dict(P=16, P_test=8, K=8, B=4, steps=12, seeds=2, log_every=6, N=[2, 4], gamma=[0.0, 1.0])


def _digests(folder: Path) -> dict[str, str]:
    """Result file -> digest of its rows and config hash (a file's keyed digests differ from
    folder to folder: each folder has its own key)."""
    import pyarrow.parquet as pq

    out = {}
    for p in sorted(folder.iterdir()):
        if p.name == ".fgrpo-theory.key":
            continue
        t = pq.read_table(p)
        text = (
            t.to_pandas().to_csv(index=False)
            + t.schema.metadata[b"fgrpo_theory.config_hash"].decode()
        )
        out[p.name] = hashlib.sha256(text.encode()).hexdigest()
    return out


def test_grid_expansion_order_and_pair_fields():
    cfgs = expand_population_grid(dict(SWEEP, mu0=[0.5, 2.0]))
    assert [(c.N, c.gamma) for c in cfgs] == [(2, 0.0), (2, 1.0), (4, 0.0), (4, 1.0)]
    assert all(c.mu0 == (0.5, 2.0) for c in cfgs)  # a pair is a value, not a sweep axis
    two = expand_population_grid(dict(P=16, B=4, mu0=[[0.5, 2.0], [1.0, 1.0]]))
    assert [c.mu0 for c in two] == [(0.5, 2.0), (1.0, 1.0)]
    one = PopulationConfig(P=16, B=4)
    assert expand_population_grid(one) == [one]
    with pytest.raises(ValueError, match="N must be a non-empty list"):
        expand_population_grid(dict(N=[]))
    with pytest.raises(ValueError, match="sweep key must be one of .*; got 'bogus'"):
        expand_population_grid(dict(bogus=1))
    with pytest.raises(ValueError, match="B must be <= P = 16"):  # validated before any work
        expand_population_grid(dict(P=16, B=[4, 40]))


def test_sweep_writes_one_file_per_config_and_resumes(tmp_path, monkeypatch, capsys):
    df = run_population_sweep(SWEEP, tmp_path, progress=False)
    cfgs = expand_population_grid(SWEEP)
    names = {f"{population_config_hash(c)}.parquet" for c in cfgs}
    assert set(_digests(tmp_path)) == names
    assert list(df["config_hash"].unique()) == [population_config_hash(c) for c in cfgs]
    mtimes = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    again = run_population_sweep(SWEEP, tmp_path, progress=False)  # all read, nothing run
    pd.testing.assert_frame_equal(again, df, check_exact=True)
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == mtimes
    # results of other population code are recomputed, saying so on stderr
    import fgrpo_theory.population.sweep as ps

    monkeypatch.setattr(ps, "population_digest", lambda: "0123456789abcdef")
    capsys.readouterr()
    third = run_population_sweep(SWEEP, tmp_path, progress=False)
    pd.testing.assert_frame_equal(third, df, check_exact=True)
    assert capsys.readouterr().err.count("other simulator code") == len(cfgs)
    # no folder: the same rows, nothing written
    pd.testing.assert_frame_equal(run_population_sweep(SWEEP), df, check_exact=True)
    assert [p.name for p in tmp_path.glob(".*")] == [KEY_NAME]  # no lock or temporary file


def test_cli_sweep_folder_resume_and_errors(cli, tmp_path):
    args = ["population", "--preset", "quick", "--N", "2,4", "--steps", "10", "--seeds", "1"]
    r = cli(*args, "--out", tmp_path / "runs", "--format", "csv")
    assert r.code == 0, r.err
    summ = pd.read_csv(io.StringIO(r.out))
    assert list(summ["N"]) == [2, 2, 4, 4] and list(summ["split"]) == ["train", "test"] * 2
    runs = set(os.listdir(tmp_path / "runs")) - {KEY_NAME}
    assert len(runs) == 2 and "wrote 2 result files" in r.err
    r2 = cli(*args, "--out", tmp_path / "runs", "--format", "csv")
    assert r2.code == 0 and r2.out == r.out
    r = cli(*args, "--out", tmp_path / "x.parquet")
    assert r.code == 2 and r.err.strip() == (
        f"Error: --out must be a folder for a sweep of 2 configs; got '{tmp_path / 'x.parquet'}'"
    )
    r = cli(*args, "--scheduler", "bogus")
    assert r.code == 2 and "--scheduler must be 'local', 'local-cluster:N'" in r.err


def test_cli_one_config_file_recomputed_when_edited(cli, tmp_path):
    out = tmp_path / "one.csv"
    args = ["population", "--preset", "quick", "--steps", "10", "--seeds", "1", "--out", out]
    assert cli(*args).code == 0
    assert "reused" in cli(*args).err
    out.write_text(out.read_text().replace("train", "tra1n", 1))
    r = cli(*args)
    assert r.code == 0 and "was edited after it was written; recomputing it" in r.err


@needs_dask
def test_cli_local_cluster_equals_local(cli, tmp_path):
    """local vs local-cluster:2 (run_population_sweep on Dask): same summary, same file bytes."""
    args = ["population", "--preset", "quick", "--gamma", "0,1", "--steps", "10", "--seeds", "2",
            "--format", "csv"]  # fmt: skip
    a = cli(*args, "--out", tmp_path / "local")
    b = cli(*args, "--out", tmp_path / "dask", "--scheduler", "local-cluster:2")
    assert (a.code, b.code) == (0, 0), (a.err, b.err)
    assert a.out == b.out
    assert _digests(tmp_path / "dask") == _digests(tmp_path / "local")
