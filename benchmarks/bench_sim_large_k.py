"""Large K: K = 1,000,000, N = 8, SGD, log-prob rule (only sampled logits move: sum-tree path).

Target (issue 4, Speed): per-step cost must not grow linearly in K; at least 200,000 steps per
second at K = 1,000,000, N = 8. The reference is the simulator's own dense path (every logit
recomputed every step) on the same config, measured in the same run; the ratio is the speed-up of
the sum tree over it. A K sweep of the sum-tree path (10^4 .. 10^6) shows the per-step cost is
O(log K), not O(K). Both paths use one thread and one seed and log metrics at steps 0 and last
only (each log is O(K)); the tree's exact rebuild every ``renorm_every`` = 10,000 steps is
included in the timing.

Run: ``python benchmarks/bench_sim_large_k.py [--quick]``.
"""

from __future__ import annotations

import sys

from _common import Row, Timing, fmt_rate, fmt_time, header, measure_many, print_table

K = 1_000_000
N = 8


def sim_config(K: int, steps: int, backend: str):
    from fgrpo_theory.sim import SimConfig

    n_correct = K // 10
    return SimConfig(
        K=K,
        logits=f"5.0x1,3.0x{n_correct - 1},0.0x{K - n_correct}",
        correct=n_correct,
        N=N,
        steps=steps,
        seeds=1,
        algo="grpo",
        rule="logprob",
        advantage="grpo",
        optimizer="sgd",
        lr=0.1,
        log_steps=(0, steps),
        backend=backend,
    )


def main(quick: bool = False) -> int:
    from fgrpo_theory.sim import simulate

    header(f"Large K: K={K:,}, N={N}, log-prob GRPO (population std), SGD lr 0.1, 1 thread")
    steps_tree = 20_000 if quick else 200_000
    steps_dense = 20 if quick else 200
    repeats = 2 if quick else 3
    simulate(sim_config(1000, 2, "sumtree"), threads=1)  # compile / load the cache
    simulate(sim_config(1000, 2, "dense"), threads=1)

    cfg_t = sim_config(K, steps_tree, "sumtree")
    cfg_d = sim_config(K, steps_dense, "dense")
    t_tree, t_dense = measure_many(
        [lambda: simulate(cfg_t, threads=1), lambda: simulate(cfg_d, threads=1)], repeats=repeats
    )
    t_tree, t_dense = t_tree / steps_tree, t_dense / steps_dense

    def rate(t: Timing) -> str:
        return f"{fmt_rate(1.0 / t.cpu, 'steps')} (wall {fmt_rate(1.0 / t.wall, '')})"

    rows = [
        Row(
            "dense path (reference)",
            f"{fmt_time(t_dense.cpu)}/step (wall {fmt_time(t_dense.wall)})",
        ),
        Row(
            "sum-tree path",
            rate(t_tree),
            "(full run only)" if quick else ">= 200 k steps/s",
            f"{t_dense.cpu / t_tree.cpu:.0f}x dense",
            None if quick else 1.0 / t_tree.cpu >= 200_000,
        ),
    ]
    # how the per-step cost grows with K: the marginal cost between two run lengths removes the
    # O(K) work done once per call (config, initial tree, the two metric logs)
    short = steps_tree // 10
    for k in (10_000, 100_000, K):
        c_long = sim_config(k, steps_tree, "sumtree")
        c_short = sim_config(k, short, "sumtree")
        t_l, t_s = measure_many(
            [lambda c=c_long: simulate(c, threads=1), lambda c=c_short: simulate(c, threads=1)],
            repeats=repeats,
        )
        marg = (t_l.cpu - t_s.cpu) / (steps_tree - short)
        rows.append(
            Row(
                f"  sum-tree path, K={k:,}: marginal cost",
                f"{marg * 1e6:.3f} us/step",
                "",
                f"fixed per call {fmt_time(max(t_s.cpu - short * marg, 0.0))}",
            )
        )
    print(
        f"# timed: simulate() end to end (tree build + 2 metric logs included), sum tree "
        f"{steps_tree:,} steps, dense {steps_dense} steps, interleaved, best of {repeats}; rates "
        "from process CPU time (wall-clock in parentheses); marginal cost = CPU time difference "
        f"between {steps_tree:,} and {steps_tree // 10:,} steps (includes the periodic rebuilds)"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(quick="--quick" in sys.argv[1:]))
