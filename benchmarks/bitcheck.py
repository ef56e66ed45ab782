"""Hash the outputs of a fixed set of configs (both simulators, every kernel path) so a kernel
change can be checked bit for bit: ``python benchmarks/bitcheck.py > before.txt``, change, run
again, ``diff``; ``--dump DIR`` also saves each config's columns to ``DIR/<name>.npz`` (to
measure a stated change: ``benchmarks/bitdiff.py``). Covers the dense and sum-tree paths,
both samplers, SGD / Adam / AdamW, inner updates with clipping (PPO, CISPO, dual clip), dynamic
sampling, float32, table schemes, the dense path at small K, and the population model (sparse
and eager Adam, SGD, inner updates, fill, float32)."""

from __future__ import annotations

import hashlib
import os
import sys

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from fgrpo_theory.population import PopulationConfig, simulate_population  # noqa: E402
from fgrpo_theory.sim import SimConfig, simulate  # noqa: E402

SIM = {
    "dense_sgd": dict(K=200, N=8, steps=60, backend="dense", seeds=3, log_every=5),
    "tree_sgd": dict(K=200, N=8, steps=60, backend="sumtree", seeds=3, log_every=5),
    "tree_big_N": dict(K=5000, N=100, steps=30, backend="sumtree", seeds=2, log_every=3),
    "dense_adam_inner": dict(
        K=300, N=16, steps=40, optimizer="adam", lr=0.02, inner_updates=4, seeds=2
    ),
    "dense_adamw_cispo": dict(
        K=300,
        N=8,
        steps=40,
        optimizer="adamw",
        lr=0.02,
        weight_decay=0.01,
        algo="cispo",
        inner_updates=3,
        seeds=2,
    ),  # fmt: skip
    "dense_dual_linear": dict(
        K=100, N=8, steps=40, rule="linear", inner_updates=2, dual_clip=3.0, lr=0.5, seeds=2
    ),
    "dense_dyn_sorted": dict(
        K=4000,
        N=64,
        steps=30,
        sampler="sorted",
        dynamic_sampling="dapo",
        seeds=2,
        correct=40,
        backend="dense",
    ),  # fmt: skip
    "dense_f32_adam": dict(
        K=2000, N=8, steps=40, optimizer="adam", lr=0.01, precision="float32", seeds=2
    ),
    "dense_maxrl_adam": dict(K=300, N=8, steps=40, optimizer="adam", lr=0.02, scheme="maxrl"),
    "dense_focal_trl": dict(K=300, N=8, steps=40, scheme="trl+focal:gamma=1", seeds=2),
    "thresholds": dict(K=100, N=8, steps=80, thresholds=(0.3, 0.6), seeds=2, lr=0.5),
    # issue 27: the dense path at small K (libm-size exps, Adam scalars), every step logged
    "dense_k6_sgd": dict(
        K=6, logits="1.0x1,0.0x5", correct=2, N=8, steps=50, backend="dense", seeds=3, lr=0.1
    ),
    "dense_k6_adam": dict(
        K=6, logits="1.0x1,0.0x5", correct=2, N=8, steps=50, optimizer="adam", lr=0.05, seeds=3
    ),
    "dense_k6_lanes_dapo": dict(  # > runner.DIRECT_RUNS runs: the SIMD-lanes kernel (klanes)
        K=6,
        logits="1.0x1,0.0x5",
        correct=1,
        N=8,
        steps=50,
        optimizer="adam",
        lr=0.05,
        seeds=70,
        dynamic_sampling="dapo",
        subsets={"rare": "1..3"},
    ),  # fmt: skip
    "dense_k1000_adam": dict(
        K=1000,
        correct=100,
        N=8,
        steps=40,
        optimizer="adam",
        lr=0.02,
        seeds=2,
        subsets={"rare": "1..99", "one": "1"},
    ),
}
#: the population configs' common size
_POP = dict(P=16, P_test=4, K=32, B=4, steps=30, seeds=2, log_every=10)
POP = {
    "pop_adam": dict(_POP),
    "pop_sgd_inner": dict(_POP, optimizer="sgd", lr_shared=0.5, lr_prompt=0.5, inner_updates=3),
    "pop_adamw_fill": dict(
        _POP, optimizer="adamw", weight_decay=0.01, dynamic_sampling="dapo", ds_fill="next-prompt"
    ),
    "pop_f32_sgd": dict(
        _POP, K=20, optimizer="sgd", lr_shared=0.5, lr_prompt=0.5, precision="float32"
    ),
    "pop_perprompt_pkpo": dict(_POP, adam_state="per-prompt", scheme="pkpo"),
}


def _digest(arrs) -> str:
    h = hashlib.sha256()
    for a in arrs:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    # per config: the hash of every numeric column, then (``draws``) of the integer columns
    # only (group counters, tail misses, threshold steps): these follow the random draws, so
    # a change that touches only how logged metrics are computed leaves them unchanged
    dump = sys.argv[sys.argv.index("--dump") + 1] if "--dump" in sys.argv else None
    for name, kw in SIM.items():
        t = simulate(SimConfig(**kw), tables=True)
        cols = [c for c in t.log.columns if t.log[c].dtype.kind in "fiub"]
        tcols = [c for c in t.thresholds.columns if t.thresholds[c].dtype.kind in "fiub"]
        arrs = [t.log[c].to_numpy() for c in cols] + [t.thresholds[c].to_numpy() for c in tcols]
        ints = [a for a in arrs if a.dtype.kind in "iub"]
        print(name, _digest(arrs), "draws", _digest(ints))
        if dump:
            np.savez(
                os.path.join(dump, f"{name}.npz"),
                **{f"log_{c}": t.log[c].to_numpy() for c in cols},
                **{f"thr_{c}": t.thresholds[c].to_numpy() for c in tcols},
            )
    for name, kw in POP.items():
        df = simulate_population(PopulationConfig(**kw), per_prompt=True)
        cols = [c for c in df.columns if df[c].dtype.kind in "fiub"]
        ints = [df[c].to_numpy() for c in cols if df[c].dtype.kind in "iub"]
        print(name, _digest([df[c].to_numpy() for c in cols]), "draws", _digest(ints))
        if dump:
            np.savez(os.path.join(dump, f"{name}.npz"), **{c: df[c].to_numpy() for c in cols})


if __name__ == "__main__":
    main()
