"""Benchmark: compare-passk, 50,000 iterations over 500 problems (target <= 5 s on one core).

Workload: 500 problems, n = 1024 generations per model, success rates from Beta(0.5, 1.5), m = 256,
k = 1 and 256 (the paper's appendix-Q setting), ``compare_passk`` end to end (CDF tables, draws,
pass@k look-ups, intervals), single-threaded NumPy.

Reference, measured in the same run: the naive implementation of section 14, one
``Generator.hypergeometric`` call per iteration and model for all problems and pass@k recomputed
with :func:`fgrpo_theory.passk.pass_at_k` on the draws, timed on 500 iterations and scaled by 100
to 50,000. The ratio library / reference is what the row reports; the target is on the library's
CPU time (the machine is shared: best of repeats).

Run: ``python benchmarks/bench_compare_passk.py``
"""

from __future__ import annotations

import numpy as np
from _common import Row, fmt_time, header, measure_many, print_table

from fgrpo_theory.passk import pass_at_k
from fgrpo_theory.significance import compare_passk

P, N_GEN, M, ITER = 500, 1024, 256, 50_000
REF_ITER = 500
K = (1, 256)
TARGET_S = 5.0


def workload():
    rng = np.random.default_rng(0)
    mu = rng.beta(0.5, 1.5, P)
    n = np.full(P, N_GEN)
    return n, rng.binomial(N_GEN, mu), n, rng.binomial(N_GEN, np.minimum(1.0, mu * 1.05))


def naive(na, ca, nb, cb, iterations: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    out = np.empty((len(K), iterations))
    for it in range(iterations):
        ja = rng.hypergeometric(ca, na - ca, M)
        jb = rng.hypergeometric(cb, nb - cb, M)
        for i, k in enumerate(K):
            out[i, it] = np.mean(pass_at_k(M, jb, k)) - np.mean(pass_at_k(M, ja, k))
    return out


def main() -> int:
    header("compare_passk: 50,000 iterations x 500 problems, m = 256, k = 1, 256")
    data = workload()
    lib, ref = measure_many(
        [
            lambda: compare_passk(*data, list(K), m=M, iterations=ITER),
            lambda: naive(*data, REF_ITER),
        ],
        repeats=3,
    )
    ref_full = ref.cpu * ITER / REF_ITER
    rows = [
        Row(
            "compare_passk (CPU, 1 thread)",
            fmt_time(lib.cpu),
            f"<= {TARGET_S:.0f} s",
            f"{lib.cpu / ref_full:.3f} x naive",
            lib.cpu <= TARGET_S,
        ),
        Row("compare_passk (wall)", fmt_time(lib.wall)),
        Row(f"naive loop, {REF_ITER} iterations scaled x{ITER // REF_ITER}", fmt_time(ref_full)),
    ]
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
