"""The order ``figures all --workers W`` starts figures in (``experiments/_schedule.py``),
checked on the jobs' exact costs by playing the dispatcher out: against hand-computed ends,
against the plain costliest-first rule, and against the best of every priority order."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.cli._experiments import experiments_package

experiments_package()
from fgrpo_theory_experiments._schedule import Job, choose, finish_time  # noqa: E402


def _costliest_first(pending, running, workers):
    """The rule used before: the costliest job that can start (ties by name)."""
    chain_busy = any(shared for _, shared in running)
    order = sorted(pending, key=lambda j: (-j.cost, j.name))
    return next((j for j in order if not (j.shared and chain_busy)), None)


def _priority(order):
    """A fixed priority order: the first job of ``order`` that can start."""

    def pick(pending, running, workers):
        chain_busy = any(shared for _, shared in running)
        return next((j for j in order if j in pending and not (j.shared and chain_busy)), None)

    return pick


def _play(jobs, workers, pick):
    """Run ``jobs`` on ``workers`` with exact costs, asking ``pick`` at every free worker (as
    ``registry._run_pool`` does). Returns the end and the (start, end, job) of every job."""
    pending, running, log, now = list(jobs), [], [], 0.0  # running: (end, job)
    while pending or running:
        while len(running) < workers:
            left = [(end - now, j.shared) for end, j in running]
            job = pick(pending, left, workers)
            if job is None:
                break
            pending.remove(job)
            running.append((now + job.cost, job))
            log.append((now, now + job.cost, job))
        now = min(end for end, _ in running)
        running = [(end, j) for end, j in running if end > now]
    return max(end for _, end, _ in log), log


def _chain_never_overlaps(log):
    spans = sorted((s, e) for s, e, j in log if j.shared)
    return all(e0 <= s1 for (_, e0), (s1, _) in itertools.pairwise(spans))


# The shape of `make reproduce` on 2 cores (seconds measured 29 Nov 2026, rounded): a chain of
# four figures sharing runs, two long free figures.
REPRODUCE = [
    Job("companion", 384), Job("population", 175), Job("sensitivity", 250, True),
    Job("linear", 66, True), Job("sgd_adam", 47, True), Job("simulation", 44, True),
]  # fmt: skip


def test_reproduce_shape_by_hand():
    """Costliest first: companion and sensitivity start; at 250 population starts, so the rest
    of the chain (66 + 47 + 44) waits for the companion's end at 384 and ends at 541. The
    look-ahead starts `linear` first beside the companion, then sensitivity at 66, population
    at 316; the chain goes on at 384 and 431 and everything has ended at 491."""
    end, _ = _play(REPRODUCE, 2, _costliest_first)
    assert end == 541
    end, log = _play(REPRODUCE, 2, choose)
    assert end == 491
    starts = {j.name: s for s, _, j in log}
    assert starts == {"linear": 0, "companion": 0, "sensitivity": 66, "population": 316,
                      "sgd_adam": 384, "simulation": 431}  # fmt: skip
    assert _chain_never_overlaps(log)
    best = min(_play(REPRODUCE, 2, _priority(p))[0] for p in itertools.permutations(REPRODUCE))
    assert best == 491  # no priority order does better


def test_finish_time_by_hand():
    jobs = [Job("a", 4), Job("b", 3, True), Job("c", 2, True)]
    assert finish_time(jobs, [0.0, 0.0]) == 5  # a | b then c
    assert finish_time(jobs, [0.0, 0.0], chain_free_at=10.0) == 15  # the chain waits: 10 + 3 + 2
    assert finish_time([], [1.0, 7.0]) == 7
    with pytest.raises(ValueError, match="^free_at must"):
        finish_time(jobs, [])


def test_choose_waits_for_the_chain_and_refuses_a_full_pool():
    assert choose([Job("b", 3, True)], [(5.0, True)], 2) is None
    assert choose([Job("b", 3, True), Job("c", 1)], [(5.0, True)], 2) == Job("c", 1)
    with pytest.raises(ValueError, match="^running must hold fewer than workers=1"):
        choose([Job("c", 1)], [(5.0, False)], 1)


_jobs = st.lists(st.tuples(st.integers(1, 40), st.booleans()), min_size=1, max_size=6).map(
    lambda js: [Job(f"j{i}", c, s) for i, (c, s) in enumerate(js)]
)


@settings(max_examples=150, deadline=None)
@given(_jobs, st.integers(1, 3))
def test_never_later_than_costliest_first_nor_than_possible(jobs, workers):
    """Each job once, the chain never overlapping; the end no later than costliest first
    (the look-ahead plays that rule out and keeps it on ties), and no earlier than the best
    priority order, the chain's length, the longest job or the work spread over the workers."""
    end, log = _play(jobs, workers, choose)
    assert sorted(j.name for _, _, j in log) == sorted(j.name for j in jobs)
    assert _chain_never_overlaps(log)
    assert end <= _play(jobs, workers, _costliest_first)[0]
    best = min(_play(jobs, workers, _priority(p))[0] for p in itertools.permutations(jobs))
    assert end >= best
    total = sum(j.cost for j in jobs)
    assert end >= max(max(j.cost for j in jobs), sum(j.cost for j in jobs if j.shared),
                      total / workers)  # fmt: skip
