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


def _fixed(cpu, wall=None):
    """A function returning the given timings (as a RefWorker call would), one per call; the
    wall time is 10x the CPU time unless given."""
    it = iter(zip(wall or [10 * c for c in cpu], cpu, strict=True))
    return lambda: cm.Timing(*next(it))


def test_rounds_keep_each_call_and_the_best_is_their_minimum():
    fns = [_fixed([3.0, 1.0, 2.0]), _fixed([6.0, 5.0, 1.5], wall=[0.5, 9.0, 7.0])]
    rounds = cm.measure_rounds(fns, repeats=3)
    assert [[(t.wall, t.cpu) for t in r] for r in rounds] == [
        [(30.0, 3.0), (0.5, 6.0)],
        [(10.0, 1.0), (9.0, 5.0)],
        [(20.0, 2.0), (7.0, 1.5)],
    ]
    fns = [_fixed([3.0, 1.0, 2.0]), _fixed([6.0, 5.0, 1.5], wall=[0.5, 9.0, 7.0])]
    # the smallest wall and the smallest CPU time, each on its own (here of different calls)
    assert cm.measure_many(fns, repeats=3) == [cm.Timing(10.0, 1.0), cm.Timing(0.5, 1.5)]


def test_min_time_adds_rounds_until_every_function_has_run_that_long():
    # walls 1 and 3 per call: min_time 5 needs 5 rounds (the first function's total reaches 5)
    fns = [_fixed([0.1] * 9, wall=[1.0] * 9), _fixed([0.3] * 9, wall=[3.0] * 9)]
    assert len(cm.measure_rounds(fns, repeats=2, min_time=5.0)) == 5
    fns = [_fixed([0.1] * 9, wall=[1.0] * 9), _fixed([0.3] * 9, wall=[3.0] * 9)]
    assert len(cm.measure_rounds(fns, repeats=4, min_time=2.0)) == 4  # repeats already enough


def test_paired_ratio_is_the_median_of_the_rounds_ratios():
    # rounds: ref / fn = 2.0, 5.0, 0.75 -> median 2.0; the best calls' ratio would be 1.5
    rounds = [[cm.Timing(0, c) for c in r] for r in ([3.0, 6.0], [1.0, 5.0], [2.0, 1.5])]
    assert cm.paired_ratio(rounds, ref=1, fn=0) == 2.0
    # an even count: the mean of the middle two (2.0 and 5.0)
    rounds.append([cm.Timing(0, 1.0), cm.Timing(0, 10.0)])
    assert cm.paired_ratio(rounds, ref=1, fn=0) == 3.5


def _affinity() -> set:
    return os.sched_getaffinity(0)


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and two cores or more",
)
def test_same_core_pins_to_the_lowest_core_and_restores():
    import multiprocessing

    before = os.sched_getaffinity(0)
    with cm.same_core():
        assert os.sched_getaffinity(0) == {min(before)}
        # a process started inside (as a RefWorker is) runs on that core too
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            assert pool.apply(_affinity) == {min(before)}
    assert os.sched_getaffinity(0) == before
    with pytest.raises(KeyError), cm.same_core():
        raise KeyError("restored on an exception too")
    assert os.sched_getaffinity(0) == before
