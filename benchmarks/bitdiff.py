"""Measure a stated change of the simulators' outputs: compare two ``bitcheck.py --dump`` folders
config by config and column by column (largest absolute and relative difference, number of
differing values; integer columns must be equal). Not a timing benchmark.

Run: ``python benchmarks/bitdiff.py BEFORE_DIR AFTER_DIR``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def main(before: str, after: str) -> int:
    worst = 0.0
    for f in sorted(Path(before).glob("*.npz")):
        a, b = np.load(f), np.load(Path(after) / f.name)
        lines = []
        for c in a.files:
            x, y = a[c], b[c]
            if x.shape != y.shape:
                lines.append(f"  {c}: shape {x.shape} -> {y.shape}")
                continue
            same = (x == y) | (np.isnan(x) & np.isnan(y)) if x.dtype.kind == "f" else x == y
            n = int((~same).sum())
            if n == 0:
                continue
            if x.dtype.kind != "f":
                lines.append(f"  {c}: {n} integer values differ")
                continue
            d = np.abs(x - y)[~same]
            rel = (d / np.maximum(np.abs(x[~same]), 1e-300)).max()
            worst = max(worst, rel)
            lines.append(f"  {c}: {n} of {x.size} differ, max abs {d.max():.3g}, max rel {rel:.3g}")
        print(f"{f.stem}: " + ("identical" if not lines else f"{len(lines)} column(s) differ"))
        print("\n".join(lines)) if lines else None
    print(f"largest relative difference: {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
