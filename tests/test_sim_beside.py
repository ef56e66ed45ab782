"""The metrics pass compiled by a helper process beside the run loop on a cold start
(``fgrpo_theory/sim/beside.py``): the numbers are those of a process that compiled everything
itself, the helper's code is loaded from the cache instead of compiled again, one compile notice
is printed, and a helper that fails, is slow or outlives a failed compilation is killed."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fgrpo_theory.sim import beside, cpus

REPO = Path(__file__).resolve().parent.parent

#: A first simulate of the sum-tree loop (its helper compiles the tree's kernels first), then one
#: of the small-K loop and one of the general dense loop; prints the rows' hashes, the metrics
#: pass's cache hits and misses in this process, and the helpers it started.
#: ``HELPER`` = "0": this process may not start one; ``FORK`` = "0": its helper is a fresh
#: ``python``, not a fork; ``ADDRESS`` = "0": the loops link the pass in (the calls before the
#: address existed).
RUNS = r"""
import hashlib, json, os
from fgrpo_theory.sim import beside, kmetrics, runner
if os.environ["HELPER"] == "0":
    beside._cores = lambda: 1
if os.environ["FORK"] == "0":
    beside._can_fork = lambda: False
runner.METRICS_BY_ADDRESS = os.environ["ADDRESS"] == "1"
started = []
start = beside._start
def counted(target):
    helper = start(target)
    if helper is not None:
        started.append(type(helper).__name__)
    return helper
beside._start = counted
from fgrpo_theory.sim import SimConfig, simulate
rows = []
for cfg in (SimConfig(K=1000, N=8, steps=30, seeds=3, backend="sumtree", log_every=5),
            SimConfig(K=6, N=8, steps=30, seeds=3, rule="logprob", log_every=5),
            SimConfig(K=300, N=8, steps=30, seeds=3, backend="dense", subsets={"tail": "0..49"},
                      log_every=5)):
    num = simulate(cfg).select_dtypes("number").to_numpy()
    rows.append(hashlib.sha256(num.tobytes()).hexdigest())
stats = kmetrics._metrics.stats
key = kmetrics.METRICS_ARGS
print(json.dumps(dict(rows=rows, hits=stats.cache_hits.get(key, 0),
                      misses=stats.cache_misses.get(key, 0), helpers=started)))
"""


def _run(cache: Path, helper: str = "1", address: str = "1", fork: str = "1") -> tuple[dict, int]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), FGRPO_THEORY_CACHE_DIR=str(cache),
               HELPER=helper, ADDRESS=address, FORK=fork, PYTHONPATH=str(REPO))  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-c", RUNS], env=env, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    notices = sum(line.startswith("fgrpo-theory: compiling") for line in res.stderr.splitlines())
    return json.loads(res.stdout.strip().splitlines()[-1]), notices


@pytest.mark.skipif(beside._cores() < 2, reason="the helper runs only with two cores or more")
def test_the_helpers_metrics_pass_is_loaded_and_gives_the_numbers_of_a_linked_one(tmp_path):
    cold, n_cold = _run(tmp_path / "a")
    warm, n_warm = _run(tmp_path / "a")
    alone, n_alone = _run(tmp_path / "b", helper="0")
    linked, n_linked = _run(tmp_path / "c", address="0")
    spawned, n_spawned = _run(tmp_path / "d", fork="0")
    # the same rows whether the pass was compiled by the helper (a fork of this process, or a
    # fresh python), loaded from the cache, compiled here, or linked into each loop (the calls
    # before the address existed)
    assert cold["rows"] == warm["rows"] == alone["rows"] == linked["rows"] == spawned["rows"]
    # cold: the helper compiled the pass, this process loaded it (one notice, this process's)
    fork = ["_Forked"] if sys.platform.startswith("linux") else ["Popen"]
    assert (cold["helpers"], cold["hits"], cold["misses"], n_cold) == (fork, 1, 0, 1)
    assert (spawned["helpers"], spawned["hits"], spawned["misses"], n_spawned) == (
        ["Popen"], 1, 0, 1,
    )  # fmt: skip
    # warm: no helper, nothing compiled, no notice
    assert (warm["helpers"], warm["hits"], warm["misses"], n_warm) == ([], 1, 0, 0)
    assert (alone["hits"], alone["misses"], n_alone) == (0, 1, 1)  # compiled here
    assert (linked["helpers"], n_linked) == ([], 1)


TREE_AFTER_HELPER = r"""
import json
from fgrpo_theory.sim import SimConfig, beside, simulate
from fgrpo_theory.sim.sumtree import tree_build, tree_leaf_range
beside._cores = lambda: 1  # no helper of its own: what it finds was the helper's
simulate(SimConfig(K=1000, N=8, steps=30, seeds=3, backend="sumtree"), threads=1)
print(json.dumps([[sum(d.values()) for d in (f.stats.cache_hits, f.stats.cache_misses)]
                  for f in (tree_build, tree_leaf_range)]))
"""


def test_the_helpers_tree_kernels_are_the_ones_the_loop_loads(tmp_path):
    """What the helper compiles on the sum-tree path (``sum_tree_then_metrics``, run alone
    first) is what ``run_steps``' compilation asks for: it loads both tree kernels from the
    cache and compiles neither (a signature that differs would show as a miss)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), FGRPO_THEORY_CACHE_DIR=str(tmp_path),
               PYTHONPATH=str(REPO))  # fmt: skip
    helper = "from fgrpo_theory.sim import beside; beside.sum_tree_then_metrics()"
    for code in (helper, TREE_AFTER_HELPER):
        res = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
        )
        assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [[1, 0], [1, 0]]


def _slow() -> None:
    """A helper's work that outlasts any wait of the tests below."""
    time.sleep(60)


#: Each kind of helper, with a target it takes longer than 0.05 s to finish: the fork runs
#: :func:`_slow` (the fork has this module); the fresh python imports Numba first.
KINDS = {
    "fork": f"{__name__}:_slow",
    "python": "fgrpo_theory.sim.kmetrics:metrics_address",
}


def _spy(monkeypatch, kind: str) -> list:
    """The helpers :func:`beside.compile_beside` starts, of the ``kind`` asked for."""
    started: list = []
    real = beside._start

    def spy(target: str):  # noqa: ANN202 - a Popen or a beside._Forked
        helper = real(target)
        if helper is not None:
            started.append(helper)
        return helper

    monkeypatch.setattr(beside, "_start", spy)
    monkeypatch.setattr(beside, "_cores", lambda: 2)
    monkeypatch.setattr(beside, "_can_fork", lambda: kind == "fork")
    return started


def _is(kind: str, helper: object) -> bool:
    return isinstance(helper, beside._Forked if kind == "fork" else subprocess.Popen)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_failed_local_compilation_kills_the_helper(monkeypatch, kind):
    started = _spy(monkeypatch, kind)

    def fails() -> None:
        raise RuntimeError("local compile failed")

    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="local compile failed"):
        beside.compile_beside(KINDS[kind], fails)
    assert len(started) == 1 and _is(kind, started[0])
    assert started[0].returncode is not None  # killed and reaped
    assert started[0].returncode < 0 and time.perf_counter() - t0 < 30


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_slow_helper_is_killed_after_the_wait(monkeypatch, kind):
    started = _spy(monkeypatch, kind)
    monkeypatch.setattr(beside, "HELPER_SECONDS", 0.05)
    ran = []
    t0 = time.perf_counter()
    beside.compile_beside(KINDS[kind], lambda: ran.append(1))
    assert ran == [1] and time.perf_counter() - t0 < 30
    assert len(started) == 1 and _is(kind, started[0])
    assert started[0].returncode is not None and started[0].returncode < 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_failing_helper_changes_nothing(monkeypatch, kind):
    started = _spy(monkeypatch, kind)
    ran = []
    beside.compile_beside("fgrpo_theory.no_such_module:f", lambda: ran.append(1))
    assert ran == [1]
    assert len(started) == 1 and _is(kind, started[0])
    assert started[0].returncode not in (None, 0)


def test_no_helper_on_one_core(monkeypatch):
    started = _spy(monkeypatch, "fork")
    monkeypatch.setattr(beside, "_cores", lambda: 1)
    ran = []
    beside.compile_beside(KINDS["fork"], lambda: ran.append(1))
    assert ran == [1] and started == []


def test_a_process_running_another_thread_is_not_forked(monkeypatch):
    """A fork copies only the calling thread: a lock another thread holds at that moment (a
    module's import lock, a logging handler's) would stay held in the fork forever. With a
    second thread running, the helper is a fresh python."""
    started: list = []
    start = beside._start

    def spy(target: str):  # noqa: ANN202 - a Popen or a beside._Forked
        started.append(start(target))
        return started[-1]

    monkeypatch.setattr(beside, "_start", spy)
    monkeypatch.setattr(beside, "_cores", lambda: 2)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        beside.compile_beside("fgrpo_theory.no_such_module:f", lambda: None)
    finally:
        stop.set()
        other.join()
    assert len(started) == 1 and isinstance(started[0], subprocess.Popen)


def _hold_sigint_for_a_minute() -> None:
    """A fork's work: it takes a minute unless a SIGINT ends it."""
    time.sleep(60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper forks on Linux")
@pytest.mark.parametrize("ignored", [False, True])
def test_a_ctrl_c_ends_a_forked_helper_unless_this_process_ignores_it(monkeypatch, ignored):
    """The fork takes the default action of SIGINT (it dies), not this process's handler (here
    Python's, which would raise KeyboardInterrupt, caught, exit 1); a process that ignores
    SIGINT (a Dask worker) has a fork that ignores it too (it is killed after the wait)."""
    started = _spy(monkeypatch, "fork")
    monkeypatch.setattr(beside, "HELPER_SECONDS", 1.0)
    # (set either way: a pytest started in the background by a non-interactive shell, as a CI
    # script may do, starts with SIGINT ignored)
    handler = signal.signal(
        signal.SIGINT, signal.SIG_IGN if ignored else signal.default_int_handler
    )

    def interrupt_it() -> None:
        time.sleep(0.3)  # (the fork reset its handler: its first steps)
        os.kill(started[0].pid, signal.SIGINT)

    try:
        beside.compile_beside(f"{__name__}:_hold_sigint_for_a_minute", interrupt_it)
    finally:
        signal.signal(signal.SIGINT, handler)
    assert started[0].returncode == (-signal.SIGKILL if ignored else -signal.SIGINT)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper forks on Linux")
def test_a_forked_helper_holds_none_of_this_processs_descriptors(monkeypatch):
    """A reader of a pipe (or FIFO) this process writes sees its end when this process closes
    it, not when the fork ends: the fork closed its copy of every descriptor but 0-2."""
    started = _spy(monkeypatch, "fork")
    monkeypatch.setattr(beside, "HELPER_SECONDS", 0.05)
    r, w = os.pipe()
    ended = []

    def close_and_read() -> None:
        time.sleep(0.3)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 10.0)  # the fork sleeps 60 s
        ended.append(bool(ready) and os.read(r, 1) == b"")

    try:
        beside.compile_beside(f"{__name__}:_slow", close_and_read)
    finally:
        os.close(r)
    assert ended == [True] and len(started) == 1


@pytest.mark.skipif(not hasattr(signal, "SIGCHLD"), reason="POSIX signals")
def test_a_forked_helper_reaped_by_the_system_counts_as_done(monkeypatch):
    """With SIGCHLD ignored (a host application's choice) the system reaps the fork itself and
    waiting for it finds no child: that is a helper that has ended, not an error."""
    started = _spy(monkeypatch, "fork")
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        ran = []
        beside.compile_beside(
            "fgrpo_theory.sim.beside:_cores", lambda: (time.sleep(0.2), ran.append(1))
        )
    finally:
        signal.signal(signal.SIGCHLD, old)
    assert ran == [1] and len(started) == 1 and started[0].returncode == 0


FORKED_EXIT = r"""
import atexit, os, sys
from fgrpo_theory.sim import beside
beside._cores = lambda: 2
def handler():
    with open(os.environ["LOG"], "a") as f:
        f.write("exit handler\n")
atexit.register(handler)
sys.stdout.write("before the fork\n")  # (a pipe: held in the buffer, not yet written)
def chatty():
    print("the helper's own output", flush=True)
    print("the helper's own error", file=sys.stderr, flush=True)
kinds = []
start = beside._start
def spy(target):
    helper = start(target)
    kinds.append(type(helper).__name__)
    return helper
beside._start = spy
ran = []
beside.compile_beside("__main__:chatty", lambda: ran.append(1))
print("after", ran, kinds)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper forks on Linux")
def test_a_forked_helper_writes_nothing_and_runs_no_exit_handler(tmp_path):
    """The fork's output goes nowhere, and it ends with ``os._exit``: this process's buffered
    output is written once, and its exit handlers (here one that writes to a file) run once."""
    log = tmp_path / "log"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), FGRPO_THEORY_CACHE_DIR=str(tmp_path),
               PYTHONPATH=str(REPO), LOG=str(log))  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-c", FORKED_EXIT], env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == "before the fork\nafter [1] ['_Forked']\n"
    assert "the helper's own" not in res.stderr
    assert log.read_text() == "exit handler\n"


FORKED_GARBAGE = r"""
import gc, os
from fgrpo_theory.sim import beside
beside._cores = lambda: 2
class Session:
    def __del__(self):
        with open(os.environ["LOG"], "a") as f:
            f.write(f"closed in {'this process' if os.getpid() == me else 'the fork'}\n")
me = os.getpid()
s = Session()
s.self = s
gc.collect()  # s survives: it is in the oldest generation
del s  # garbage in a cycle, not yet collected
beside.compile_beside("gc:collect", lambda: None)  # the fork collects (its own compilation would)
gc.collect()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper forks on Linux")
def test_a_forked_helper_finalizes_none_of_this_processs_garbage(tmp_path):
    """A cycle this process had not collected when it forked is finalized once, here: the fork's
    collector does not see the objects that existed at the fork."""
    log = tmp_path / "log"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), FGRPO_THEORY_CACHE_DIR=str(tmp_path),
               PYTHONPATH=str(REPO), LOG=str(log))  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-c", FORKED_GARBAGE], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert log.read_text() == "closed in this process\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper forks on Linux")
@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("collecting", [True, False])
def test_a_forked_helper_leaves_this_processs_collector_as_it_was(frozen, collecting):
    """The fork freezes what it inherits in itself: this process freezes nothing more than it
    had (an application's own ``gc.freeze`` included) and collects if, and only if, it did."""
    import gc

    if frozen:
        gc.freeze()
    if not collecting:
        gc.disable()
    try:
        alive = [[] for _ in range(10_000)]  # tracked objects made after any freeze, kept
        before = gc.get_freeze_count()
        helper = beside._fork("os", "getpid")
        assert helper is not None and helper.wait() == 0
        # (a frozen object freed meanwhile leaves the count: it may only fall)
        assert gc.get_freeze_count() <= before and gc.isenabled() is collecting
        assert len(alive) == 10_000
    finally:
        gc.enable()
        gc.unfreeze()


_V1 = "4:cpu,cpuacct:/\n"  # a process's line of the v1 cpu hierarchy, at its top


@pytest.mark.parametrize(
    ("proc", "files", "quota"),
    [
        ("0::/\n", {"cpu.max": "max 100000\n"}, None),  # cgroup v2, no limit
        ("0::/\n", {"cpu.max": "max\n"}, None),
        ("0::/\n", {"cpu.max": "150000 100000\n"}, 1.5),  # docker --cpus=1.5
        ("0::/\n", {"cpu.max": "100000 100000\n"}, 1.0),
        ("0::/\n", {"cpu.max": "lots of\n"}, None),
        ("0::/\n", {"cpu.max": b"\xff\xfe"}, None),
        # nested (systemd slices, a host's cgroup namespace): the smallest limit on the way up
        ("0::/a/b\n", {"a/cpu.max": "50000 100000\n", "a/b/cpu.max": "max 100000\n"}, 0.5),
        ("0::/a/b\n", {"cpu.max": "300000 100000", "a/b/cpu.max": "200000 100000\n"}, 2.0),
        (_V1, {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        (_V1, {"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0.5),
        (_V1, {"cpu/cpu.cfs_quota_us": "50000\n"}, None),  # no period: unreadable
        # v1 mounted under the hierarchy's own name (no "cpu" link), the process in a container
        (
            "4:cpu,cpuacct:/docker/x\n",
            {"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "100000", "cpu,cpuacct/docker/x/"
             "cpu.cfs_period_us": "100000"},
            1.0,
        ),
        ("0::/\n" + _V1, {"cpu.max": "300000 100000\n", "cpu/cpu.cfs_quota_us": "100000\n",
                          "cpu/cpu.cfs_period_us": "100000\n"}, 1.0),  # both: the smaller
        (None, {"cpu.max": "100000 100000\n"}, 1.0),  # no /proc: the mount's top
        (None, {}, None),  # not Linux, or no cgroup mounted
    ],
)  # fmt: skip
def test_cpu_quota_reads_the_cgroup_limit(tmp_path, proc, files, quota):
    root = tmp_path / "cgroup"
    root.mkdir()
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    proc_file = tmp_path / "proc-self-cgroup"
    if proc is not None:
        proc_file.write_text(proc)
    assert cpus.cpu_quota(root, proc_file) == quota


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux affinity masks")
def test_no_helper_under_a_one_cpu_quota(monkeypatch, tmp_path):
    """Two cores in the affinity mask, a container limited to one CPU: no helper (it would only
    take CPU time from this process)."""
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    (tmp_path / "self-cgroup").write_text("0::/\n")
    monkeypatch.setattr(cpus, "CGROUP", tmp_path)
    monkeypatch.setattr(cpus, "PROC_CGROUP", tmp_path / "self-cgroup")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert beside._cores() == 1.0
    cores = beside._cores
    started = _spy(monkeypatch, "python")
    monkeypatch.setattr(beside, "_cores", cores)  # (the spy says 2)
    ran = []
    beside.compile_beside("fgrpo_theory.sim.kmetrics:metrics_address", lambda: ran.append(1))
    assert ran == [1] and started == []
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert beside._cores() == 2
