"""The sequence rung at two thread counts: how far the numbers move, and whether a conclusion does.

For task draws 0..D-1 (``seed = d`` sets the task, the weights, the SFT data and the RL streams),
runs the ``quick`` preset whole (SFT without the cache, then 40 GRPO steps, exact evaluation at
steps 0 and 40; the preset's step-20 evaluation is skipped, which changes no number) at 1 and at
2 torch threads, and prints

1. per metric and split, at step 0 (the SFT model) and at the last step, the max and median over
   draws of |2 threads - 1 thread|, next to the draw-to-draw spread (the standard deviation over
   draws at 1 thread): how large a thread count's rounding is against a new task draw;
2. the rung's conclusions about GRPO that these runs can test (last step minus step 0, held-out
   and train: pass@1 rises, pass@256 (held-out only: 1 throughout on train prompts) and rare
   coverage@256 fall, the rare NLL rises), at each
   thread count: the median over draws with its 95 % bootstrap interval over draws (S = 1 seed,
   :func:`fgrpo_theory.fair.two_level_interval`) and the draws with a positive difference; the
   conclusion is the interval's side of 0 (above, below, across), and the last column says
   whether the two thread counts give the same one.

Not a timing benchmark; the table of docs/sequence.md ("Reproducibility"). Run with
``OMP_WAIT_POLICY=PASSIVE`` on a shared machine (idle OpenMP threads then sleep instead of spin;
the numbers do not change):

    OMP_WAIT_POLICY=PASSIVE python benchmarks/sequence_threads.py --draws 8
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

METRICS = ("pass_at_1", "pass_at_16", "pass_at_256", "coverage_at_256", "rare_nll", "entropy")
#: (metric, the direction the rung reports for GRPO against the SFT start)
CONCLUSIONS = (("pass_at_1", "rises"), ("pass_at_256", "falls"), ("coverage_at_256", "falls"),
               ("rare_nll", "rises"))  # fmt: skip


def runs(draws: int, threads=(1, 2), save: str | None = None) -> pd.DataFrame:
    """The rows of steps 0 and last of every (draw, thread count); with ``save``, the rows so far
    are rewritten to that parquet file after each run (``--report`` reads a partial file)."""
    from fgrpo_theory.sequence.run import preset, run_sequence

    out = []
    for d in range(draws):
        for t in threads:
            t0 = time.perf_counter()
            cfg = preset("quick", seed=d, threads=t, log_every=40)  # no step-20 evaluation
            df = run_sequence(cfg, cache=False)
            last = df["step"].max()
            df = df[df["step"].isin([0, last])].assign(draw=d, threads=t)
            out.append(df)
            print(f"# draw {d}, {t} thread(s): {time.perf_counter() - t0:.0f} s", flush=True)
            if save:
                pd.concat(out, ignore_index=True).to_parquet(save)
    return pd.concat(out, ignore_index=True)


def side(lo: float, hi: float) -> str:
    return "above 0" if lo > 0 else ("below 0" if hi < 0 else "across 0")


def report(df: pd.DataFrame) -> None:
    from fgrpo_theory.fair import two_level_interval

    both = df.groupby("draw")["threads"].nunique()
    df = df[df.draw.isin(both[both == 2].index)]  # draws run at both thread counts
    last = df["step"].max()
    key = ["draw", "split", "step"]
    one = df[df.threads == 1].set_index(key).sort_index()
    two = df[df.threads == 2].set_index(key).sort_index()
    print(f"\n{df.draw.nunique()} draws, quick preset, GRPO, steps 0 and {last}: "
          "|2 threads - 1 thread| against the draw-to-draw spread")  # fmt: skip
    print("| split | step | metric | max abs diff | median abs diff | sd over draws (1 thread) |")
    print("|---|---|---|---|---|---|")
    for split in ("train", "test"):
        for step in (0, last):
            a = one.xs((split, step), level=("split", "step"))
            b = two.xs((split, step), level=("split", "step"))
            for m in METRICS:
                diff = (b[m] - a[m]).abs()
                print(f"| {split} | {step} | {m} | {diff.max():.4f} | {diff.median():.4f} | "
                      f"{a[m].std(ddof=1):.4f} |")  # fmt: skip
    print(f"\nConclusions: step {last} minus step 0 per draw; median [95 % interval over draws] "
          "(draws up), at 1 and at 2 threads")  # fmt: skip
    print("| split | metric | rung says | 1 thread | 2 threads | same conclusion |")
    print("|---|---|---|---|---|---|")
    for split in ("test", "train"):
        for m, says in CONCLUSIONS:
            if (split, m) == ("train", "pass_at_256"):
                continue  # 1 at both steps on train prompts (saturated): no conclusion to test
            cells, sides = [], []
            for t in (one, two):
                e = t.xs(split, level="split")
                d = (e.xs(last, level="step")[m] - e.xs(0, level="step")[m]).to_numpy()
                est, lo, hi = two_level_interval(d[:, None], np.zeros((len(d), 1)))
                cells.append(f"{est:+.4f} [{lo:+.4f}, {hi:+.4f}] ({(d > 0).sum()}/{len(d)})")
                sides.append(side(lo, hi))
            same = "yes" if sides[0] == sides[1] else f"NO ({sides[0]} / {sides[1]})"
            print(f"| {split} | {m} | {says} | {cells[0]} | {cells[1]} | {same} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--save", default=None, help="write the rows to this parquet file")
    ap.add_argument("--report", default=None, help="only print the report of a saved file")
    a = ap.parse_args()
    report(pd.read_parquet(a.report) if a.report else runs(a.draws, save=a.save))


if __name__ == "__main__":
    main()
