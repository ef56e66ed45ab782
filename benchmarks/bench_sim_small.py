"""Small tabular benchmark: K = 6, N = 8, 2,000 seeds, log-prob GRPO with SGD.

Targets (issue 4, Speed): at least 20 million seed-steps per second per core, and at least 6x the
straightforward NumPy implementation vectorized over seeds (``reference_numpy.run_tabular_logprob``,
same algorithm) measured in the same run. The simulator is timed end to end (``simulate``: config
preparation, kernel, DataFrame) with ``threads=1`` for the per-core figure and with 2 threads; the
NumPy reference is single-threaded. The PyTorch version (batched over seeds, 1 thread) is shown
for information when torch is installed.

Run: ``python benchmarks/bench_sim_small.py``
"""

from __future__ import annotations

import sys

import numpy as np
from _common import Row, best_of, fmt_rate, header, load_module, print_table

K, N, SEEDS = 6, 8, 2_000
STEPS_SIM = 2_000  # 4 M seed-steps per timed call
STEPS_REF = 100  # 0.2 M seed-steps per timed call
LR = 0.1
LOGITS = "1.0x1,0.0x5"  # action 0 at logit 1, the rest 0; actions 0 and 1 correct (mu ~ 0.48)
CORRECT = 2


def sim_config(steps: int):
    from fgrpo_theory.sim import SimConfig

    return SimConfig(
        K=K,
        logits=LOGITS,
        correct=CORRECT,
        N=N,
        steps=steps,
        seeds=SEEDS,
        algo="grpo",
        rule="logprob",
        advantage="grpo",
        gamma=0.0,
        optimizer="sgd",
        lr=LR,
        r_correct=1.0,
        r_incorrect=0.0,
        log_steps=(0, steps),
        backend="dense",
    )


def main() -> int:
    from fgrpo_theory.sim import simulate

    header(f"Small tabular: K={K}, N={N}, {SEEDS} seeds, log-prob GRPO (population std), SGD")
    rn = load_module("reference_numpy")
    rt = load_module("reference_torch")

    cfg = sim_config(STEPS_SIM)
    simulate(sim_config(2), threads=1)  # compile / load the cache outside the timing
    t1 = best_of(lambda: simulate(cfg, threads=1), repeats=5)
    t2 = best_of(lambda: simulate(cfg, threads=2), repeats=5)
    rate1 = SEEDS * STEPS_SIM / t1
    rate2 = SEEDS * STEPS_SIM / t2

    z0 = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    correct = np.arange(K) < CORRECT
    t_np = best_of(
        lambda: rn.run_tabular_logprob(z0, correct, N, STEPS_REF, SEEDS, LR, advantage="grpo"),
        repeats=5,
    )
    rate_np = SEEDS * STEPS_REF / t_np

    rows = [
        Row("numpy reference (vectorized over seeds)", fmt_rate(rate_np, "seed-steps")),
        Row(
            "simulator, 1 thread (per core)",
            fmt_rate(rate1, "seed-steps"),
            ">= 20 M/s",
            f"{rate1 / rate_np:.1f}x numpy (target >= 6x)",
            rate1 >= 20e6 and rate1 / rate_np >= 6.0,
        ),
        Row(
            "simulator, 2 threads (total)",
            fmt_rate(rate2, "seed-steps"),
            "",
            f"{rate2 / rate_np:.1f}x numpy; {rate2 / rate1:.2f}x 1 thread",
        ),
        Row("simulator, 2 threads (per core)", fmt_rate(rate2 / 2, "seed-steps"), ">= 20 M/s", "",
            rate2 / 2 >= 20e6),
    ]  # fmt: skip
    if rt.AVAILABLE:
        import torch

        torch.set_num_threads(1)
        t_pt = best_of(
            lambda: rt.run_tabular_logprob(z0, correct, N, STEPS_REF // 2, SEEDS, LR), repeats=3
        )
        rate_pt = SEEDS * (STEPS_REF // 2) / t_pt
        rows.append(
            Row(
                "pytorch, batched over seeds (1 thread)",
                fmt_rate(rate_pt, "seed-steps"),
                "",
                f"simulator 1 thread = {rate1 / rate_pt:.1f}x",
            )
        )
    else:
        print("# pytorch row skipped: torch is not installed")
    print(
        f"# timed: simulate() end to end, {SEEDS} seeds x {STEPS_SIM} steps (best of 5); numpy "
        f"{SEEDS} x {STEPS_REF} steps (best of 5)"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
