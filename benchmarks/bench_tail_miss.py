"""Benchmark: tail_miss_probability on a 1000 x 1000 grid (target < 50 ms).

Grid: N x tau at fixed mu = 0.3, N log-spaced over [1, 1e7] (1000 values), tau log-spaced over
[1e-12, 0.29] (1000 values). Two input layouts are timed, because NumPy broadcasting lets the
library compute the tau-only logarithms on 1000 values instead of 1e6:

* broadcast: N of shape (1000, 1), tau of shape (1, 1000) (how a user would call it);
* full: N, mu and tau each materialized as 1000 x 1000 arrays (every operation on 1e6 values).

Reference, measured in the same run: the naive direct formula
``(1 - tau)**N - (mu - tau)**N - (1 - mu)**N`` on the same inputs. The script also prints the
naive formula's worst relative error against the library on the grid (the reason the library
exists). Best of several repeats; run with ``python benchmarks/bench_tail_miss.py``.
"""

from __future__ import annotations

import time

import numpy as np

from fgrpo_theory.tail_miss import tail_miss_probability

TARGET_MS = 50.0
REPEATS = 15


def best_ms(fn, repeats: int = REPEATS) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times)


def naive(N, mu, tau):
    return (1 - tau) ** N - (mu - tau) ** N - (1 - mu) ** N


def main() -> int:
    mu = 0.3
    n_1d = np.geomspace(1.0, 1e7, 1000)
    tau_1d = np.geomspace(1e-12, 0.29, 1000)
    layouts = {
        "broadcast": (n_1d[:, None], mu, tau_1d[None, :]),
        "full": tuple(
            np.ascontiguousarray(x)
            for x in np.broadcast_arrays(n_1d[:, None], np.float64(mu), tau_1d[None, :])
        ),
    }
    print(
        "tail_miss_probability on a 1000 x 1000 grid: N in [1, 1e7] x tau in [1e-12, 0.29], mu=0.3"
    )
    print(f"best of {REPEATS} repeats; target < {TARGET_MS:.0f} ms")
    ok = True
    for name, (N, m, tau) in layouts.items():
        t_lib = best_ms(lambda N=N, m=m, tau=tau: tail_miss_probability(N, m, tau))
        t_ref = best_ms(lambda N=N, m=m, tau=tau: naive(N, m, tau))
        status = "OK" if t_lib < TARGET_MS else "SLOW"
        ok &= t_lib < TARGET_MS
        print(
            f"  {name:9s}: library {t_lib:7.2f} ms   naive formula {t_ref:7.2f} ms   "
            f"ratio library/naive {t_lib / t_ref:5.2f}   [{status}]"
        )
    N, m, tau = layouts["broadcast"]
    exact = tail_miss_probability(N, m, tau)
    crude = naive(N, m, tau)
    big = exact > 1e-300
    rel = np.abs(crude[big] - exact[big]) / exact[big]
    print(
        f"  naive formula vs library on the grid: worst relative difference {rel.max():.3g}, "
        f"{np.mean(rel > 1e-12):.1%} of points beyond 1e-12"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
