"""The whole population arena of issue 22 (Speed) against its arms without matching, same run.

Arena: ``experiments/arena_population.py`` with its declared parameters (every available arm x
coefficient x 4 settings x 16 population draws x 4 seeds x 300 steps, the per-draw progress
searches included), in 2 worker processes. Target: <= 15 minutes on an idle 2-core machine.
The machine these numbers come from is shared, so the script prints the wall time it measured,
the load average before and after, and the CPU time of this process and of its worker processes
(``RUSAGE_CHILDREN``); CPU time / 2 is what two idle cores would need at perfect balance (the
pool hands out one (setting, draw) task at a time, 64 tasks for 2 workers).

Reference, measured in the same run: the same arms, settings and draws with no progress search
(each arm trained once): the ratio says what the matched controls add.

Run: ``python benchmarks/bench_arena.py [--draws D] [--settings shared-sgd,...] [--steps S]``
(smaller settings for a quick look; the target applies to the declared parameters only).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sys
import time

from _common import REPO, Row, fmt_time, header, print_table


def _cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--settings", type=str, default=None)
    ap.add_argument("--steps", type=int, default=None)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")

    from experiments import arena_population as ap_mod
    from fgrpo_theory.population.arena import arena_arms, missing_reason, population_arms
    from fgrpo_theory.population.draws import compare_arms_task, map_configs

    p = ap_mod.PARAMS
    ch = {}
    if args.draws is not None:
        ch["population_seeds"] = tuple(range(args.draws))
    if args.settings is not None:
        ch["settings"] = tuple(args.settings.split(","))
    if args.steps is not None:
        ch["steps"] = args.steps
    params = dataclasses.replace(p, **ch)
    full = params == p
    header(
        f"population arena: {len(params.settings)} settings x {len(params.population_seeds)} "
        f"draws x {params.seeds} seeds x {params.steps} steps, {ap_mod.WORKERS} workers"
    )
    load0 = os.getloadavg()

    # reference: every available arm trained once per (setting, draw), no progress search
    tasks = []
    for base in ap_mod._bases(params, False).values():
        ok = [a for a in arena_arms() if not missing_reason(a, base, params.compute_budget)]
        arms = tuple(population_arms(ok, base, params.compute_budget))
        tasks += [(base.replace(population_seed=d), arms, "ref") for d in params.population_seeds]
    c0, t0 = _cpu(), time.perf_counter()
    map_configs(compare_arms_task, tasks, workers=ap_mod.WORKERS, kw=dict(match=False))
    ref_wall, ref_cpu = time.perf_counter() - t0, _cpu() - c0

    c0, t0 = _cpu(), time.perf_counter()
    df = ap_mod.compute(params)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    load1 = os.getloadavg()
    n_arms = df.loc[df["table"] == "runs", "arm"].nunique()
    ctl = df[(df["table"] == "runs") & (df["role"] == "control") & (df["split"] == "train")]
    per = ctl.groupby(["setting", "population_seed", "arm"])["evaluations"].first()
    rows = [
        Row(f"load average (1 min) before / after: {load0[0]:.1f} / {load1[0]:.1f}", ""),
        Row(f"reference: {n_arms} arms once per (setting, draw), no search", fmt_time(ref_wall)),
        Row("reference: CPU time (this process + workers)", fmt_time(ref_cpu)),
        Row(
            f"arena: {n_arms} arms with per-draw progress searches, wall (loaded machine)",
            fmt_time(wall),
            "",
            f"{wall / ref_wall:.1f}x the reference",
        ),  # fmt: skip
        Row("arena: CPU time (this process + workers)", fmt_time(cpu), "", f"{cpu / ref_cpu:.1f}x"),
        Row(
            "arena: idle 2-core estimate = CPU time / 2",
            fmt_time(cpu / 2),
            "<= 900 s" if full else "(declared params only)",
            "",
            (cpu / 2 <= 900.0) if full else None,
        ),  # fmt: skip
        Row(f"search evaluations per arm and draw: median {per.median():.0f}, max {per.max()}", ""),
    ]
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
