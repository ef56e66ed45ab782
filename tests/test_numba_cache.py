"""Compiled kernels are cached in the user cache folder, never next to the package's source.

An installed wheel must not write into site-packages (issue 9). Checked in subprocesses, because
the cache folder is fixed when the kernels are decorated; nothing is compiled here (the locator
is chosen at decoration time), so the test is fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = (
    "import fgrpo_theory.sim.kernels as k, fgrpo_theory.population.kernel as p\n"
    "print(k._max._cache._cache_path)\n"
    "print(p._sgd._cache._cache_path)\n"
)


def _paths(env_extra: dict[str, str]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout.split()


def test_kernels_cache_in_the_user_cache_folder(tmp_path):
    paths = _paths({"FGRPO_THEORY_CACHE_DIR": str(tmp_path)})
    assert len(paths) == 2
    for p in paths:
        assert Path(p).is_relative_to(tmp_path / "numba"), p
        assert not Path(p).is_relative_to(ROOT / "fgrpo_theory"), p


def test_a_numba_cache_dir_set_by_the_user_wins(tmp_path):
    paths = _paths(
        {
            "FGRPO_THEORY_CACHE_DIR": str(tmp_path / "ours"),
            "NUMBA_CACHE_DIR": str(tmp_path / "theirs"),
        }
    )
    for p in paths:
        assert Path(p).is_relative_to(tmp_path / "theirs"), p
