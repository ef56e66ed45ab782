"""Issue 27 targets 1 and 2: the dense path at small K and the exact-metrics pass, against JAX.

1. Dense path (``backend = "dense"``: every Adam, AdamW, linear-surrogate, inner-update or
   weight-decay config takes it), K = 6 and K = 1,000, N = 8, log-prob GRPO, SGD and Adam: the
   simulator on one core (``simulate(..., threads=1)`` end to end, metrics logged at the first
   and last step) at >= 1.5x JAX float64 (``reference_jax.run_tabular_logprob``: jit + vmap over
   seeds + scan over steps, one XLA thread, a clean subprocess).
2. The exact metrics of a logged row at K = 128,000 (the Fig. 2 prompt: Q_pos, M_ret, entropy,
   two subsets' masses and mean NLLs): the simulator's pass (:func:`fgrpo_theory.sim.kmetrics.
   _metrics` on 20 logit rows) at >= 1.2x a jitted JAX version of the same quantities
   (``reference_jax.metrics_rows``, a ``lax.map`` over the rows, float64); and a logged row in a
   run (every-step logging minus last-step logging, per step, ``fig2-logprob-adam`` at N = 8)
   costs no more than two training steps.

Run: ``python benchmarks/bench_sim_dense.py``
"""

from __future__ import annotations

import sys

import numpy as np
from _common import (
    RefWorker,
    Row,
    fmt_rate,
    fmt_time,
    header,
    load_module,
    measure_many,
    print_table,
)

N = 8
REPEATS = 3
# (K, optimizer, lr, seeds, simulator steps, JAX steps)
DENSE = [
    (6, "sgd", 0.1, 2_000, 1_000, 250),
    (6, "adam", 0.01, 2_000, 1_000, 250),
    (1_000, "sgd", 0.1, 200, 400, 100),
    (1_000, "adam", 0.01, 200, 400, 100),
]
K_BIG = 128_000
ROWS = 20


def _logits(K: int) -> np.ndarray:
    z = np.zeros(K)
    z[0] = 1.0
    return z


def _correct(K: int) -> int:
    return 2 if K == 6 else K // 10


def dense_config(K: int, opt: str, lr: float, seeds: int, steps: int):
    from fgrpo_theory.sim import SimConfig

    return SimConfig(
        K=K, logits=f"1.0x1,0.0x{K - 1}", correct=_correct(K), N=N, steps=steps, seeds=seeds,
        algo="grpo", rule="logprob", advantage="grpo", gamma=0.0, optimizer=opt, lr=lr,
        r_correct=1.0, r_incorrect=0.0, log_steps=(0, steps), backend="dense",
    )  # fmt: skip


def fig2_config(steps: int, every: bool):
    from fgrpo_theory.sim import SimConfig

    kw = dict(log_every=1) if every else dict(log_steps=(0, steps))
    return SimConfig(  # the preset fig2-logprob-adam at N = 8, gamma = 0, one seed
        K=K_BIG, logits="5.0x1,3.0x9999,0.0x118000", correct="0..9999", N=8, steps=steps,
        seeds=1, rule="logprob", advantage="dr-grpo", optimizer="adam", lr=1e-2,
        r_correct=1.0, r_incorrect=-1.0, subsets={"rare": "1..9999", "one": "1"}, **kw,
    )  # fmt: skip


def main() -> int:
    from fgrpo_theory.sim import simulate
    from fgrpo_theory.sim.kernels import n_metrics
    from fgrpo_theory.sim.kmetrics import _metrics

    header("Dense path at small K and the exact-metrics pass against JAX float64 (issue 27)")
    rj = load_module("reference_jax")
    if not rj.AVAILABLE:
        print("# jax is not installed (pip install -e '.[bench]'): nothing to compare with")
        return 0
    for K, opt, lr, *_ in DENSE:  # compile / load the kernels outside the timing
        simulate(dense_config(K, opt, lr, 2, 2), threads=1)
    w = RefWorker(torch_threads=1)
    fns = []
    for K, opt, lr, seeds, steps, steps_j in DENSE:
        cfg = dense_config(K, opt, lr, seeds, steps)
        fns.append(lambda cfg=cfg: simulate(cfg, threads=1))
        correct = np.arange(K) < _correct(K)
        fns.append(w.timed("reference_jax", "run_tabular_logprob", _logits(K), correct, N,
                           steps_j, seeds, lr, optimizer=opt))  # fmt: skip
    # the metrics pass at K = 128,000
    z0 = np.concatenate([[5.0], np.full(9_999, 3.0), np.zeros(118_000)])
    Z = z0 + np.random.default_rng(0).normal(0.0, 0.1, (ROWS, K_BIG))
    correct = (np.arange(K_BIG) < 10_000).astype(np.uint8)
    sub = np.zeros((2, K_BIG), np.uint8)
    sub[0, 1:10_000] = 1
    sub[1, 1] = 1
    p0 = np.exp(z0 - z0.max())
    p0 /= p0.sum()
    sp = float(p0[correct == 1].sum())
    row = np.zeros(n_metrics(2))

    def sim_rows():
        for r in range(ROWS):
            _metrics(Z[r], correct, sub, p0, sp, row)

    sim_rows()
    fns.append(sim_rows)
    fns.append(w.timed("reference_jax", "metrics_rows", Z, correct, sub, p0))
    steps_f = 200
    simulate(fig2_config(2, True), threads=1)
    fns.append(lambda: simulate(fig2_config(steps_f, False), threads=1))
    fns.append(lambda: simulate(fig2_config(steps_f, True), threads=1))
    times = measure_many(fns, repeats=REPEATS)
    w.close()

    rows = []
    for i, (K, opt, _, seeds, steps, steps_j) in enumerate(DENSE):
        t_s, t_j = times[2 * i], times[2 * i + 1]
        r_s, r_j = seeds * steps / t_s.cpu, seeds * steps_j / t_j.cpu
        rows.append(Row(f"dense K={K:,} {opt}: simulator, 1 thread", fmt_rate(r_s, "seed-steps")))
        rows.append(
            Row(f"dense K={K:,} {opt}: jax float64, 1 thread", fmt_rate(r_j, "seed-steps"),
                ">= 1.5x jax", f"{r_s / r_j:.2f}x", r_s / r_j >= 1.5)
        )  # fmt: skip
    j = 2 * len(DENSE)
    t_m, t_mj = times[j].cpu / ROWS, times[j + 1].cpu / ROWS
    rows.append(Row("metrics pass K=128,000, simulator (per row)", fmt_time(t_m)))
    rows.append(
        Row("metrics pass K=128,000, jitted jax (per row)", fmt_time(t_mj), ">= 1.2x jax",
            f"{t_mj / t_m:.2f}x", t_mj / t_m >= 1.2)
    )  # fmt: skip
    t_step = times[j + 2].cpu / steps_f
    t_row = (times[j + 3].cpu - times[j + 2].cpu) / steps_f
    rows.append(Row("fig2-logprob-adam N=8: training step (last-step logging)", fmt_time(t_step)))
    rows.append(
        Row("  a logged row in the run (every-step minus last-step logging)", fmt_time(t_row),
            "<= 2 steps", f"{t_row / t_step:.2f} steps", t_row <= 2 * t_step)
    )  # fmt: skip
    print(
        f"# interleaved, best of {REPEATS}; process CPU time of one thread (JAX in a clean "
        "subprocess pinned to one core, one XLA thread)"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
