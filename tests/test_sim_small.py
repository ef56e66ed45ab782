"""The dense path's small-K loop (fgrpo_theory.sim.ksmall) against the general loop.

The small loop reproduces the general run loop's arithmetic operation for operation (its SGD
and Adam element loops repeat what LLVM made of kcore._sgd / kcore._adam), so every logged
number of every eligible config must be identical bit for bit, not close. The general loop
itself is checked against independent oracles elsewhere (test_sim_reference, test_sim_stats);
this file checks that the faster loop is the same computation, over configs that exercise each
branch it has (optimizers, weight decay, odd and even K, K below and above 8, surrogates,
clipping, CISPO, dynamic sampling, subsets, focal weights, chunked steps).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.sim import SimConfig, runner, simulate
from fgrpo_theory.sim.ksmall import SMALL_K, TARGET_FMA, small_eligible

# the small loop repeats the FMAs LLVM fuses kcore's loops into, so it is taken only where the
# CPU Numba compiles for has FMA (see test_a_target_without_fma_takes_the_general_loop)
needs_fma = pytest.mark.skipif(not TARGET_FMA, reason="Numba's target CPU has no FMA")

CONFIGS = [
    dict(K=6, optimizer="sgd", lr=0.1),
    dict(K=6, optimizer="adam", lr=0.05),
    dict(K=5, optimizer="adam", lr=0.05),  # odd K: kcore._adam's first element divides
    dict(K=7, optimizer="adamw", lr=0.05, weight_decay=0.1),
    dict(K=2, optimizer="adam", lr=0.2, N=4, correct=1),
    dict(K=3, optimizer="sgd", lr=0.5, weight_decay=0.05),
    dict(K=11, optimizer="adam", lr=0.03),  # K >= 8: the loop calls kcore._adam
    dict(K=16, optimizer="adamw", lr=0.03, weight_decay=0.01, N=16),
    dict(K=9, optimizer="sgd", lr=0.3, N=32),
    dict(K=6, rule="linear", lr=0.5, advantage="dr-grpo", r_incorrect=-1.0),
    dict(K=6, optimizer="adam", lr=0.05, scheme="trl+focal:gamma=1"),
    dict(K=6, algo="cispo", lr=0.2, optimizer="adam"),
    dict(K=8, dynamic_sampling="dapo", lr=0.2, optimizer="adam", correct=3),
    dict(K=6, lr=0.3, subsets={"rare": "1..3", "one": "2"}, optimizer="adamw"),
    dict(K=6, lr=0.1, optimizer="adam", beta1=0.5, beta2=0.9, adam_eps=1e-3),
]


def _config(kw: dict) -> SimConfig:
    base = dict(N=8, steps=120, seeds=5, correct=2, log_every=7, backend="dense", seed=11)
    base.update(kw)
    K = base["K"]
    base.setdefault("logits", f"1.0x1,0.0x{K - 1}")
    return SimConfig(**base)


def _both(cfg: SimConfig, monkeypatch, **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    monkeypatch.setattr(runner, "SMALL_PATH", False)
    general = simulate(cfg, threads=1, **kw)
    monkeypatch.setattr(runner, "SMALL_PATH", True)
    small = simulate(cfg, threads=1, **kw)
    return general, small


@needs_fma
@pytest.mark.parametrize("kw", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
def test_small_loop_is_bit_identical(kw, monkeypatch):
    cfg = _config(kw)
    a = runner.prepare(cfg)
    z = np.zeros((1, cfg.K))
    assert small_eligible(runner.build_records(cfg, a), z)
    general, small = _both(cfg, monkeypatch)
    pd.testing.assert_frame_equal(general, small, check_exact=True)
    # the runs moved (a test of an idle run would prove nothing)
    assert general["q_pos"].nunique() > 10


def test_chunks_and_threads_do_not_change_the_small_loop(monkeypatch):
    cfg = _config(dict(K=6, optimizer="adam", lr=0.05, steps=90))
    general, small = _both(cfg, monkeypatch, chunk_steps=13)
    pd.testing.assert_frame_equal(general, small, check_exact=True)
    whole = simulate(cfg, threads=2)
    pd.testing.assert_frame_equal(whole, small, check_exact=True)


@needs_fma
def test_eligibility():
    def elig(**kw):
        cfg = _config(kw)
        a = runner.prepare(cfg)
        rec = runner.build_records(cfg, a)
        return small_eligible(rec, np.zeros((1, cfg.K), a["z0"].dtype))

    assert elig(K=6)
    assert not elig(K=SMALL_K + 1)
    assert not elig(K=6, inner_updates=2)
    assert not elig(K=6, thresholds=(0.5,))
    assert not elig(K=6, sampler="sorted")
    assert not elig(K=6, scheme="ds")


_NO_FMA_CHILD = """
import numpy as np, pandas as pd
from fgrpo_theory.sim import SimConfig, ksmall, runner, simulate

cfg = SimConfig(K=3, N=4, steps=30, seeds=2, correct=1, log_every=5, backend="dense", seed=3,
                optimizer="adam", lr=0.2, logits="1.0x1,0.0x2")
assert not ksmall.small_eligible(runner.build_records(cfg, runner.prepare(cfg)), np.zeros((1, 3)))
assert not ksmall.TARGET_FMA
taken, small_batch, small_one = [], ksmall.run_small_batch, ksmall.run_small
ksmall.run_small_batch = lambda *a: taken.append(1) or small_batch(*a)
ksmall.run_small = lambda *a: taken.append(1) or small_one(*a)  # (a few runs: run by run)
small = simulate(cfg, threads=1)
runner.SMALL_PATH = False
general = simulate(cfg, threads=1)
pd.testing.assert_frame_equal(general, small, check_exact=True)
assert taken == [] and general["q_pos"].nunique() > 3
print("ok")
"""


@pytest.mark.slow
def test_a_target_without_fma_takes_the_general_loop(tmp_path):
    """With Numba compiling for a CPU without FMA (``NUMBA_CPU_NAME=generic``: no features),
    the general loop does not fuse, so the small loop (explicit FMAs) is not taken and the run
    is the general loop's. Before, eligibility read the host CPU (FMA here) and took it. A
    subprocess with its own kernel caches (a cold compile for that target, ~30 s)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "NUMBA_CPU_NAME": "generic"}
    env.pop("NUMBA_CPU_FEATURES", None)
    env["FGRPO_THEORY_CACHE_DIR"] = str(tmp_path / "fgrpo")
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    r = subprocess.run([sys.executable, "-c", _NO_FMA_CHILD], capture_output=True, text=True,
                       env=env, timeout=600)  # fmt: skip
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr[-2000:]
