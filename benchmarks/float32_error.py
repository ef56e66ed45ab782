"""Error of the simulator's float32 mode against float64 on the Fig. 2 final metrics.

For each Fig. 2 preset (fgrpo_theory/sim/presets/fig2-*.toml), each N and gamma, runs the same
seeds in float64 and in float32 (paired: same random streams) and prints, per metric (final
Q_pos and M_ret), the max and mean over seeds of |float32 - float64|, the seed-to-seed standard
error SE of the float64 mean and max|diff| / SE, and the mean signed difference (float32 -
float64) in units of its own paired standard error (a bias test: |z| of a few is noise). Not a
timing benchmark.

    PYTHONPATH=$PWD python benchmarks/float32_error.py --steps 300 --seeds 8 --N 2,64,1024,8192
"""

from __future__ import annotations

import argparse

import numpy as np

from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.presets import load_preset

PRESETS = ("fig2-linear-adamw", "fig2-logprob-adam")


def _final(cfg: SimConfig) -> np.ndarray:
    df = simulate(cfg)
    last = df[df.step == cfg.steps].sort_values("run")
    return last[["q_pos", "m_ret"]].to_numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--N", default="2,64,1024,8192")
    ap.add_argument("--gamma", default="0,1")
    a = ap.parse_args()
    Ns = [int(v) for v in a.N.split(",")]
    gammas = [float(v) for v in a.gamma.split(",")]
    print(f"steps = {a.steps}, seeds = {a.seeds} (paired), final step")
    print("| preset | N | gamma | metric | mean f64 | max abs diff | mean abs diff | SE f64 | "
          "max diff / SE | mean diff / its SE |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in PRESETS:
        sw = load_preset(name)
        base = {k: v for k, v in sw.items() if k not in ("N", "gamma", "rewards")}
        base.update(r_correct=sw["rewards"][0], r_incorrect=sw["rewards"][1])
        base.update(steps=a.steps, seeds=a.seeds, log_every=a.steps, pass_k=(1,))
        for N in Ns:
            for g in gammas:
                cfg = SimConfig(**base, N=N, gamma=g)
                f64 = _final(cfg)
                f32 = _final(cfg.replace(precision="float32"))
                d = np.abs(f32 - f64)
                for j, m in enumerate(("Q_pos", "M_ret")):
                    se = f64[:, j].std(ddof=1) / np.sqrt(a.seeds)
                    r = f"{d[:, j].max() / se:.3g}" if se > 0 else "–"  # no spread: undefined
                    sd = f32[:, j] - f64[:, j]
                    sed = sd.std(ddof=1) / np.sqrt(a.seeds)
                    zb = sd.mean() / sed if sed > 0 else 0.0
                    cells = [name, N, f"{g:g}", m, f"{f64[:, j].mean():.6f}",
                             f"{d[:, j].max():.2e}", f"{d[:, j].mean():.2e}", f"{se:.2e}",
                             r, f"{zb:+.2f}"]  # fmt: skip
                    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
