"""The benchmarks' timing helpers (``benchmarks/_common.py``): hand cases."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load():
    name = "_fgrpo_bench__common"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / "_common.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


cm = _load()


def _fixed(times):
    """A function returning the given CPU times (as a RefWorker call would), one per call."""
    it = iter(times)
    return lambda: cm.Timing(1.0, next(it))


def test_rounds_keep_each_call_and_the_best_is_their_minimum():
    fns = [_fixed([3.0, 1.0, 2.0]), _fixed([6.0, 5.0, 1.5])]
    rounds = cm.measure_rounds(fns, repeats=3)
    assert [[t.cpu for t in r] for r in rounds] == [[3.0, 6.0], [1.0, 5.0], [2.0, 1.5]]
    fns = [_fixed([3.0, 1.0, 2.0]), _fixed([6.0, 5.0, 1.5])]
    assert [t.cpu for t in cm.measure_many(fns, repeats=3)] == [1.0, 1.5]


def test_paired_ratio_is_the_median_of_the_rounds_ratios():
    # rounds: ref / fn = 2.0, 5.0, 0.75 -> median 2.0; the best calls' ratio would be 1.5
    rounds = [[cm.Timing(0, c) for c in r] for r in ([3.0, 6.0], [1.0, 5.0], [2.0, 1.5])]
    assert cm.paired_ratio(rounds, ref=1, fn=0) == 2.0
    # an even count: the mean of the middle two (2.0 and 5.0)
    rounds.append([cm.Timing(0, 1.0), cm.Timing(0, 10.0)])
    assert cm.paired_ratio(rounds, ref=1, fn=0) == 3.5


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_same_core_pins_to_the_lowest_core_and_restores():
    before = os.sched_getaffinity(0)
    with cm.same_core():
        assert os.sched_getaffinity(0) == {min(before)}
    assert os.sched_getaffinity(0) == before
    with pytest.raises(KeyError), cm.same_core():
        raise KeyError("restored on an exception too")
    assert os.sched_getaffinity(0) == before
