"""Runs advanced one by one from Python against the batch kernels (``runner.DIRECT_RUNS``).

A thread with a few runs calls the one-run kernel once per run, one with more calls the batch
kernel over its block of runs; runs are independent, so the two must give every logged number
and every threshold row bit for bit, on one thread and on two (blocks of runs split between
Python threads). Covers the small-K dense loop, the general dense loop (Adam, thresholds) and
the sum-tree loop (thresholds).
"""

from __future__ import annotations

import pandas as pd
import pytest

from fgrpo_theory.sim import SimConfig, runner, simulate

CONFIGS = [
    dict(K=6, backend="dense"),
    dict(K=300, backend="dense", optimizer="adam", lr=0.05, thresholds=(0.3, 0.5)),
    dict(K=300, backend="sumtree", thresholds=(0.3, 0.5)),
]


@pytest.mark.parametrize("kw", CONFIGS, ids=["small", "dense-adam", "sumtree"])
def test_run_by_run_equals_the_batch_kernel(kw, monkeypatch):
    base = dict(N=8, steps=60, seeds=5, correct=2, log_every=6, seed=5, lr=0.3)
    base.update(kw)
    cfg = SimConfig(**base)
    monkeypatch.setattr(runner, "DIRECT_RUNS", 0)  # every block through the batch kernel
    batch = simulate(cfg, threads=1, tables=True)
    monkeypatch.setattr(runner, "DIRECT_RUNS", 1000)  # every run called from Python
    one = simulate(cfg, threads=1, tables=True)
    two = simulate(cfg, threads=2, tables=True)
    assert batch.log["q_pos"].nunique() > 3  # the runs moved
    for other in (one, two):
        pd.testing.assert_frame_equal(batch.log, other.log, check_exact=True)
        pd.testing.assert_frame_equal(batch.thresholds, other.thresholds, check_exact=True)


@pytest.mark.parametrize("kw", CONFIGS[:2], ids=["small", "dense-adam"])
def test_two_threads_mixing_both_kernels(kw, monkeypatch):
    """33 runs on 2 threads: one block of 16 runs goes run by run, the other (17) through the
    batch kernel, at the same time; and both blocks through the batch kernel on 2 threads. Both
    equal 33 runs on one thread through the batch kernel."""
    base = dict(N=8, steps=40, seeds=33, correct=2, log_every=8, seed=9, lr=0.3)
    base.update(kw)
    cfg = SimConfig(**base)
    monkeypatch.setattr(runner, "DIRECT_RUNS", 0)
    ref = simulate(cfg, threads=1, tables=True)
    both = simulate(cfg, threads=2, tables=True)
    monkeypatch.setattr(runner, "DIRECT_RUNS", 16)
    mixed = simulate(cfg, threads=2, tables=True)
    for other in (both, mixed):
        pd.testing.assert_frame_equal(ref.log, other.log, check_exact=True)
        pd.testing.assert_frame_equal(ref.thresholds, other.thresholds, check_exact=True)
