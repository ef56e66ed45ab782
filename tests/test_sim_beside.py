"""The metrics pass compiled by a helper process beside the run loop on a cold start
(``fgrpo_theory/sim/beside.py``): the numbers are those of a process that compiled everything
itself, the helper's code is loaded from the cache instead of compiled again, one compile notice
is printed, and a helper that fails, hangs or outlives a failed compilation is killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fgrpo_theory.sim import beside

REPO = Path(__file__).resolve().parent.parent

#: A cold first simulate of the small-K loop; prints the rows' hash and the metrics pass's cache
#: hits and misses in this process. ``HELPER`` = "0": this process may not start a helper.
COLD = r"""
import hashlib, json, os, sys
from fgrpo_theory.sim import beside, kmetrics
if os.environ["HELPER"] == "0":
    beside._cores = lambda: 1
from fgrpo_theory.sim import SimConfig, simulate
df = simulate(SimConfig(K=6, N=8, steps=30, seeds=3, rule="logprob", optimizer="sgd",
                        backend="dense", log_every=5))
num = df.select_dtypes("number").to_numpy()
stats = kmetrics._metrics.stats
key = kmetrics.METRICS_ARGS
print(json.dumps(dict(rows=hashlib.sha256(num.tobytes()).hexdigest(), n=len(df),
                      hits=stats.cache_hits.get(key, 0), misses=stats.cache_misses.get(key, 0))))
"""


def _cold(tmp_path: Path, name: str, helper: str) -> tuple[dict, str]:
    cache = tmp_path / name
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), FGRPO_THEORY_CACHE_DIR=str(cache),
               HELPER=helper, PYTHONPATH=str(REPO))  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-c", COLD], env=env, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


@pytest.mark.skipif(beside._cores() < 2, reason="the helper runs only with two cores or more")
def test_a_cold_start_loads_the_helpers_metrics_pass_and_gets_the_same_numbers(tmp_path):
    with_helper, err = _cold(tmp_path, "a", "1")
    alone, err_alone = _cold(tmp_path, "b", "0")
    assert with_helper["n"] == alone["n"] > 0
    assert with_helper["rows"] == alone["rows"]  # the helper's machine code, the same bits
    # this process loaded the pass from the cache the helper wrote; alone, it compiled it
    assert (with_helper["hits"], with_helper["misses"]) == (1, 0)
    assert (alone["hits"], alone["misses"]) == (0, 1)
    for e in (err, err_alone):  # one notice, from this process (the helper's output is dropped)
        assert sum(line.startswith("fgrpo-theory: compiling") for line in e.splitlines()) == 1


def _popen_spy(monkeypatch) -> list[subprocess.Popen]:
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - Popen's signature
        p = real(*args, **kwargs)
        started.append(p)
        return p

    monkeypatch.setattr(beside.subprocess, "Popen", spy)
    monkeypatch.setattr(beside, "_cores", lambda: 2)
    return started


def test_a_failed_local_compilation_kills_the_helper(monkeypatch):
    started = _popen_spy(monkeypatch)

    def fails() -> None:
        raise RuntimeError("local compile failed")

    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="local compile failed"):
        beside.compile_beside("fgrpo_theory.sim.kmetrics:metrics_address", fails)
    assert len(started) == 1 and started[0].returncode is not None  # killed and reaped
    assert started[0].returncode < 0 and time.perf_counter() - t0 < 30


def test_a_hung_helper_is_killed_after_the_wait(monkeypatch):
    started = _popen_spy(monkeypatch)
    monkeypatch.setattr(beside, "HELPER_SECONDS", 0.05)  # less than importing Numba takes
    ran = []
    beside.compile_beside("fgrpo_theory.sim.kmetrics:metrics_address", lambda: ran.append(1))
    assert ran == [1]
    assert len(started) == 1 and started[0].returncode is not None and started[0].returncode < 0


def test_a_failing_helper_changes_nothing(monkeypatch):
    started = _popen_spy(monkeypatch)
    ran = []
    beside.compile_beside("fgrpo_theory.no_such_module:f", lambda: ran.append(1))
    assert ran == [1]
    assert len(started) == 1 and started[0].returncode not in (None, 0)


def test_no_helper_on_one_core(monkeypatch):
    started = _popen_spy(monkeypatch)
    monkeypatch.setattr(beside, "_cores", lambda: 1)
    ran = []
    beside.compile_beside("fgrpo_theory.sim.kmetrics:metrics_address", lambda: ran.append(1))
    assert ran == [1] and started == []
