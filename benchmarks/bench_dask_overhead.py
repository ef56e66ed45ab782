"""Overhead of running a simulator sweep on a Dask LocalCluster, against local runs.

The same 16-configuration sweep (the paper's Fig. 2 policy, K = 128,000 actions, Adam, 2,000
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

Usage: ``python benchmarks/bench_dask_overhead.py [--workers 2] [--steps 2000] [--repeat 1]``
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
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=1, help="timed runs of each; the best is kept")
    args = ap.parse_args()

    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    import pandas as pd

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
    print(f"sweep: {n} configurations, K = 128,000, {args.steps} steps; workers: {W}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
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

    # 1. local, sequential, one Numba thread (the reference results and compute time)
    _warm()
    for r in range(args.repeat):
        timed_sweep("sequential", lambda fn, cfgs: map(fn, cfgs), r)

    # 2. a plain process pool of W processes: the same parallelism without Dask
    with ProcessPoolExecutor(W, mp_context=mp.get_context("spawn"), initializer=_warm) as pool:
        list(pool.map(time.sleep, [0.5] * W))  # start all W processes (each runs _warm)
        for r in range(args.repeat):
            timed_sweep("process-pool", pool.map, r)

    # 3. the Dask LocalCluster
    t0 = time.perf_counter()
    with DaskExecutor(f"local-cluster:{W}", threads_per_task=1) as ex:
        startup = ex.startup_seconds
        t1 = time.perf_counter()
        pids = ex.client.run(_warm)  # every worker: import + load the cached kernels
        warmup = time.perf_counter() - t1
        for r in range(args.repeat):
            timed_sweep("dask", ex, r)
    session = time.perf_counter() - t0

    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    S = runs["sequential"][1]
    print(f"\n{'run':<22}{'wall s':>9}{'compute s':>11}{'speed-up':>10}"
          f"{'overhead/task':>15}{'vs sequential':>15}")  # fmt: skip
    for name, (wall, comp) in runs.items():
        k = 1 if name == "sequential" else W
        label = name if name == "sequential" else f"{name} x{W}"
        own = (k * wall - comp) / comp  # worker time not spent computing, per unit of compute
        vs_seq = (k * wall - S) / S  # as above, against the sequential run's compute time
        print(f"{label:<22}{wall:9.2f}{comp:11.2f}{S / wall:9.2f}x"
              f"{100 * own:14.2f}%{100 * vs_seq:14.2f}%")  # fmt: skip
    T, Tp = runs["dask"][0], runs["process-pool"][0]
    print(f"\nmean task compute (sequential): {S / n:.3f} s")
    print(f"dask wall / process-pool wall:  {T / Tp:.3f}")
    print(f"cluster start-up:               {startup:.2f} s")
    print(f"worker warm-up (import + jit cache): {warmup:.2f} s on {len(pids)} workers")
    print(f"cluster session total:          {session:.2f} s")
    print("dask and process-pool results identical to the local run (DataFrame, Parquet): True")


if __name__ == "__main__":
    main()
