"""The full Fig. 2 sweep of the paper: N = 2, 4, ..., 131,072; gamma 0 and 1; 4 seeds; 1,000 steps.

Target (issue 4, Speed): at most 2 minutes on the 2-core machine. The sweep is run once through
the simulator's own API exactly as a user would (``load_sweep`` of
the preset ``fig2-linear-adamw`` (``fgrpo_theory/sim/presets/``), the issue's speed setting, then
``run_sweep`` writing one Parquet file per config into a temporary folder, Numba's default threads
= all cores); the wall time per config is recorded through ``run_sweep``'s executor hook.

Reference, measured in the same run: the idiomatic PyTorch loop (``reference_torch.run_linear``,
1 thread) timed for a few steps at every N; its sweep time is ESTIMATED as
``sum over configs of 4 seeds x 1,000 steps x time per step`` divided by 2 (two cores used
perfectly by two processes). Without torch the NumPy reference is used the same way.

Run: ``python benchmarks/bench_fig2_sweep.py [--config FILE.toml] [--steps S]`` (``--steps``
shortens the sweep for a quick look; the target applies to the full 1,000 steps). This is the only
long benchmark (about 1-2 minutes).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import (
    REPO,
    RefWorker,
    Row,
    fmt_time,
    header,
    load_module,
    measure_many,
    parallel_headroom,
    print_table,
)

DEFAULT_CONFIG = REPO / "fgrpo_theory" / "sim" / "presets" / "fig2-linear-adamw.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=None, help="override steps (quick look)")
    ap.add_argument("--ref-steps", type=int, default=5, help="reference steps timed per N")
    args = ap.parse_args(argv)

    import numba

    from fgrpo_theory.sim import expand_grid, load_sweep, run_sweep, simulate

    sweep = load_sweep(args.config)
    if args.steps is not None:
        sweep["steps"] = args.steps
    configs = expand_grid(sweep)
    steps = configs[0].steps
    header(
        f"Fig. 2 sweep: {args.config.name}, {len(configs)} configs x {configs[0].seeds} seeds x "
        f"{steps} steps, {numba.get_num_threads()} Numba threads"
    )
    simulate(configs[0].replace(steps=2, N=2, K=1000, logits=None, correct=10, subsets={}))

    per_config: list[tuple[int, float, float]] = []

    def timed_executor(fn, cfgs):
        for cfg in cfgs:
            t0 = time.perf_counter()
            df = fn(cfg)
            per_config.append((cfg.N, cfg.gamma, time.perf_counter() - t0))
            yield df

    with tempfile.TemporaryDirectory(prefix="fgrpo-fig2-") as out:
        t0 = time.perf_counter()
        df = run_sweep(configs, out_dir=out, resume=False, executor=timed_executor)
        wall = time.perf_counter() - t0
        n_files = len(list(Path(out).glob("*.parquet")))

    # reference: per-step time of the same loop at every N, one thread, in a clean subprocess
    rt = load_module("reference_torch")
    cfg0 = configs[0]
    from fgrpo_theory.sim.config import parse_index_set, parse_logits

    z0 = parse_logits(cfg0.logits, cfg0.K)
    correct = np.zeros(cfg0.K, dtype=bool)
    correct[parse_index_set(cfg0.correct, cfg0.K, "correct")] = True
    if rt.AVAILABLE:
        ref_module, ref_name = "reference_torch", "pytorch (1 thread)"
    else:
        print("# torch is not installed: the NumPy reference is used for the estimate")
        ref_module, ref_name = "reference_numpy", "numpy"
    if cfg0.rule != "linear":
        print(f"# note: the reference implements the linear rule; the config uses {cfg0.rule!r}")
    ref_step = {}
    with RefWorker(torch_threads=1) as worker:
        for N in sorted({c.N for c in configs}):
            fn = worker.timed(
                ref_module, "run_linear", z0, correct, N, args.ref_steps, cfg0.lr,
                optimizer=cfg0.optimizer, weight_decay=cfg0.weight_decay,
            )  # fmt: skip
            ref_step[N] = measure_many([fn], repeats=2)[0].cpu / args.ref_steps
    ref_total = sum(c.seeds * c.steps * ref_step[c.N] for c in configs) / 2.0
    headroom = parallel_headroom(2)
    print(
        f"# right now 2 Numba threads run a trivially parallel loop {headroom:.2f}x faster than 1 "
        "(about 2 on an idle 2-core machine)"
    )

    rows = [
        Row(
            f"{ref_name} sweep, estimated",
            fmt_time(ref_total),
            "",
            f"from {args.ref_steps} timed steps per N (CPU time), / 2 cores",
        ),
        Row(
            f"simulator: run_sweep, {len(configs)} configs ({len(df)} rows, {n_files} files)",
            fmt_time(wall),
            "<= 120 s" if steps == 1000 else "(full sweep only)",
            f"{ref_total / wall:.1f}x {ref_name} estimate",
            wall <= 120.0 if steps == 1000 else None,
        ),
    ]
    for N in sorted({n for n, _, _ in per_config}):
        t = sum(dt for n, _, dt in per_config if n == N)
        rows.append(
            Row(
                f"  N={N}: both gammas, {cfg0.seeds} seeds",
                fmt_time(t),
                "",
                f"{t / (2 * cfg0.seeds * steps) * 1e3:.3f} ms wall per seed-step",
            )
        )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
