"""Overhead of running a simulator sweep on a Dask LocalCluster, against local runs.

The same 16-configuration sweep (the paper's Fig. 2 policy, K = 128,000 actions, Adam, 3,000
steps: about a second per configuration) runs three ways, one Numba thread per task in all:

* ``sequential``: locally, one configuration after another (the reference results);
* ``process-pool xW``: a plain ``ProcessPoolExecutor`` of W processes plugged into the same
  ``run_sweep`` hook: the same parallelism without Dask;
* ``dask xW``: a ``local-cluster:W`` (W worker processes, one thread each), timed after the
  cluster is up and every worker has imported the package and loaded the cached kernels
  (start-up and warm-up are reported separately).

Each task also measures its own compute time on the worker. For a run of wall time ``T`` on W
workers whose tasks computed for ``C`` seconds in total, the overhead per task is the worker time
not spent computing, relative to the compute: ``(W * T - C) / C`` (target for Dask: under 5% with
tasks of a second or more). ``vs sequential`` uses the sequential run's compute time ``S`` instead
of ``C``, so it also counts tasks running slower when W of them share the machine (memory
bandwidth, other processes). The load average is printed before and after: on a shared machine
other processes inflate every parallel wall time. All runs must give identical DataFrames and
identical Parquet files; the script checks it.

The three are interleaved (sequential, pool, dask, sequential, ...) and the best of ``--repeat``
rounds is kept, as in the other benchmarks (see ``benchmarks/README.md``).

Usage: ``python benchmarks/bench_dask_overhead.py [--workers 2] [--steps 3000] [--repeat 2]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _warm(threads: int = 1) -> int:
    """Import the simulator and load (or compile) its kernels in this process."""
    from fgrpo_theory.sim import SimConfig, simulate

    simulate(SimConfig(K=128, N=8, steps=2, seeds=2), threads=threads)
    return os.getpid()


def _timed(cfg):
    """One task: ``run_one(cfg)`` with one Numba thread, and its compute time on the worker."""
    from fgrpo_theory.distributed import limit_numba_threads
    from fgrpo_theory.sim import run_one

    limit_numba_threads(1)
    t0 = time.perf_counter()
    df = run_one(cfg)
    return df, time.perf_counter() - t0


class _Timing:
    """run_sweep executor adapter: runs ``_timed`` through ``submit_all`` and keeps the times."""

    def __init__(self, submit_all):
        self.submit_all = submit_all
        self.compute: list[float] = []

    def __call__(self, fn, cfgs):
        for df, dt in self.submit_all(_timed, cfgs):
            self.compute.append(dt)
            yield df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=2, help="interleaved rounds; the best is kept")
    args = ap.parse_args()

    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    import pandas as pd
    from _common import Row, header, parallel_headroom, print_table

    from fgrpo_theory.distributed import DaskExecutor
    from fgrpo_theory.sim import expand_grid, run_sweep

    sweep = {
        "K": 128_000,
        "logits": "5.0x1,3.0x9999,0.0x118000",
        "correct": 10_000,
        "optimizer": "adam",
        "lr": 0.01,
        "steps": args.steps,
        "log_every": 50,
        "N": [64, 256, 1024, 4096],
        "gamma": [0.0, 1.0],
        "seed": [0, 1],
    }
    configs = expand_grid(sweep)
    n = len(configs)
    W = args.workers
    header(
        f"Dask overhead: {n}-configuration sweep (K = 128,000, Adam, {args.steps} steps), "
        f"local-cluster:{W} vs sequential and a {W}-process pool, 1 Numba thread per task"
    )
    _warm()
    print(f"# parallel headroom now (2 Numba threads vs 1): {parallel_headroom(2):.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-dask-"))
    runs: dict[str, tuple[float, float]] = {}  # name -> (wall, summed compute), best wall
    reference: dict[str, object] = {}  # the first sequential run's DataFrame and file digests

    def timed_sweep(name: str, submit_all, r: int) -> None:
        adapter = _Timing(submit_all)
        out = tmp / f"{name}-{r}"
        t0 = time.perf_counter()
        df = run_sweep(configs, out, executor=adapter, progress=False)
        wall = time.perf_counter() - t0
        if not reference:
            reference.update(df=df, files=_digests(out))
        pd.testing.assert_frame_equal(df, reference["df"], check_exact=True)
        assert _digests(out) == reference["files"]
        if name not in runs or wall < runs[name][0]:
            runs[name] = (wall, sum(adapter.compute))

    ctx = mp.get_context("spawn")
    with (
        ProcessPoolExecutor(W, mp_context=ctx, initializer=_warm) as pool,
        DaskExecutor(f"local-cluster:{W}", threads_per_task=1) as ex,
    ):
        list(pool.map(time.sleep, [0.5] * W))  # start all W pool processes (each runs _warm)
        startup = ex.startup_seconds
        t1 = time.perf_counter()
        n_warm = len(ex.client.run(_warm))  # every worker: import + load the cached kernels
        warmup = time.perf_counter() - t1
        for r in range(args.repeat):  # interleaved, so all three see the same background load
            timed_sweep("sequential", lambda fn, cfgs: map(fn, cfgs), r)
            timed_sweep("pool", pool.map, r)
            timed_sweep("dask", ex, r)

    (T_s, S), (T_p, C_p), (T_d, C_d) = runs["sequential"], runs["pool"], runs["dask"]
    over_d = (W * T_d - C_d) / C_d  # worker time not spent computing, per unit of compute
    over_p = (W * T_p - C_p) / C_p
    rows = [
        Row("sequential, 1 thread: wall (task compute)", f"{T_s:.2f} s ({S:.2f} s)"),
        Row("mean task compute, sequential", f"{S / n:.3f} s"),
        Row(f"process pool x{W}: wall (task compute)", f"{T_p:.2f} s ({C_p:.2f} s)", "",
            f"speed-up {T_s / T_p:.2f}x"),
        Row(f"local-cluster:{W}: wall (task compute)", f"{T_d:.2f} s ({C_d:.2f} s)", "",
            f"speed-up {T_s / T_d:.2f}x; {T_d / T_p:.3f}x pool wall"),
        Row("dask overhead per task, (W*T - C)/C", f"{100 * over_d:.2f} %", "< 5 %",
            f"pool: {100 * over_p:.2f} %", over_d < 0.05),
        Row("dask vs sequential compute, (W*T - S)/S", f"{100 * (W * T_d - S) / S:.2f} %", "",
            f"pool: {100 * (W * T_p - S) / S:.2f} %"),
        Row("cluster start-up", f"{startup:.2f} s"),
        Row(f"worker warm-up (import + Numba cache), {n_warm} workers", f"{warmup:.2f} s"),
        Row("results identical to sequential (DataFrame, Parquet bytes)", "yes"),
    ]  # fmt: skip
    print_table(rows)


if __name__ == "__main__":
    main()
