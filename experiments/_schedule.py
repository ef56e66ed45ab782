"""Which figure ``figures all --workers W`` starts next on a free worker (:func:`choose`).

The figures are jobs of estimated cost (seconds) on ``W`` workers, and the jobs that share runs
(``SHARED_RUNS``) may not overlap: they form a chain that runs one at a time, on whichever
worker. Starting the costliest job first (list scheduling by cost) is not enough with such a
chain: once the chain's first job ends, a long free job started then can leave the rest of the
chain to run alone at the end, one worker idle. :func:`choose` therefore looks one step ahead:
for each job it could start now, it estimates when everything would end if it started that job
and then went on costliest first (:func:`finish_time`), and starts the job with the earliest
such end (ties: the costliest, then by name). It is called again at every free worker, with the
running jobs' estimated remaining times, so a job that takes longer than its estimate is
accounted for when the next choice is made.

Pure functions of the estimates: they decide only the order, never the files.
``tests/test_schedule.py`` plays the dispatcher out on exact costs: a hand case, and generated
small cases against the plain costliest-first rule and against every priority order. With
estimates, as in a real run, nothing is guaranteed beyond never overlapping the chain.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Job", "finish_time", "choose"]


@dataclass(frozen=True)
class Job:
    """A figure to run: its name, estimated seconds, whether it shares runs (the chain)."""

    name: str
    cost: float
    shared: bool = False


def _order(jobs: Sequence[Job]) -> list[Job]:
    return sorted(jobs, key=lambda j: (-j.cost, j.name))


def finish_time(
    pending: Sequence[Job], free_at: Sequence[float], chain_free_at: float = 0.0
) -> float:
    """When the last job ends if ``pending`` run costliest first (ties by name) on workers free
    at the times ``free_at`` (seconds from now, one per worker), a job of the chain starting no
    earlier than ``chain_free_at`` nor before the chain's previous job has ended. A worker that
    can start only chain jobs while the chain is busy waits for it."""
    if not free_at:
        raise ValueError("free_at must list at least one worker")
    todo = _order(pending)
    heap = list(free_at)
    heapq.heapify(heap)
    end = max(free_at)
    while todo:
        t = heapq.heappop(heap)
        job = next((j for j in todo if not j.shared or chain_free_at <= t), None)
        if job is None:  # only chain jobs are left, and the chain is busy: wait for it
            heapq.heappush(heap, chain_free_at)
            continue
        todo.remove(job)
        done = t + job.cost
        if job.shared:
            chain_free_at = done
        end = max(end, done)
        heapq.heappush(heap, done)
    return end


def choose(
    pending: Sequence[Job], running: Sequence[tuple[float, bool]], workers: int
) -> Job | None:
    """The job to start now on a free worker, or None if none can start (every pending job is
    in the chain and the chain is busy).

    ``running``: the jobs running now, as (estimated seconds left, shared); fewer than
    ``workers`` of them. See the module docstring for the rule.
    """
    if len(running) >= workers:
        raise ValueError(f"running must hold fewer than workers={workers} jobs")
    chain_busy = any(shared for _, shared in running)
    chain_free_at = max((left for left, shared in running if shared), default=0.0)
    idle = [0.0] * (workers - len(running) - 1)
    best, best_end, seen = None, None, set()
    order = _order(pending)
    for job in order:
        if (job.shared and chain_busy) or (job.cost, job.shared) in seen:
            continue  # (a job equal to one tried already would give the same end)
        seen.add((job.cost, job.shared))
        rest = [j for j in order if j is not job]
        free_at = [left for left, _ in running] + [job.cost] + idle
        end = finish_time(rest, free_at, job.cost if job.shared else chain_free_at)
        if best_end is None or end < best_end:
            best, best_end = job, end
    return best
