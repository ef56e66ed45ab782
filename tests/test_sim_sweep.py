"""run_sweep: one file per config, atomic writes, resume, the executor hook."""

from __future__ import annotations

import pandas as pd
import pytest

from fgrpo_theory.sim import config_hash, expand_grid, run_one, run_sweep, simulate

SWEEP = {"K": 6, "logits": "0.5x1,0.0x5", "correct": 1, "N": [2, 8], "gamma": [0.0, 1.0],
         "steps": 20, "seeds": 3, "log_every": 10}  # fmt: skip


def test_sweep_writes_one_file_per_config_and_resumes(tmp_path):
    cfgs = expand_grid(SWEEP)
    df = run_sweep(SWEEP, tmp_path, progress=False)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted(f"{config_hash(c)}.parquet" for c in cfgs)
    assert len(df) == 4 * 3 * 3
    assert list(df.config_hash.unique()) == [config_hash(c) for c in cfgs]  # config order
    one = pd.read_parquet(tmp_path / files[0])
    pd.testing.assert_frame_equal(
        one, simulate(next(c for c in cfgs if config_hash(c) in files[0]))
    )

    # resume: nothing to run; then delete one file and only that config runs again
    calls: list[list] = []

    def recording(fn, items):
        calls.append(list(items))
        return [fn(c) for c in items]

    again = run_sweep(SWEEP, tmp_path, executor=recording)
    assert calls == [[]]
    pd.testing.assert_frame_equal(again, df)
    (tmp_path / f"{config_hash(cfgs[2])}.parquet").unlink()
    again = run_sweep(SWEEP, tmp_path, executor=recording)
    assert calls[-1] == [cfgs[2]]
    pd.testing.assert_frame_equal(again, df)
    # resume=False recomputes everything
    run_sweep(SWEEP, tmp_path, resume=False, executor=recording)
    assert calls[-1] == cfgs
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files


def test_executor_results_are_used_in_config_order(tmp_path):
    cfgs = expand_grid(SWEEP)
    df = run_sweep(cfgs, executor=lambda fn, items: map(fn, items))
    pd.testing.assert_frame_equal(df, pd.concat([run_one(c) for c in cfgs], ignore_index=True))


def test_csv_format(tmp_path):
    df = run_sweep(SWEEP, tmp_path, fmt="csv", progress=False)
    assert len(list(tmp_path.glob("*.csv"))) == 4
    back = run_sweep(SWEEP, tmp_path, fmt="csv", executor=lambda fn, items: [fn(c) for c in items])
    assert back.shape == df.shape


def test_bad_output_folder_fails_before_work(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    called = []
    with pytest.raises(ValueError, match="out_dir must be a folder"):
        run_sweep(SWEEP, f, executor=lambda fn, items: called.append(1) or [])
    assert not called
    with pytest.raises(ValueError, match="fmt must be 'parquet' or 'csv'"):
        run_sweep(SWEEP, tmp_path, fmt="xlsx")
    with pytest.raises(ValueError, match="N must be >= 1; got 0"):
        run_sweep({**SWEEP, "N": [0]}, tmp_path)
