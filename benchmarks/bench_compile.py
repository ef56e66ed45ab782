"""Numba compilation: cold and warm start of the simulator.

Each measurement runs in a fresh Python subprocess with ``NUMBA_CACHE_DIR`` pointing at a
temporary folder: the first subprocess finds the folder empty (cold: every kernel is compiled and
written to the cache), the following ones reuse it (warm: kernels are loaded from the cache). Times
reported: ``import fgrpo_theory.sim``, the first ``simulate`` call of a tiny dense-path config
(log-prob GRPO, SGD), then the first call of a sum-tree config (another specialization) and of a
dense linear/AdamW config (K = 1,000: the general dense loop, with its Adam code; the rule is a
runtime switch, the optimizer SGD-or-not a compile-time one), and the
subprocess's total wall time. The reference for the ratio is the cold start: warm is expected to
be much faster. ``import fgrpo_theory`` alone must not import
Numba; that is checked and printed too. Issue 27's target: the import and first ``simulate`` of
a process with an empty cache under 5 s; the cold child also prints where that compilation went
(Numba's per-kernel pipeline stages). The CPU time printed is the process's own, plus that of
the helper process that compiles the metrics pass beside it on a cold start
(``fgrpo_theory/sim/beside.py``). Shown too, not judged: the import and first
``simulate_population`` of the default population config in a fresh process with its own empty
cache (the population kernel's cold start).

Run: ``python benchmarks/bench_compile.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from _common import REPO, Row, fmt_time, header, print_table

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import fgrpo_theory
numba_loaded_by_package = "numba" in sys.modules
t1 = time.perf_counter()
from fgrpo_theory.sim import SimConfig, simulate
t2 = time.perf_counter()
c2 = time.process_time()
simulate(SimConfig(K=6, N=8, steps=10, seeds=2, rule="logprob", optimizer="sgd",
                   backend="dense"))
t3 = time.perf_counter()
dense_cpu = time.process_time() - c2
# the helper process that compiled the metrics pass beside the run loop (sim/beside.py), if any
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
helper_cpu = ru.ru_utime + ru.ru_stime
# where the first simulate's compilation went: Numba's own pipeline times per kernel (seconds
# of wall time, nested compilations included in their caller's type inference)
import numba
from fgrpo_theory.sim import kernels, kmetrics, kcore, ksmall, kthresh, sumtree
stages = {}
for mod in (kernels, kmetrics, kcore, ksmall, kthresh, sumtree):
    for name in dir(mod):
        d = getattr(mod, name)
        if isinstance(d, numba.core.dispatcher.Dispatcher) and d.py_func.__module__ == mod.__name__:
            for cres in d.overloads.values():
                for pl in (cres.metadata or {}).get("pipeline_times", {}).values():
                    for k, v in pl.items():
                        key = name + ": " + k.split("_", 1)[1]
                        stages[key] = stages.get(key, 0.0) + v.run
simulate(SimConfig(K=20000, logits="1.0x1,0.0x19999", correct=100, N=8, steps=10, seeds=2,
                   rule="logprob", optimizer="sgd", backend="sumtree"))
t4 = time.perf_counter()
simulate(SimConfig(K=1000, correct=100, N=8, steps=10, seeds=2, rule="linear",
                   advantage="dr-grpo", optimizer="adamw"))
t5 = time.perf_counter()
print(json.dumps(dict(import_pkg=t1 - t0, import_sim=t2 - t1, dense=t3 - t2, tree=t4 - t3,
                      adamw=t5 - t4, numba_loaded_by_package=numba_loaded_by_package,
                      dense_cpu=dense_cpu, helper_cpu=helper_cpu, stages=stages)))
"""

CHILD_POP = r"""
import json, time
t0 = time.perf_counter()
from fgrpo_theory.population import PopulationConfig, simulate_population
simulate_population(PopulationConfig())
print(json.dumps(dict(population=time.perf_counter() - t0, cpu=time.process_time())))
"""


def run_child(cache_dir: str, child: str = CHILD) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", child], env=env, cwd=REPO, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        raise RuntimeError("the benchmark subprocess failed")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def main() -> int:
    header("Numba compilation: cold (empty NUMBA_CACHE_DIR) and warm (cached) start, subprocesses")
    with tempfile.TemporaryDirectory(prefix="fgrpo-numba-cache-") as cache:
        cold = run_child(cache)
        warms = [run_child(cache) for _ in range(3)]
    with tempfile.TemporaryDirectory(prefix="fgrpo-numba-cache-") as cache:
        pop = run_child(cache, CHILD_POP)
    skip = ("numba_loaded_by_package", "stages")
    warm = {k: min(w[k] for w in warms) for k in warms[0] if k not in skip}
    keys = [
        ("import_sim", "import fgrpo_theory.sim"),
        ("dense", "first simulate(): dense path (log-prob, SGD)"),
        ("tree", "then first sum-tree simulate()"),
        ("adamw", "then dense linear/AdamW (general dense loop)"),
        ("wall", "whole subprocess (python start to exit)"),
    ]
    rows = []
    for k, label in keys:
        rows.append(Row(f"cold: {label}", fmt_time(cold[k])))
    for k, label in keys:
        ratio = f"cold / warm = {cold[k] / warm[k]:.0f}x" if k in ("dense", "tree", "wall") else ""
        rows.append(Row(f"warm: {label}", fmt_time(warm[k]), "", ratio))
    first = cold["import_sim"] + cold["dense"]
    rows.append(
        Row(
            "cold: import + first simulate() (issue 27)",
            f"{fmt_time(first)} (CPU {fmt_time(cold['dense_cpu'])}"
            f" + helper {fmt_time(cold['helper_cpu'])})",
            "< 5 s",
            "",
            first < 5.0,
        )
    )
    rows.append(
        Row(
            "cold: import + first simulate_population(), default config",
            f"{fmt_time(pop['population'])} (CPU {fmt_time(pop['cpu'])})",
        )
    )
    rows.append(
        Row(
            "import fgrpo_theory loads numba?",
            str(cold["numba_loaded_by_package"]),
            "False",
            "",
            not cold["numba_loaded_by_package"],
        )
    )
    print("# warm = best of 3 subprocesses reusing the cache written by the cold one")
    print_table(rows)
    top = sorted(cold["stages"].items(), key=lambda kv: -kv[1])[:10]
    print("# the cold first simulate(): Numba pipeline stages, wall seconds (nested included)")
    for k, v in top:
        print(f"#   {v:7.2f}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
