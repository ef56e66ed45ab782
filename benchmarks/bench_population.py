"""Population simulator speed: P = 4,096 train + 1,024 test, K = 1,024, B = 256, N = 8, Adam.

2,000 steps with test metrics every 50 steps (issue 12, Speed): targets <= 20 s per run on one
core and >= 5x the vectorized NumPy reference (``reference_numpy_population.py``, same algorithm,
same random words) measured in the same run. The reference is timed on a prefix of the run
(``--ref-steps``, default 100) and extrapolated linearly (its cost per step is constant). Also
checks that both agree on every prompt's success after a few steps. Targets are reported, never
asserted; the machine's load average is printed with them (compare ratios, not seconds, on a
shared machine). Run: ``python benchmarks/bench_population.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_numpy_population import run_reference  # noqa: E402

from fgrpo_theory.population import (  # noqa: E402
    PopulationConfig,
    generate_population,
    simulate_population,
)
from fgrpo_theory.population.runner import advantage_tables  # noqa: E402
from fgrpo_theory.sim.keys import run_keys  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (checks that it runs)")
    ap.add_argument("--ref-steps", type=int, default=100)
    a = ap.parse_args()
    if a.quick:
        size = dict(P=256, P_test=64, K=128, B=32, steps=100)
    else:
        size = dict(P=4096, P_test=1024, K=1024, B=256, steps=2000)
    cfg = PopulationConfig(
        **size, N=8, optimizer="adam", lr_shared=0.01, lr_prompt=0.01, seeds=1, log_every=50,
        breadth=(0.3, 3.0), mu0=(0.6, 0.9), pass_k=(1, 256),
    )  # fmt: skip
    pop = generate_population(cfg)
    simulate_population(cfg.replace(steps=2), population=pop, threads=1)  # compile / load cache
    t0 = time.perf_counter()
    simulate_population(cfg, population=pop, threads=1)
    t_sim = time.perf_counter() - t0

    a_c, a_w, _ = advantage_tables(cfg)
    key = run_keys(cfg.seed, 1)[0]
    rs = min(a.ref_steps, cfg.steps)
    t0 = time.perf_counter()
    run_reference(pop.theta0, pop.phi0, pop.correct, pop.n_train, cfg.B, cfg.N, rs,
                  np.arange(0, rs + 1, 50), a_c, a_w, key, "adam", 0.01, 0.01)  # fmt: skip
    t_ref = (time.perf_counter() - t0) * cfg.steps / rs

    chk = cfg.replace(steps=5, log_every=5)
    got = simulate_population(chk, population=pop, per_prompt=True)
    got = got[got.step == 5].sort_values("prompt")["mu"].to_numpy()
    ref = run_reference(pop.theta0, pop.phi0, pop.correct, pop.n_train, cfg.B, cfg.N, 5,
                        np.array([0, 5]), a_c, a_w, key, "adam", 0.01, 0.01)[-1]  # fmt: skip
    diff = float(np.max(np.abs(got - ref)))
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"sizes: {size}, N = 8, Adam, log every 50; load average (1/5/15 min) {load}")
    print(f"population kernel, 1 thread : {t_sim:8.2f} s   (target <= 20 s)")
    print(
        f"NumPy reference (extrap.)   : {t_ref:8.2f} s   ratio {t_ref / t_sim:6.1f}x (target >= 5x)"
    )
    print(f"max |mu_kernel - mu_numpy| after 5 steps: {diff:.2e} "
          f"({'agree' if diff < 1e-9 else 'DIFFER'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
