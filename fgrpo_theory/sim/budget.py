"""Cost model of the simulator: estimated time, output and working memory of a :class:`SimConfig`.

:func:`check_budget` refuses, before anything is allocated or looped over, a config whose output
or working memory exceeds the memory this machine has available, or whose estimated time is beyond
:data:`MAX_SECONDS`, with one line naming the option to change and the bound.
:func:`plan_chunks` splits a run into batches of runs (bounded working memory) and chunks of steps
(bounded time between returns to Python, where Ctrl-C and progress are handled).

The constants are rough single-core rates measured on the development machine (2 cores); they
decide refusals only when a run is orders of magnitude beyond the bound, and the chunk length,
which never changes a number.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import SimConfig

__all__ = [
    "Estimate",
    "estimate",
    "check_budget",
    "available_memory",
    "plan_chunks",
    "MAX_SECONDS",
]

#: Seconds per action per optimizer step of one run on one core: the dense path's O(K) passes
#: (exp, max, optimizer update) cost about 7 ns per logit.
SECONDS_PER_ACTION = 7e-9
#: Seconds per sampled response per optimizer step of one run (a draw and its bookkeeping).
SECONDS_PER_SAMPLE = 2e-8
#: Longest estimated run accepted: 30 days on every thread of the machine.
MAX_SECONDS = 30 * 86400.0
#: Bytes per output row besides the metric columns: run/prompt/seed_index/step, the ~21 config
#: columns (one 8-byte slot each; strings are shared objects) and pandas' overhead.
ROW_BYTES_FIXED = 8 * 32
#: The output is built from the kernels' float64 array, a flattened copy and the DataFrame:
#: peak memory is about this many times the DataFrame's own size.
OUTPUT_PEAK_FACTOR = 3
#: Target wall time of one kernel call (one chunk of steps): Ctrl-C is honoured within about this.
CHUNK_SECONDS = 0.5
#: Working memory a batch of runs may take (state carried between chunks); more runs than fit in
#: it are simulated in successive batches.
BATCH_BYTES = 256 * 2**20
#: Below SimConfig's default log_every, an oversized output is blamed on log_every, else on steps.
_DEFAULT_LOG_EVERY = 10


@dataclass(frozen=True)
class Estimate:
    """Estimated cost of one config (all runs)."""

    seconds: float  # single core
    rows: int  # output rows (runs x logged steps)
    output_bytes: int  # peak memory while the output is built
    run_bytes: int  # working memory of one run (state + scratch)


def _n_log(cfg: SimConfig) -> int:
    if cfg.log_steps is not None:
        return len(cfg.log_steps)
    return cfg.steps // cfg.log_every + 2  # an upper bound (0, every log_every, the last)


def _run_bytes(cfg: SimConfig) -> int:
    adam = cfg.optimizer != "sgd"
    # z, e, cvec, cum, ibuf, cnt (6 K) + Adam moments (2 K) + the sum tree (<= 4 K) + N draws
    return 8 * (cfg.K * (6 + 2 * adam + 4) + 3 * min(cfg.N, cfg.K) + cfg.N)


def _redraws(cfg: SimConfig) -> int:
    """Largest number of dynamic-sampling redraws in one step (0 with the filter off)."""
    return 0 if cfg.dynamic_sampling == "off" else cfg.max_resamples


def estimate(cfg: SimConfig) -> Estimate:
    """Estimated single-core seconds, output rows and bytes, and per-run working bytes."""
    per_step = cfg.inner_updates * (SECONDS_PER_ACTION * cfg.K + SECONDS_PER_SAMPLE * cfg.N)
    # dynamic sampling may redraw a group up to max_resamples times a step: the worst case
    per_step += _redraws(cfg) * SECONDS_PER_SAMPLE * cfg.N
    rows = cfg.n_runs * _n_log(cfg)
    n_sub = len(cfg.subsets)
    # q_pos, m_ret, entropy, groups, active_frac, resamples, kept_active; per subset mass,
    # tail_miss, nll, nll_rise, kept_tail_miss; pass@k
    n_cols = 7 + 5 * n_sub + len(cfg.pass_k)
    out_bytes = OUTPUT_PEAK_FACTOR * rows * (ROW_BYTES_FIXED + 8 * n_cols)
    # the threshold table: a row per run and threshold (step, reached, 4 + 3 n_sub metrics)
    thr_rows = cfg.n_runs * len(cfg.thresholds)
    out_bytes += OUTPUT_PEAK_FACTOR * thr_rows * (ROW_BYTES_FIXED + 8 * (6 + 3 * n_sub))
    return Estimate(cfg.n_runs * cfg.steps * per_step, rows, out_bytes, _run_bytes(cfg))


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(b: float) -> str:
    return f"{b / 2**30:.3g} GiB"


def check_budget(cfg: SimConfig, threads: int = 1, memory: int | None = None) -> Estimate:
    """Refuse ``cfg`` (ValueError naming the option and the bound) if it cannot fit or finish.

    ``memory`` overrides :func:`available_memory` (bytes). Returns the :class:`Estimate`.
    """
    from .._validate import fail

    est = estimate(cfg)
    mem = available_memory() if memory is None else memory
    if mem is not None:
        if est.output_bytes > mem:
            if _n_log(cfg) < cfg.n_runs:
                name, value = "seeds", cfg.seeds
            elif cfg.log_steps is None and cfg.log_every < _DEFAULT_LOG_EVERY:
                name, value = "log_every", cfg.log_every
            else:
                name, value = "steps", cfg.steps
            fail(
                name,
                value,
                f"an output that fits in memory ({est.rows:.3g} rows need about "
                f"{_gib(est.output_bytes)}; {_gib(mem)} available)",
            )
        if est.run_bytes * max(1, threads) > mem:
            name, value = ("K", cfg.K) if cfg.K >= cfg.N else ("N", cfg.N)
            fail(
                name,
                value,
                f"runs that fit in memory ({_gib(est.run_bytes)} per run x {threads} threads; "
                f"{_gib(mem)} available)",
            )
    limit = MAX_SECONDS * max(1, threads)
    if est.seconds > limit:
        factors = {
            "steps": cfg.steps,
            "seeds": cfg.n_runs,
            "K": cfg.K * SECONDS_PER_ACTION / SECONDS_PER_SAMPLE,
            "N": cfg.N,
            "max_resamples": _redraws(cfg),
        }
        name = max(factors, key=factors.get)
        fail(
            name,
            getattr(cfg, name),
            f"a run that can finish: estimated {est.seconds:.3g} s of compute > "
            f"{MAX_SECONDS / 86400:.0f} days on {threads} thread(s)",
        )
    return est


def plan_chunks(cfg: SimConfig, threads: int, chunk_steps: int | None = None) -> tuple[int, int]:
    """``(runs per batch, steps per chunk)`` for ``cfg`` on ``threads`` threads.

    A batch holds as many runs as fit in :data:`BATCH_BYTES` (at least one per thread); a chunk
    is about :data:`CHUNK_SECONDS` of work, or ``chunk_steps`` if given.
    """
    threads = max(1, threads)
    est = estimate(cfg)
    R = cfg.n_runs
    batch = max(threads, BATCH_BYTES // max(est.run_bytes, 1))
    batch = int(min(R, batch))
    if chunk_steps is not None:
        if int(chunk_steps) < 1:
            from .._validate import fail

            fail("chunk_steps", chunk_steps, ">= 1")
        return batch, int(chunk_steps)
    per_step = est.seconds / max(R * cfg.steps, 1) * max(1, -(-batch // threads))
    chunk = int(min(cfg.steps, max(1, CHUNK_SECONDS // max(per_step, 1e-12))))
    return batch, chunk
