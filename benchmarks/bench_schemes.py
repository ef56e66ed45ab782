"""Per-step cost of training schemes against GRPO, in the same run (issue 21 item 3).

Targets: a table scheme (MaxRL: per-X tables, the same kernel code as GRPO) <= 1.05x GRPO per
step; a likelihood-aware scheme (unlikeliness, ds: per-group ranks / advantages from p_old) and a
regularizer (entropy, exact KL, k3: weights on every logit) <= 1.5x GRPO per step. Single-prompt
simulator at K = 128,000, N = 8, Adam, dense path for every arm (a regularizer moves every logit,
so the sum tree does not apply; GRPO on the same path is the like-for-like reference), one thread,
one seed, metrics logged at the first and last step only. Population model at its default size
(P = 256 + 256 test prompts, K = 64, B = 32, N = 8, Adam), one seed, one thread, at its default
lr and at lr 1e-6 (every arm on the same trajectory: the per-step cost of the population
depends on it, through lazy Adam catch-up and sparse theta updates). Marginal CPU time per step
(a run of n steps minus one of n/4, so what a call does once is left out), interleaved repeats,
best of each.

Run: ``python benchmarks/bench_schemes.py [--quick]``.
"""

from __future__ import annotations

import sys

from _common import Row, fmt_time, header, measure_many, print_table

K = 128_000
N = 8
TABLE = ["maxrl"]
HEAVY = [
    "unlikeliness",
    "ds",
    "grpo+entropy:coef=0.001",
    "grpo+kl:coef=0.001",
    "grpo+kl:coef=0.001,estimator=k3",
]


def sim_config(scheme: str, steps: int, K: int = K):
    from fgrpo_theory.sim import SimConfig

    n_correct = K // 10
    return SimConfig(
        K=K,
        logits=f"5.0x1,3.0x{n_correct - 1},0.0x{K - n_correct}",
        correct=n_correct,
        N=N,
        steps=steps,
        seeds=1,
        optimizer="adam",
        lr=0.01,
        log_steps=(0, steps),
        backend="dense",
        scheme=scheme,
    )


def pop_config(scheme: str, steps: int, lr: float = 0.01):
    from fgrpo_theory.population import PopulationConfig

    return PopulationConfig(
        steps=steps, seeds=1, log_every=steps, scheme=scheme, lr_shared=lr, lr_prompt=lr
    )


def main(quick: bool = False) -> int:
    from fgrpo_theory.population import simulate_population
    from fgrpo_theory.sim import simulate

    header(f"Schemes vs GRPO per step: simulator K={K:,} N={N} Adam dense; population default")
    steps = 20 if quick else 400
    psteps = 12 if quick else 2000
    repeats = 2 if quick else 5
    names = ["grpo", *TABLE, *HEAVY]
    for s in names:  # compile / load the cache
        simulate(sim_config(s, 2, K=1000), threads=1)
        simulate_population(pop_config(s, 2), threads=1)

    # marginal per-step cost: (T(n) - T(n/4)) / (3n/4) removes what a call does once
    # (config, population generation, initial tree / logs, the output frame)
    def marginal(run, n):
        fns = [lambda s=s, m=m: run(s, m) for s in names for m in (n, n // 4)]
        t = measure_many(fns, repeats=repeats)
        return [(t[2 * i].cpu - t[2 * i + 1].cpu) / (n - n // 4) for i in range(len(names))]

    sim = marginal(lambda s, m: simulate(sim_config(s, m), threads=1), steps)
    pop = marginal(lambda s, m: simulate_population(pop_config(s, m), threads=1), psteps)
    # the population's per-step cost depends on the trajectory (lazy Adam catch-up, sparse
    # theta updates), which differs between schemes at the default lr; at lr 1e-6 every arm
    # stays at the initial policy, so the ratio is the scheme machinery's own cost
    pop0 = marginal(lambda s, m: simulate_population(pop_config(s, m, 1e-6), threads=1), psteps)
    rows = []
    arms = (
        ("simulator", sim),
        ("population", pop),
        ("population, lr 1e-6 (same trajectory)", pop0),
    )
    for label, times in arms:
        ref = times[0]
        rows.append(Row(f"{label}: grpo (reference)", f"{fmt_time(ref)}/step"))
        for s, t in zip(names[1:], times[1:], strict=True):
            r = t / ref
            lim = 1.05 if s in TABLE else 1.5
            ok = None if quick else r <= lim
            rows.append(Row(f"{label}: {s}", f"{fmt_time(t)}/step", f"<= {lim}x", f"{r:.3f}x", ok))
    missed = print_table(rows)
    return 0 if missed >= 0 else 1


if __name__ == "__main__":
    sys.exit(main("--quick" in sys.argv))
