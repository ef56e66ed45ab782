"""Error of the population's float32 mode against float64 on the final metrics.

For each population preset named on the command line (default: the group-size experiment's
``shared-adam`` and ``shared-sgd`` (B = 32), and ``headroom-shared-adam``), runs the same seeds in
float64 and in float32 (paired: same random streams) and prints, per final metric (train and
test pass@1, pass@256, rare coverage@256, rare NLL rise, entropy), the max and mean over seeds of
|float32 - float64|, the seed-to-seed standard error SE of the float64 mean, max|diff| / SE, and
the mean signed difference in units of its own paired standard error (a bias test: |z| of a few
is noise). The table of ``docs/precision.md``. Not a timing benchmark.

    python benchmarks/float32_error_population.py --seeds 16
"""

from __future__ import annotations

import argparse

import numpy as np

from fgrpo_theory.population import PopulationConfig
from fgrpo_theory.population.presets import PRESETS
from fgrpo_theory.population.runner import final_metrics

METRICS = ("pass_at_1", "pass_at_256", "coverage_at_256", "rare_nll_rise", "entropy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("presets", nargs="*", default=["shared-adam", "shared-sgd",
                                                     "headroom-shared-adam"])  # fmt: skip
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--steps", type=int, default=None, help="default: the preset's")
    a = ap.parse_args()
    print(f"seeds = {a.seeds} (paired), final step")
    print("| preset | split | metric | mean f64 | max abs diff | mean abs diff | SE f64 | "
          "max diff / SE | mean diff / its SE |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name in a.presets:
        kw = dict(PRESETS[name], seeds=a.seeds)
        if a.steps is not None:
            kw["steps"] = a.steps
        cfg = PopulationConfig(**kw)
        f64 = final_metrics(cfg)
        f32 = final_metrics(cfg.replace(precision="float32"))
        for split in f64:
            for m in METRICS:
                x, y = f64[split][m], f32[split][m]
                d = np.abs(y - x)
                se = x.std(ddof=1) / np.sqrt(a.seeds)
                r = f"{d.max() / se:.3g}" if se > 0 else "-"
                sd = y - x
                sed = sd.std(ddof=1) / np.sqrt(a.seeds)
                zb = sd.mean() / sed if sed > 0 else 0.0
                cells = [name, split, m, f"{x.mean():.6f}", f"{d.max():.2e}", f"{d.mean():.2e}",
                         f"{se:.2e}", r, f"{zb:+.2f}"]  # fmt: skip
                print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
