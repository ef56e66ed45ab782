"""The full matched comparison of issue 11 (Speed) against the plain fixed-step sweep, same run.

Comparison: for N = 128, 8,192 and 32,768 in the log-prob/Adam Fig. 2 config
(``fgrpo_theory/sim/presets/fig2-logprob-adam.toml``, K = 128,000, 1,000 steps), the arms focal
(gamma = 1), vanilla, vanilla-m and vanilla-progress with 16 seeds each, plus the
progress-matching search, with the equal-progress metrics at Q_pos 0.9, 0.95, 0.98 recorded by the
kernel (:func:`fgrpo_theory.fair.run_comparison`: no per-step logging). Target: at most 3 minutes
on the 2-core machine.

Reference, measured in the same run: the plain fixed-step sweep of the same configs (vanilla and
focal at the focal lr, 16 seeds, logged every 10 steps as the Fig. 2 config), i.e. what a
fixed-step comparison costs; the ratio says what the matched comparison adds.

Run: ``python benchmarks/bench_fair_comparison.py [--steps S] [--seeds S] [--n 128,8192]``
(shorter settings for a quick look; the target applies to the full settings).
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import REPO, Row, fmt_time, header, print_table

CONFIG = REPO / "fgrpo_theory" / "sim" / "presets" / "fig2-logprob-adam.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--n", type=str, default="128,8192,32768")
    args = ap.parse_args(argv)

    import numba

    from fgrpo_theory.fair import run_comparison
    from fgrpo_theory.sim import expand_grid, load_sweep, run_sweep, simulate

    sweep = {k: v for k, v in load_sweep(CONFIG).items() if k not in ("N", "gamma")}
    ns = [int(x) for x in args.n.split(",")]
    (base,) = expand_grid(sweep)  # (the preset's rewards = [R_c, R_w] key needs expand_grid)
    base = base.replace(gamma=1.0, steps=args.steps, seeds=args.seeds, pass_k=(1,))
    header(
        f"matched comparison: N = {ns}, 4 arms x {args.seeds} seeds x {args.steps} steps, "
        f"K = {base.K:,}, {numba.get_num_threads()} Numba threads"
    )
    simulate(base.replace(steps=2, N=2, K=1000, logits=None, correct=10, subsets={}))  # compile

    t0 = time.perf_counter()
    run_sweep([base.replace(N=N, gamma=g) for N in ns for g in (0.0, 1.0)], progress=False)
    ref = time.perf_counter() - t0

    rows_n = []
    t0 = time.perf_counter()
    for N in ns:
        t1 = time.perf_counter()
        cfg = base.replace(N=N)
        res = run_comparison(cfg, ("m", "progress"), seeds=args.seeds, thresholds=(0.9, 0.95, 0.98))
        pm = res.attrs["progress_match"]
        rows_n.append((N, time.perf_counter() - t1, pm))
    wall = time.perf_counter() - t0
    full = args.steps == 1000 and args.seeds == 16 and ns == [128, 8192, 32768]

    rows = [
        Row(
            f"reference: fixed-step sweep, {len(ns)} N x 2 gammas x {args.seeds} seeds",
            fmt_time(ref),
        ),
        Row(
            "matched comparison (4 arms, progress search, kernel threshold metrics)",
            fmt_time(wall),
            "<= 180 s" if full else "(full settings only)",
            f"{wall / ref:.1f}x the fixed-step sweep",
            wall <= 180.0 if full else None,
        ),
    ]
    for N, dt, pm in rows_n:
        rows.append(
            Row(
                f"  N={N}: {len(pm['evaluations'])} search evaluations, matched "
                f"{pm['achieved']:.4f} vs {pm['target']:.4f} (tol {pm['q_tol']:g}), "
                f"monotone {pm['monotone']}",
                fmt_time(dt),
            )
        )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
