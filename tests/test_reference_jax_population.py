"""The JAX population reference (benchmarks/reference_jax_population.py) is the population model.

Its exact step-0 metrics equal the kernel's to rounding, and the expected first step (every
prompt's success after one step, SGD and Adam) agrees within Monte Carlo error over independent
seeds; a reference with the wrong learning rate is rejected. Skipped when JAX is absent.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed (bench extra)"
)


def _load(name: str):
    mod_name = f"_fgrpo_bench_{name}"
    if mod_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(mod_name, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[mod_name]


def _kernel(cfg, pop):
    from fgrpo_theory.population.runner import _run

    out_p, _, _ = _run(cfg, pop, 1, None)
    return out_p


def _setup(**kw):
    from fgrpo_theory.population import PopulationConfig, generate_population
    from fgrpo_theory.population.runner import advantage_tables

    cfg = PopulationConfig(**kw)
    pop = generate_population(cfg)
    a_c, a_w, _ = advantage_tables(cfg)
    return cfg, pop, a_c, a_w


def test_step0_metrics_equal_the_kernel():
    rp = _load("reference_jax_population")
    from fgrpo_theory.sim.keys import run_keys

    cfg, pop, a_c, a_w = _setup(steps=2, log_every=2, seeds=2)
    got = rp.run_population(pop.theta0, pop.phi0, pop.correct, pop.rare, pop.n_train, cfg.B,
                            cfg.N, 2, 2, a_c, a_w, run_keys(0, 2))[:, 0]  # fmt: skip
    want = _kernel(cfg, pop)[:, 0]
    assert want.shape == got.shape
    assert (want[..., 1] == 0).sum() == (got[..., 1] == 0).sum() > 0  # prompts without rare
    np.testing.assert_allclose(got, want, rtol=2e-15, atol=1e-16)


@pytest.mark.parametrize(("opt", "lr"), [("sgd", 2.0), ("adam", 0.05)])
def test_expected_first_step_agrees_within_monte_carlo_error(opt, lr):
    rp = _load("reference_jax_population")
    from fgrpo_theory.sim.keys import run_keys

    R = 4000
    cfg, pop, a_c, a_w = _setup(P=6, P_test=2, K=6, B=3, N=4, steps=1, log_every=1, seeds=R,
                                optimizer=opt, lr_shared=lr, lr_prompt=lr)  # fmt: skip
    k = _kernel(cfg, pop)[:, 1, :, 0]  # (R, P_all): success after one step, seeds 0..R-1

    def ref(scale):
        return rp.first_step_mu(pop.theta0, pop.phi0, pop.correct, pop.rare, pop.n_train, cfg.B,
                                cfg.N, a_c, a_w, run_keys(12345, R), opt, lr * scale,
                                lr * scale)  # fmt: skip

    def z(j):
        se = np.sqrt(k.var(axis=0, ddof=1) / R + j.var(axis=0, ddof=1) / R)
        return (k.mean(axis=0) - j.mean(axis=0)) / se

    moved = np.abs(k.mean(axis=0) - pop.mu0) / (k.std(axis=0, ddof=1) / np.sqrt(R))
    assert moved.max() > 20  # the step is resolved by the Monte Carlo
    assert np.abs(z(ref(1.0))).max() < 4.5
    assert np.abs(z(ref(2.0))).max() > 10  # a wrong step size is rejected
