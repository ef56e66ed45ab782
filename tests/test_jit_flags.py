"""A kernel's arithmetic does not depend on the order in which Numba first compiled it.

Numba compiles a callee whose ``fastmath`` is unset with its caller's flags, and its on-disk cache
does not key on flags: before every decorator flavour set ``fastmath`` explicitly, the population
kernel's ``_adam_idle`` (meant to be exact) took the caller's fast-math flags (FMA contraction)
when first compiled from the kernel and not when first compiled standalone, so population runs
with idle-prompt Adam steps changed in the last bits with the compilation history.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import hashlib
import sys
import numpy as np
from numba import njit
from fgrpo_theory.population.kadam import _adam_idle, adam_table
from fgrpo_theory.sim._jit import FM

@njit(fastmath=FM, error_model="numpy")
def caller(z, mm, vv, t, tab):
    _adam_idle(z, 0.01, 0.01, False, 0.9, 0.999, 1e-8, t, mm, vv, tab)

rng = np.random.default_rng(0)
z = rng.normal(size=1001)
mm = rng.normal(size=1001) * 1e-3
vv = rng.random(1001) * 1e-6
tab = adam_table(0.01, 0.01, False, 0.9, 0.999, 1e-8, 8)  # covers t = 1 and 5, not 37
for t in (1, 5, 37):
    if sys.argv[1] == "caller":
        caller(z, mm, vv, t, tab)
    else:
        _adam_idle(z, 0.01, 0.01, False, 0.9, 0.999, 1e-8, t, mm, vv, tab)
print(hashlib.sha256(z.tobytes() + mm.tobytes() + vv.tobytes()).hexdigest())
"""


def test_every_flavour_sets_fastmath():
    from fgrpo_theory.sim import _jit as jit

    for name in ("jit_exact", "jit_exact_inline", "jit_fast", "jit_fast_inline", "jit_fast_leaf",
                 "jit_elementwise", "jit_batch", "jit_run_fast", "jit_run_exact"):  # fmt: skip
        f = getattr(jit, name)(lambda x: x)
        assert "fastmath" in f.targetoptions, name


def test_exact_callee_is_the_same_compiled_from_a_fast_caller_or_alone(tmp_path):
    """Each first compilation in its own fresh cache: from a fast-math caller, and standalone."""
    out = []
    for mode in ("caller", "alone"):
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
        env["FGRPO_THEORY_CACHE_DIR"] = str(tmp_path / mode)
        env["PYTHONPATH"] = str(ROOT)
        res = subprocess.run(
            [sys.executable, "-c", PROBE, mode],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            cwd=tmp_path,
        )
        out.append(res.stdout.strip())
    assert out[0] == out[1]
