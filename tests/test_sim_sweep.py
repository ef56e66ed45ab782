"""run_sweep: one file per config, atomic writes, resume, the executor hook."""

from __future__ import annotations

import pandas as pd
import pytest

from fgrpo_theory._trust import KEY_NAME
from fgrpo_theory.sim import config_hash, expand_grid, run_one, run_sweep, simulate

SWEEP = {"K": 6, "logits": "0.5x1,0.0x5", "correct": 1, "N": [2, 8], "gamma": [0.0, 1.0],
         "steps": 20, "seeds": 3, "log_every": 10}  # fmt: skip


def _hidden(folder):
    """Hidden files left in a results folder, but its key (kept: it authenticates results)."""
    return [p for p in folder.glob(".*") if p.name != KEY_NAME]


def test_sweep_writes_one_file_per_config_and_resumes(tmp_path):
    cfgs = expand_grid(SWEEP)
    df = run_sweep(SWEEP, tmp_path, progress=False)
    files = sorted(p.name for p in tmp_path.iterdir() if p.name != KEY_NAME)
    assert files == sorted(f"{config_hash(c)}.parquet" for c in cfgs)
    assert len(df) == 4 * 3 * 3
    assert list(df.config_hash.unique()) == [config_hash(c) for c in cfgs]  # config order
    one = pd.read_parquet(tmp_path / files[0])
    pd.testing.assert_frame_equal(
        one, simulate(next(c for c in cfgs if config_hash(c) in files[0]))
    )

    # resume: nothing to run; then delete one file and only that config runs again
    calls: list[list] = []

    def recording(fn, items):
        calls.append(list(items))
        return [fn(c) for c in items]

    again = run_sweep(SWEEP, tmp_path, executor=recording)
    assert calls == [[]]
    pd.testing.assert_frame_equal(again, df)
    (tmp_path / f"{config_hash(cfgs[2])}.parquet").unlink()
    again = run_sweep(SWEEP, tmp_path, executor=recording)
    assert calls[-1] == [cfgs[2]]
    pd.testing.assert_frame_equal(again, df)
    # resume=False recomputes everything
    run_sweep(SWEEP, tmp_path, resume=False, executor=recording)
    assert calls[-1] == cfgs
    assert _hidden(tmp_path) == []  # no temp files


def test_executor_results_are_used_in_config_order(tmp_path):
    cfgs = expand_grid(SWEEP)
    df = run_sweep(cfgs, executor=lambda fn, items: map(fn, items))
    pd.testing.assert_frame_equal(df, pd.concat([run_one(c) for c in cfgs], ignore_index=True))


def test_csv_format(tmp_path):
    df = run_sweep(SWEEP, tmp_path, fmt="csv", progress=False)
    assert len(list(tmp_path.glob("*.csv"))) == 4
    back = run_sweep(SWEEP, tmp_path, fmt="csv", executor=lambda fn, items: [fn(c) for c in items])
    assert back.shape == df.shape


def test_bad_output_folder_fails_before_work(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    called = []
    with pytest.raises(ValueError, match="out_dir must be a folder"):
        run_sweep(SWEEP, f, executor=lambda fn, items: called.append(1) or [])
    assert not called
    with pytest.raises(ValueError, match="fmt must be 'parquet' or 'csv'"):
        run_sweep(SWEEP, tmp_path, fmt="xlsx")
    with pytest.raises(ValueError, match="N must be >= 1; got 0"):
        run_sweep({**SWEEP, "N": [0]}, tmp_path)


# ---------------------------------------------------- resume verifies what it reuses (issue 10)

SMALL = {**SWEEP, "gamma": 0.0, "seeds": 2}  # two configs: N = 2 and N = 8


def _files(folder):
    cfgs = expand_grid(SMALL)
    return cfgs, [folder / f"{config_hash(c)}.parquet" for c in cfgs]


def _one_line(err: str, *needles: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]


def test_resume_refuses_a_file_copied_over_another_configs_name(tmp_path, capfd):
    cfgs, (a, b) = _files(tmp_path)
    ref = run_sweep(SMALL, tmp_path, progress=False)
    b.write_bytes(a.read_bytes())
    capfd.readouterr()
    again = run_sweep(SMALL, tmp_path, progress=False)
    out, err = capfd.readouterr()
    assert out == ""
    _one_line(err, str(b), "recomputing")
    pd.testing.assert_frame_equal(again, ref)
    assert sorted(again["N"].unique()) == [2, 8]


def test_resume_refuses_an_edited_file(tmp_path, capfd):
    import pyarrow.parquet as pq

    cfgs, (a, _) = _files(tmp_path)
    ref = run_sweep(SMALL, tmp_path, progress=False)
    table = pq.read_table(a)  # keeps the stored metadata
    df = table.to_pandas()
    df.loc[0, "q_pos"] = 0.123
    import pyarrow as pa

    pq.write_table(
        pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(
            table.schema.metadata
        ),
        a,
    )
    capfd.readouterr()
    again = run_sweep(SMALL, tmp_path, progress=False)
    _one_line(capfd.readouterr().err, str(a), "edited")
    pd.testing.assert_frame_equal(again, ref)


def test_resume_refuses_results_of_other_simulator_code(tmp_path, capfd, monkeypatch):
    from fgrpo_theory.sim import sweep

    ref = run_sweep(SMALL, tmp_path, progress=False)
    monkeypatch.setattr(sweep, "simulator_digest", lambda: "0123456789abcdef")
    capfd.readouterr()
    calls = []
    again = run_sweep(
        SMALL, tmp_path, executor=lambda fn, items: calls.extend(items) or [fn(c) for c in items]
    )
    err = capfd.readouterr().err
    assert len(calls) == 2
    assert err.count("other simulator code") == 2 and len(err.strip().splitlines()) == 2
    pd.testing.assert_frame_equal(again, ref)
    capfd.readouterr()
    run_sweep(SMALL, tmp_path, executor=lambda fn, items: calls.extend(items) or [])
    assert len(calls) == 2 and capfd.readouterr().err == ""  # now reused


def test_corrupt_result_file_is_named_and_recomputed(tmp_path, capfd):
    cfgs, (a, _) = _files(tmp_path)
    ref = run_sweep(SMALL, tmp_path, progress=False)
    a.write_bytes(b"PAR1 not really parquet")
    capfd.readouterr()
    again = run_sweep(SMALL, tmp_path, progress=False)
    _one_line(capfd.readouterr().err, str(a), "not a readable result file", "replacing")
    pd.testing.assert_frame_equal(again, ref)
    assert pd.read_parquet(a).shape == ref[ref["N"] == 2].shape


def _dead_pid() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_temporaries_of_dead_runs_are_removed_and_nothing_else(tmp_path):
    """Only this tool's temporaries (a tag under the folder's key in the name) of dead
    processes are removed: a file that merely looks like one (audit: an unrelated hidden file
    was deleted) stays, as do temporaries of live processes."""
    import os

    from fgrpo_theory._io import _tag
    from fgrpo_theory._trust import folder_key

    cfgs, (a, _) = _files(tmp_path)
    key, _ = folder_key(tmp_path)

    def ours(pid, rand="0" * 16):
        head = f".{a.stem}.tmp-{pid}-{rand}"
        return tmp_path / f"{head}{_tag(key, head)}.parquet"

    dead, alive = ours(_dead_pid()), ours(os.getppid())  # a live process, not this one
    lookalike = tmp_path / f".{a.name}.tmp-{_dead_pid()}"
    forged = tmp_path / f".{a.stem}.tmp-{_dead_pid()}-{'0' * 32}.parquet"  # wrong tag
    for f in (dead, alive, lookalike, forged):
        f.write_bytes(b"half")
        os.utime(f, (f.stat().st_atime, f.stat().st_mtime - 120))  # not written for 2 minutes
    # a PID that is gone here, written to just now: a writer on another host sharing the folder
    # (a sweep starting there removed it, and the writer failed: 3 of 3 sweeps in a review)
    elsewhere = ours(_dead_pid(), "1" * 16)
    elsewhere.write_bytes(b"half")
    run_sweep(SMALL, tmp_path, progress=False)
    assert not dead.exists()
    assert alive.exists() and lookalike.exists() and forged.exists() and elsewhere.exists()


def _record(pid, token="0" * 16, host=None):
    import json
    import socket

    host = socket.gethostname() if host is None else host
    return json.dumps({"tool": "fgrpo-theory", "pid": pid, "host": host, "token": token})


def test_a_stale_empty_lock_taken_over_first_by_another_is_not_taken_again(tmp_path, monkeypatch):
    """Two processes judge the same empty lock stale (a crash between its creation and its
    record). The first moves it aside and creates its own, still empty while it writes the
    record; the second then moved that one aside, compared bytes (empty both) and deleted it:
    both computed the config (88 of 100 rounds in a review, with delays injected). Here the
    first's takeover happens right after the second's judgement: the second must back off and
    leave the first's lock in place."""
    import os
    import time

    from fgrpo_theory.sim import locks

    lock = tmp_path / ".0123456789abcdef.lock"
    lock.write_bytes(b"")
    old = time.time() - 10 * locks.LOCK_GRACE
    os.utime(lock, (old, old))
    judge = locks._lock_state

    def judged_then_taken_by_another(p):
        state = judge(p)
        assert state[0] and state[2] == b""  # stale and empty
        p.unlink()  # the other process moved it aside and removed it ...
        p.write_bytes(b"")  # ... and created its own, not written yet
        return state

    monkeypatch.setattr(locks, "_lock_state", judged_then_taken_by_another)
    assert locks._try_lock(lock) is False
    assert lock.exists() and lock.read_bytes() == b""
    assert [p.name for p in tmp_path.iterdir()] == [lock.name]  # nothing left aside
    assert time.time() - os.lstat(lock).st_mtime < locks.LOCK_GRACE  # the other's, new file


def test_a_released_lock_is_gone_before_its_token(tmp_path, monkeypatch):
    """A thread that reads a lock naming this process judges it by its token: without one it
    is stale. Releasing discarded the token first and removed the file after, so in between
    another thread could take the lock over while it was being released (a review's stress test:
    a held lock missing, one left behind for 10 minutes). Every token discarded must be that
    of a lock file already removed."""
    from fgrpo_theory.sim import locks, sweep

    present_at_discard = []
    discarded = []

    class Tokens(set):
        def discard(self, token):
            discarded.append(token)
            present_at_discard.extend(
                p.name for p in tmp_path.glob("*.lock") if token in p.read_text()
            )
            super().discard(token)

    tokens = Tokens()
    monkeypatch.setattr(locks, "_MY_TOKENS", tokens)
    monkeypatch.setattr(sweep, "_MY_TOKENS", tokens)
    run_sweep(SMALL, tmp_path, progress=False)
    assert len(discarded) == 2  # both configs' locks were taken and released
    assert present_at_discard == [] and _hidden(tmp_path) == []


def test_lock_of_a_dead_process_is_taken_over(tmp_path):
    cfgs, (a, _) = _files(tmp_path)
    lock = tmp_path / f".{config_hash(cfgs[0])}.lock"
    lock.write_text(_record(_dead_pid()))
    df = run_sweep(SMALL, tmp_path, progress=False)
    assert sorted(df["N"].unique()) == [2, 8] and a.is_file()
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize(
    "content",
    [
        "own",  # our own PID, not our lock: PID 1 in a container that restarted
        "live",  # a bare PID of a live process (no record of this tool)
        "99999999999999999999999999",  # overflowed os.kill
        "garbage \x00",
    ],
)
def test_a_stale_lock_is_taken_over_with_a_message(tmp_path, capfd, content):
    """Audit: a lock naming a live foreign PID or the sweep's own PID blocked resume forever
    with no message; a huge number raised OverflowError."""
    import os
    import time

    cfgs, (a, _) = _files(tmp_path)
    lock = tmp_path / f".{config_hash(cfgs[0])}.lock"
    text = {"own": _record(os.getpid()), "live": f"{os.getppid()}\n"}.get(content, content)
    lock.write_text(text)
    old = time.time() - 30  # past the grace for a lock that holds no record
    os.utime(lock, (old, old))
    capfd.readouterr()
    t0 = time.monotonic()
    df = run_sweep(SMALL, tmp_path, progress=False)
    assert time.monotonic() - t0 < 60
    assert sorted(df["N"].unique()) == [2, 8] and a.is_file()
    assert _hidden(tmp_path) == []


def test_a_held_lock_is_waited_for_with_a_message_naming_its_holder(tmp_path, capfd, monkeypatch):
    """A lock of a live process of this tool: one line names it; once it is not refreshed for
    LOCK_TTL seconds it is taken over (the bound)."""
    import os
    import subprocess
    import sys
    import time

    from fgrpo_theory.sim import sweep

    cfgs, (a, _) = _files(tmp_path)
    lock = tmp_path / f".{config_hash(cfgs[0])}.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = _record(holder.pid).replace(
            '"token"', f'"start": "{sweep._start_time(holder.pid)}", "token"'
        )
        lock.write_text(rec)
        from fgrpo_theory.sim import locks

        monkeypatch.setattr(locks, "LOCK_TTL", 1.5)
        monkeypatch.setattr(sweep, "LOCK_TTL", 1.5)  # the waiting message quotes it
        capfd.readouterr()
        t0 = time.monotonic()
        df = run_sweep(SMALL, tmp_path, progress=False)
        waited = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    err = capfd.readouterr().err
    assert f"PID {holder.pid}" in err and "waiting for config" in err and str(lock) in err
    assert err.count("waiting for config") == 1
    assert waited >= 1.0 and sorted(df["N"].unique()) == [2, 8]
    assert os.path.exists(a)


_CONCURRENT = """
import os, sys, time
from fgrpo_theory.sim import config_hash, run_sweep
sweep = {sweep!r}
log = {log!r}

def recording(fn, items):
    for c in items:
        with open(log, "a") as f:
            f.write(config_hash(c) + "\\n")
        time.sleep(0.3)
        yield fn(c)

run_sweep(sweep, {out!r}, executor=recording)
"""


@pytest.mark.slow
def test_two_sweeps_on_one_folder_compute_each_config_once(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "log"
    code = _CONCURRENT.format(sweep=SWEEP, log=str(log), out=str(tmp_path / "out"))
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        assert [p.wait(timeout=300) for p in procs] == [0, 0]
    finally:  # a timed-out run leaves no sweep behind
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    computed = log.read_text().split()
    assert sorted(computed) == sorted(config_hash(c) for c in expand_grid(SWEEP))
    assert _hidden(tmp_path / "out") == []


def test_no_progress_bar_from_python_unless_asked(tmp_path, capfd):
    run_sweep(SMALL, tmp_path / "a")  # stderr is not a terminal under pytest
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    run_sweep(SMALL, tmp_path / "b", progress=True)
    out, err = capfd.readouterr()
    assert out == ""  # a bar never writes to stdout
    # nor to a stderr that is not a terminal: a transient bar there left an empty line, so a
    # Ctrl-C's one line 'fgrpo-theory: interrupted' came out as two
    assert err == ""


_CONCURRENT_LOCAL = """
import sys
from fgrpo_theory.sim import runner, sweep, config_hash, run_sweep
real = runner.simulate
log = {log!r}

def recording(cfg, threads=None):
    with open(log, "a") as f:
        f.write(config_hash(cfg) + "\\n")
    return real(cfg, threads=threads)

runner.simulate = recording
run_sweep({sweep!r}, {out!r}, progress=False)
"""


@pytest.mark.slow
def test_two_local_sweeps_share_the_work(tmp_path):
    import subprocess
    import sys

    sweep = {**SWEEP, "steps": 400}
    log = tmp_path / "log"
    code = _CONCURRENT_LOCAL.format(sweep=sweep, log=str(log), out=str(tmp_path / "out"))
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        assert [p.wait(timeout=300) for p in procs] == [0, 0]
    finally:  # a timed-out run leaves no sweep behind
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    computed = log.read_text().split()
    assert sorted(computed) == sorted(config_hash(c) for c in expand_grid(sweep))
    assert _hidden(tmp_path / "out") == []


def test_csv_results_are_reused_on_resume_and_an_edit_is_caught(tmp_path, capfd):
    """A CSV read back has other dtypes (empty text cells become NaN): the rows digest must
    match anyway, so resume reuses CSV results (it recomputed every one), and still catches an
    edited value."""
    ref = run_sweep(SMALL, tmp_path, fmt="csv", progress=False)
    files = sorted(tmp_path.glob("*.csv"))
    stamps = [f.stat().st_mtime_ns for f in files]
    capfd.readouterr()
    again = run_sweep(SMALL, tmp_path, fmt="csv", progress=False)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert [f.stat().st_mtime_ns for f in files] == stamps  # reused, not rewritten
    assert len(again) == len(ref)
    assert (again["q_pos"].to_numpy() == ref["q_pos"].to_numpy()).all()
    edited = pd.read_csv(files[0])
    edited.loc[0, "q_pos"] = 0.123
    edited.to_csv(files[0], index=False)
    run_sweep(SMALL, tmp_path, fmt="csv", progress=False)
    _one_line(capfd.readouterr().err, str(files[0]), "edited", "recomputing")


def test_a_lock_whose_owner_has_not_written_its_pid_yet_is_not_taken_over(tmp_path):
    """Between O_EXCL creation and the PID write a lock is empty: a second sweep must treat it
    as held (it was read as PID 0, a dead owner, and taken over), until it is 10 s old."""
    import json
    import os
    import time

    from fgrpo_theory.sim.sweep import _try_lock

    lock = tmp_path / ".abc.lock"
    lock.write_text("")
    assert not _try_lock(lock)
    old = time.time() - 60
    os.utime(lock, (old, old))
    assert _try_lock(lock)  # empty for a minute: its writer died
    assert json.loads(lock.read_text())["pid"] == os.getpid()
