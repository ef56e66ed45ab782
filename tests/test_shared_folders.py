"""A shared output or cache folder cannot be turned against the user (issue 26, causes 1-4).

Symlinks and files planted under the names this tool writes never make it write elsewhere;
forged, relabelled or foreign result files are never reused (nor read beyond their footer);
cleanup removes only this tool's own temporaries; the kernel cache is used only in a folder
nobody else can write.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory._trust import KEY_NAME, folder_key, owned_private_dir
from fgrpo_theory.sim import config_hash, expand_grid, run_sweep

SMALL = {"K": 6, "logits": "0.5x1,0.0x5", "correct": 1, "N": [2, 8], "steps": 10, "seeds": 2,
         "log_every": 5}  # fmt: skip


def _victim(tmp_path):
    v = tmp_path / "victim.txt"
    v.write_text("precious\n")
    return v


def test_sweep_replaces_a_planted_symlink_and_never_writes_through_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = _victim(tmp_path)
    cfgs = expand_grid(SMALL)
    h = config_hash(cfgs[0])
    (out / f"{h}.parquet").symlink_to(victim)  # the result name itself
    for pid in range(os.getpid() - 5, os.getpid() + 50):  # the old predictable temporaries
        (out / f".{h}.parquet.tmp-{pid}").symlink_to(victim)
    (out / f".write-test-{os.getpid()}").symlink_to(victim)  # the old write probe
    run_sweep(SMALL, out, progress=False)
    assert victim.read_text() == "precious\n"
    assert (out / f"{h}.parquet").is_file() and not (out / f"{h}.parquet").is_symlink()


def test_save_figure_replaces_a_planted_symlink_collides_never_and_leaves_no_temporary(
    tmp_path, monkeypatch
):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fgrpo_theory.plotting import save_figure

    victim = _victim(tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0.3, 0.7])
    (tmp_path / "f.png").symlink_to(victim)
    (tmp_path / "f.png.tmp").symlink_to(victim)  # the old predictable temporary
    save_figure(fig, tmp_path / "f", formats="png", dpi=200)
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "f.png").is_symlink() and (tmp_path / "f.png").is_file()
    # two writers of one name never collide (audit: FileNotFoundError in 15 of 1,198 saves)
    (tmp_path / "f.png").unlink()
    errors = []
    figs = [plt.subplots()[0] for _ in range(2)]
    for i, f in enumerate(figs):
        f.axes[0].plot([0, 1], [i, 1 - i])

    def save(f):
        try:
            for _ in range(6):
                (tmp_path / "g.png").unlink(missing_ok=True)
                save_figure(f, tmp_path / "g", formats="png", dpi=200)
        except Exception as e:  # noqa: BLE001 - any failure is the bug
            errors.append(e)

    threads = [threading.Thread(target=save, args=(f,)) for f in figs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # a failing write leaves the old file and no temporary behind
    before = (tmp_path / "g.png").read_bytes()

    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(ValueError, match="No space left"):
        save_figure(fig, tmp_path / "g", formats="png", dpi=200)
    monkeypatch.undo()
    assert (tmp_path / "g.png").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    plt.close("all")


def test_output_file_replaces_a_symlink_but_devices_are_written_in_place(tmp_path):
    from fgrpo_theory._io import write_atomic

    victim = _victim(tmp_path)
    link = tmp_path / "out.csv"
    link.symlink_to(victim)
    write_atomic(link, "a,b\n")
    assert victim.read_text() == "precious\n" and link.read_text() == "a,b\n"
    assert not link.is_symlink()
    write_atomic("/dev/null", "x")  # a device: written in place, never renamed over


def test_a_system_link_to_a_regular_file_is_written_through_not_replaced(tmp_path, monkeypatch):
    """``--output /dev/stdout`` with stdout redirected to a file: /dev/stdout is a link that
    resolves to a regular file. It is written through, never renamed over (as root, the rename
    replaced the link /dev/stdout itself). A stand-in folder plays /dev, so a failure here harms
    nothing."""
    from fgrpo_theory import _io

    dev = tmp_path / "dev"
    dev.mkdir()
    redirected = tmp_path / "redirected.csv"
    redirected.write_text("old\n")
    stdout = dev / "stdout"
    stdout.symlink_to(redirected)
    monkeypatch.setattr(_io, "_DEVICE_ROOTS", (str(dev) + "/",))
    _io.write_atomic(stdout, "a,b\n")
    assert stdout.is_symlink() and os.readlink(stdout) == str(redirected)
    assert redirected.read_text() == "a,b\n"
    assert sorted(p.name for p in dev.iterdir()) == ["stdout"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_another_users_link_or_a_regular_file_under_dev_is_replaced(tmp_path, monkeypatch):
    """``/dev/shm`` is world-writable: a link another user plants there is replaced, never
    written through (a file outside the output folder would be overwritten), and a regular file
    there is replaced whole (temporary and rename), not rewritten in place."""
    from fgrpo_theory import _io

    dev = tmp_path / "dev"
    shm = dev / "shm"
    shm.mkdir(parents=True)
    os.chmod(shm, 0o1777)
    monkeypatch.setattr(_io, "_DEVICE_ROOTS", (str(dev) + "/",))
    victim = _victim(tmp_path)
    link = shm / "out.csv"
    link.symlink_to(victim)
    os.chown(link, 65534, 65534, follow_symlinks=False)
    _io.write_atomic(link, "a,b\n")
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink() and link.read_text() == "a,b\n"
    before = os.stat(link).st_ino
    _io.write_atomic(link, "c,d\n")  # now a regular file of ours: replaced by a rename
    assert link.read_text() == "c,d\n" and os.stat(link).st_ino != before
    # a link of ours, but in a folder another user owns (who may swap it): replaced too
    theirs = dev / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    mine = theirs / "out.csv"
    mine.symlink_to(victim)
    _io.write_atomic(mine, "e,f\n")
    assert victim.read_text() == "precious\n" and not mine.is_symlink()


def _forge(path, df, meta_from):
    """Rewrite ``path`` with ``df`` and the stored metadata of ``meta_from``, its plain rows
    digest recomputed as an attacker could (the old, unkeyed digest)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = dict(pq.read_metadata(meta_from).metadata)
    text = df.to_csv(index=False, lineterminator="\n")
    meta[b"fgrpo_theory.rows_digest"] = hashlib.sha256(text.encode()).hexdigest()[:16].encode()
    pq.write_table(
        pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(meta), path
    )


def test_forged_results_are_recomputed_not_reused(tmp_path, capfd):
    ref = run_sweep(SMALL, tmp_path, progress=False)
    cfgs = expand_grid(SMALL)
    a, b = (tmp_path / f"{config_hash(c)}.parquet" for c in cfgs)
    rows_a = pd.read_parquet(a)
    forged = rows_a.copy()
    forged["q_pos"] = np.inf
    forged.loc[0, "m_ret"] = np.nan
    _forge(a, forged, a)  # NaN / inf rows, plain digest recomputed
    _forge(b, rows_a.assign(config_hash=config_hash(cfgs[1])), b)  # another config's rows
    capfd.readouterr()
    again = run_sweep(SMALL, tmp_path, progress=False)
    err = capfd.readouterr().err
    assert err.count("digest does not verify") == 2 and "Traceback" not in err
    pd.testing.assert_frame_equal(again, ref)
    assert np.isfinite(again["q_pos"]).all() and again["m_ret"].notna().all()


def test_a_foreign_file_is_not_read_beyond_its_footer(tmp_path, monkeypatch):
    """Audit: a 1.8 MB foreign Parquet file named like a config hash was loaded whole (7.1 GB)
    before its hash was checked. Now only its footer is read."""
    from fgrpo_theory.sim import sweep

    cfgs = expand_grid(SMALL)
    big = pd.DataFrame({"x": np.zeros(200_000)})
    for c in cfgs:
        big.to_parquet(tmp_path / f"{config_hash(c)}.parquet")
    read = []
    real = sweep._read_rows
    monkeypatch.setattr(sweep, "_read_rows", lambda p: read.append(p) or real(p))
    run_sweep(SMALL, tmp_path, progress=False)
    assert read == []


def test_a_key_file_this_user_cannot_trust_reuses_nothing(tmp_path, capfd):
    run_sweep(SMALL, tmp_path, progress=False)
    key = tmp_path / KEY_NAME
    os.chmod(key, 0o644)  # readable by others: anyone could forge digests
    assert folder_key(tmp_path)[0] is None
    capfd.readouterr()
    calls = []
    run_sweep(SMALL, tmp_path, executor=lambda fn, cs: calls.extend(cs) or [fn(c) for c in cs])
    err = capfd.readouterr().err
    assert len(calls) == 2 and "cannot be authenticated" in err and "other users" in err
    key.unlink()
    key.symlink_to(_victim(tmp_path))
    assert folder_key(tmp_path)[0] is None  # a symlink is never followed


def test_figure_table_cache_is_verified_and_best_effort(tmp_path, monkeypatch, capfd):
    from fgrpo_theory_experiments import cache

    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "c"))
    calls = []

    def compute():
        calls.append(1)
        return pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]})

    df, hit = cache.cached("t", {"a": 1}, compute)
    assert not hit
    again, hit = cache.cached("t", {"a": 1}, compute)
    assert hit and len(calls) == 1
    pd.testing.assert_frame_equal(again, df)
    path = cache.cache_path("t", {"a": 1}, False)
    pd.DataFrame({"x": [9.0], "y": [np.nan]}).to_parquet(path)  # forged: no curves
    capfd.readouterr()
    again, hit = cache.cached("t", {"a": 1}, compute)
    assert not hit and len(calls) == 2 and "does not verify" in capfd.readouterr().err
    pd.testing.assert_frame_equal(again, df)
    path.write_bytes(b"")  # zero bytes: recomputed, not an error until --force
    again, hit = cache.cached("t", {"a": 1}, compute)
    assert not hit and len(calls) == 3
    # a cache that cannot be written costs one line, not the run
    monkeypatch.setenv(cache.CACHE_ENV, "/proc/no-cache-here")
    capfd.readouterr()
    again, hit = cache.cached("t", {"a": 1}, compute)
    pd.testing.assert_frame_equal(again, df)
    assert len(capfd.readouterr().err.strip().splitlines()) == 1


def test_owned_private_dir(tmp_path):
    d = tmp_path / "mine"
    d.mkdir(mode=0o700)
    assert owned_private_dir(d) is None
    os.chmod(d, 0o777)
    assert "other users can write" in owned_private_dir(d)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "mine")
    assert owned_private_dir(link) is not None


_PROBE = """
import sys
from fgrpo_theory import _numba_cache as nc
print(nc.kernel_cache_dir())
"""


def test_kernel_cache_is_refused_in_a_folder_others_can_write(tmp_path):
    """Numba's index files are pickles: a cache folder others can write would run their code.
    Such a folder is refused with one stderr line and a private folder is used instead."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    env = dict(os.environ, FGRPO_THEORY_CACHE_DIR=str(shared), HOME=str(tmp_path / "home"))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("XDG_CACHE_HOME", None)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    used = proc.stdout.strip()
    assert not used.startswith(str(shared))
    assert proc.stderr.count("\n") == 1 and str(shared) in proc.stderr
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    env["FGRPO_THEORY_CACHE_DIR"] = str(private)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.strip() == str(private / "numba") and proc.stderr == ""


def test_a_missing_home_is_never_created(tmp_path, monkeypatch):
    from fgrpo_theory_experiments import cache

    home = tmp_path / "no-such-home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    df, hit = cache.cached("t", {}, lambda: pd.DataFrame({"x": [1.0]}))
    assert not hit and list(df["x"]) == [1.0] and not home.exists()


def test_a_key_file_being_written_by_another_process_is_waited_for(tmp_path):
    """Two sweeps started together on a new folder: the second found the key file the first
    had just created (empty, O_EXCL) but not yet written, refused it as 'not a 32-byte key',
    trusted none of the first one's results and computed a config twice (seen in CI). Here the
    'first process' writes its key 0.3 s after creating the file: the reader waits for it and
    gets that key; an old short file is still refused at once."""
    import threading
    import time

    path = tmp_path / KEY_NAME
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    key = os.urandom(32)

    def finish():
        time.sleep(0.3)
        os.write(fd, key)
        os.close(fd)

    writer = threading.Thread(target=finish)
    writer.start()
    t0 = time.monotonic()
    got, why = folder_key(tmp_path)
    writer.join()
    assert (got, why) == (key, None)
    assert 0.25 < time.monotonic() - t0 < 5.0
    # a short key file that nobody is writing (older than the grace period) is refused at once
    old = tmp_path / "old"
    old.mkdir()
    (old / KEY_NAME).write_bytes(b"short")
    os.chmod(old / KEY_NAME, 0o600)
    os.utime(old / KEY_NAME, (time.time() - 60, time.time() - 60))
    t0 = time.monotonic()
    got, why = folder_key(old)
    assert got is None and "not a 32-byte key" in why
    assert time.monotonic() - t0 < 0.5


# --- issue 26, round two: special files and crashes in shared folders -----------------------

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _run(code: str, timeout: float = 60):
    """Run ``code`` in a fresh interpreter; None if it had to be killed (it hung)."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def _hidden_but_key(folder):
    return sorted(p.name for p in folder.iterdir() if p.name != KEY_NAME)


def test_an_empty_key_file_left_by_a_crash_is_replaced(tmp_path, monkeypatch):
    """A process killed between creating the key file and writing it left 0 bytes: it was
    refused forever as 'not a 32-byte key'. Now an empty key file of this user that nobody is
    writing is replaced by a whole new key; a short non-empty one is still refused."""
    import time

    from fgrpo_theory import _trust

    key = tmp_path / KEY_NAME
    key.write_bytes(b"")
    os.chmod(key, 0o600)
    os.utime(key, (time.time() - 60, time.time() - 60))  # the crash was a minute ago
    t0 = time.monotonic()
    got, why = folder_key(tmp_path)
    assert why is None and len(got) == 32 and time.monotonic() - t0 < 1.0
    st = os.lstat(key)
    assert key.read_bytes() == got and st.st_nlink == 1 and st.st_mode & 0o777 == 0o600
    assert folder_key(tmp_path) == (got, None)  # the same key from now on
    assert _hidden_but_key(tmp_path) == []  # no temporary, no file set aside, left behind
    # a fresh empty one is waited for (its creator may be writing it), then replaced
    monkeypatch.setattr(_trust, "_KEY_WRITE_SECONDS", 0.3)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / KEY_NAME).write_bytes(b"")
    os.chmod(fresh / KEY_NAME, 0o600)
    t0 = time.monotonic()
    got, why = folder_key(fresh)
    assert why is None and (fresh / KEY_NAME).read_bytes() == got
    assert 0.25 < time.monotonic() - t0 < 2.0
    # an empty key file readable by others is not this user's private key: refused, kept
    other = tmp_path / "other"
    other.mkdir()
    (other / KEY_NAME).write_bytes(b"")
    os.chmod(other / KEY_NAME, 0o644)
    got, why = folder_key(other)
    assert got is None and "other users can read" in why and (other / KEY_NAME).exists()


@pytest.mark.skipif(not IS_ROOT, reason="planting another user's file needs root (chown)")
def test_an_empty_key_file_of_another_user_is_refused_not_replaced(tmp_path):
    import time

    key = tmp_path / KEY_NAME
    key.write_bytes(b"")
    os.chmod(key, 0o600)
    os.chown(key, 65534, 65534)
    os.utime(key, (time.time() - 60, time.time() - 60))
    got, why = folder_key(tmp_path)
    assert got is None and "belongs to another user" in why and "\n" not in why
    assert os.lstat(key).st_uid == 65534 and key.read_bytes() == b""


def test_a_key_whose_creator_removes_its_temporary_while_it_is_read_is_taken(tmp_path, monkeypatch):
    """A creator links its whole temporary to the key's name, then removes the temporary. A
    reader that looked at the file before the removal (two links: being written) and again
    after it (one link) refused it as another user's trick, "it has other hard links": about 1
    in 300 rounds of six concurrent creators. Here the removal happens right after the reader's
    first look: the key is taken."""
    key = os.urandom(32)
    path = tmp_path / KEY_NAME
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, key)
    os.close(fd)
    temp = tmp_path / f"{KEY_NAME}.tmp-{os.getpid()}-{'a' * 16}"
    os.link(path, temp)
    inode = os.stat(path).st_ino
    real_fstat = os.fstat

    def fstat_then_creator_finishes(fd):
        st = real_fstat(fd)
        if st.st_ino == inode and temp.exists():
            temp.unlink()
        return st

    monkeypatch.setattr(os, "fstat", fstat_then_creator_finishes)
    assert folder_key(tmp_path) == (key, None)
    assert not temp.exists()


def test_the_key_file_appears_whole_once_for_concurrent_creators(tmp_path, monkeypatch):
    """The key is written to an O_EXCL temporary, synced and hard-linked to its name: readers
    never see it short, concurrent creators all get one key, nothing else is left (a killed
    creator's temporary is removed by the next creation); where hard links are not supported it
    is created in place with O_EXCL, as before."""
    import errno

    barrier = threading.Barrier(6)
    got = []

    def create():
        barrier.wait()
        got.append(folder_key(tmp_path))

    threads = [threading.Thread(target=create) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    key = (tmp_path / KEY_NAME).read_bytes()
    assert len(key) == 32 and got == [(key, None)] * 6
    assert os.lstat(tmp_path / KEY_NAME).st_nlink == 1 and _hidden_but_key(tmp_path) == []

    # a creator killed between writing its temporary and linking it left the temporary: the
    # next creation removes it (old, of a PID that is gone); nothing else named alike
    import time

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    left = crashed / f"{KEY_NAME}.tmp-{dead}-{'0' * 16}"
    young = crashed / f"{KEY_NAME}.tmp-{dead}-{'1' * 16}"
    live = crashed / f"{KEY_NAME}.tmp-{os.getpid()}-{'2' * 16}"
    other = crashed / f"{KEY_NAME}.tmp-{dead}-not-ours"
    for f in (left, young, live, other):
        f.write_bytes(os.urandom(32))
        if f is not young:
            os.utime(f, (time.time() - 120, time.time() - 120))
    got, why = folder_key(crashed)
    assert why is None and (crashed / KEY_NAME).read_bytes() == got
    assert not left.exists() and young.exists() and live.exists() and other.exists()

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    plain = tmp_path / "plain"
    plain.mkdir()
    got, why = folder_key(plain)
    assert why is None and (plain / KEY_NAME).read_bytes() == got
    assert _hidden_but_key(plain) == []


def test_a_fifo_as_the_key_file_is_refused_in_one_line_at_once(tmp_path):
    os.mkfifo(tmp_path / KEY_NAME)
    res = _run(
        f"from fgrpo_theory._trust import folder_key; print(folder_key({str(tmp_path)!r})[1])",
        timeout=20,
    )
    assert res is not None and res.returncode == 0, res and res.stderr
    assert "not a regular file" in res.stdout and res.stdout.count("\n") == 1


def test_a_fifo_as_a_lock_is_no_lock_and_never_waited_for(tmp_path, monkeypatch, capfd):
    """A FIFO planted under a lock's name hung the sweep (opened to read its record). It is no
    lock of this tool: moved aside at once; if it cannot be moved, the config is computed
    without a lock, with one line on stderr (waiting for it would never end)."""
    from fgrpo_theory.sim import locks

    lock = tmp_path / ".0123456789abcdef.lock"
    os.mkfifo(lock)
    res = _run(
        "from pathlib import Path; from fgrpo_theory.sim.locks import _lock_state, _try_lock; "
        f"p = Path({str(lock)!r}); print(_lock_state(p)); print(_try_lock(p))",
        timeout=20,
    )
    assert res is not None and res.returncode == 0, res and res.stderr
    assert locks.NOT_A_LOCK in res.stdout and res.stdout.endswith("True\n")
    assert lock.is_file() and locks._read_lock(lock)[1] is not None  # the child's record
    assert _hidden_but_key(tmp_path) == [lock.name]  # the FIFO was removed, the lock taken
    lock.unlink()
    os.mkfifo(lock)

    def refused(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(locks.os, "replace", refused)
    capfd.readouterr()
    assert locks._try_lock(lock) and locks._try_lock(lock)
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and str(lock) in err and "not a lock of this tool" in err
    assert locks._read_lock(lock) == (b"", None)


def test_a_sweep_with_a_fifo_as_a_lock_finishes(tmp_path):
    cfgs = expand_grid(SMALL)
    os.mkfifo(tmp_path / f".{config_hash(cfgs[0])}.lock")
    res = _run(
        "from fgrpo_theory.sim import run_sweep; "
        f"df = run_sweep({SMALL!r}, {str(tmp_path)!r}, progress=False); print(len(df))",
        timeout=240,
    )
    assert res is not None, "the sweep waited for a FIFO planted as a lock"
    assert res.returncode == 0, res.stderr
    assert all((tmp_path / f"{config_hash(c)}.parquet").is_file() for c in cfgs)


_FIG = (
    "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; "
    "from fgrpo_theory.plotting import save_figure; fig, ax = plt.subplots(); "
)


def test_save_figure_into_a_fifo_of_ones_own_needs_a_reader(tmp_path):
    """A FIFO the user made is written in place (as before), but only when a process reads it:
    with none, one line at once instead of waiting forever."""
    fifo = tmp_path / "fig.png"
    os.mkfifo(fifo)
    code = _FIG + f"save_figure(fig, {str(tmp_path / 'fig')!r}, formats='png', dpi=200)"
    res = _run(code, timeout=40)
    assert res is not None, "save_figure waited for a reader of its FIFO"
    assert res.returncode == 1 and "none reads this one" in res.stderr
    assert "ValueError: stem" in res.stderr.strip().splitlines()[-1]
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = _run(code, timeout=40)
    reader.join(timeout=40)
    assert res is not None and res.returncode == 0, res and res.stderr
    assert got and got[0].startswith(b"\x89PNG") and len(got[0]) > 1000
    assert fifo.is_fifo()  # written in place, never replaced


_LEAVES = """
import os, sys
from fgrpo_theory._io import write_atomic
fifo = sys.argv[1]
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, there when the writer looks
import fgrpo_theory._io as io
probe = io._open_fifo
def probe_then_leave(*a):
    fd = probe(*a)
    os.close(reader)  # ... that leaves before the result is written
    return fd
io._open_fifo = probe_then_leave
try:
    write_atomic(fifo, b"x" * 100_000, name="--out")
except ValueError as e:
    print(e)
"""


def test_a_fifo_whose_reader_leaves_after_the_check_is_refused_not_waited_on(tmp_path):
    """The writer opened the FIFO a second time after the check that a process reads it: a
    reader that left in between made that open wait forever (Ctrl-C only). The result now goes
    through the checked descriptor: a reader that left is one line."""
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    try:
        res = subprocess.run(
            [sys.executable, "-c", _LEAVES, str(fifo)], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the writer waited for a reader that had left")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"--out must be a writable path (Broken pipe); got '{fifo}'"
    assert fifo.is_fifo()


def test_a_result_larger_than_a_pipe_reaches_a_slow_reader_of_a_fifo_whole(tmp_path):
    """A FIFO is written in place through a non-blocking descriptor: the writer waits while
    the reader has not taken the last chunk (here 3 MB, many pipe buffers, read slowly)."""
    import time

    from fgrpo_theory._io import write_atomic

    fifo = tmp_path / "big.bin"
    os.mkfifo(fifo)
    data = np.random.default_rng(5).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    got = bytearray()
    opened = threading.Event()

    def read_slowly() -> None:
        with open(fifo, "rb", buffering=0) as fh:
            opened.set()
            while chunk := fh.read(1 << 18):
                got.extend(chunk)
                time.sleep(0.01)

    reader = threading.Thread(target=read_slowly, daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the reader's open returns once a writer opens too
        try:
            write_atomic(fifo, data)
            break
        except ValueError as e:  # not open for reading yet: no reader
            assert "none reads this one" in str(e)
            time.sleep(0.01)
    reader.join(timeout=30)
    assert not reader.is_alive() and opened.is_set()
    assert bytes(got) == data and fifo.is_fifo()


@pytest.mark.skipif(not IS_ROOT, reason="a symlink owned by another user needs root (chown -h)")
def test_a_cache_folder_is_refused_if_any_symlink_on_the_way_is_foreign(tmp_path):
    """Every symlink met on the way (also inside a link's target) must be the user's or root's;
    and the folders holding the resolved folder are checked as well as those written."""
    real = tmp_path / "private"
    (real / "numba").mkdir(parents=True, mode=0o700)
    os.chmod(real, 0o700)
    sticky = tmp_path / "shared"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    mine = sticky / "mine"
    mine.symlink_to(real)
    assert owned_private_dir(mine / "numba") is None  # the user's own link, in a sticky folder
    theirs = sticky / "theirs"
    theirs.symlink_to(real)
    os.chown(theirs, 65534, 65534, follow_symlinks=False)
    chain = sticky / "chain"
    chain.symlink_to("theirs")  # the user's link to another user's link
    for p in (theirs / "numba", chain / "numba"):
        why = owned_private_dir(p)
        assert why is not None and str(theirs) in why and "another user" in why
    open_dir = tmp_path / "open"
    (open_dir / "numba" / "sub").mkdir(parents=True, mode=0o700)
    os.chmod(open_dir, 0o777)  # anyone can rename numba away
    via = tmp_path / "via"
    via.symlink_to(open_dir / "numba")  # the folders as written look private
    why = owned_private_dir(via / "sub")
    assert why is not None and f"other users can write to {open_dir}," in why


def test_a_cache_folder_is_refused_if_a_symlink_on_the_way_sits_in_a_folder_anyone_can_write(
    tmp_path,
):
    """Whoever can write the folder holding a link met on the way (not sticky) can replace the
    link, whoever owns it: ``link -> shared/l2 -> real`` with ``shared`` mode 0777 was accepted
    (only the folders above the path as written and as resolved were checked), and another user
    could then retarget ``shared/l2`` to a folder of theirs (Numba pickles: code execution).
    The same for a folder looked up and left again by ``..``."""
    real = tmp_path / "real"
    (real / "cache").mkdir(parents=True, mode=0o700)
    os.chmod(real, 0o700)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    (shared / "l2").symlink_to(real)
    link = tmp_path / "link"
    link.symlink_to(shared / "l2")
    why = owned_private_dir(link / "cache")
    assert why is not None and f"other users can write to {shared}," in why
    assert str(shared / "l2") in why and "\n" not in why
    (shared / "d").mkdir()
    dotdot = tmp_path / "dotdot"
    dotdot.symlink_to(f"{shared}/d/../../real")  # "d" could be replaced by a link elsewhere
    why = owned_private_dir(dotdot / "cache")
    assert why is not None and f"other users can write to {shared}," in why
    os.chmod(shared, 0o1777)  # sticky: only the links' owner (here the user) can replace them
    assert owned_private_dir(link / "cache") is None
    assert owned_private_dir(dotdot / "cache") is None
    assert owned_private_dir(real / "cache") is None


@pytest.mark.skipif(not IS_ROOT, reason="a folder owned by another user needs root (chown)")
def test_a_cache_folder_is_refused_if_a_symlink_on_the_way_sits_in_another_users_folder(
    tmp_path,
):
    real = tmp_path / "real"
    (real / "cache").mkdir(parents=True, mode=0o700)
    os.chmod(real, 0o700)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    (theirs / "l2").symlink_to(real)
    os.chown(theirs, 65534, 65534)  # its owner can replace the (root's) link l2
    link = tmp_path / "link"
    link.symlink_to(theirs / "l2")
    why = owned_private_dir(link / "cache")
    assert why is not None and f"{theirs}, which holds" in why and "another user" in why


def _dead_pid():
    """The PID of a process that has finished (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_key_left_linked_to_its_temporary_by_a_crash_is_used(tmp_path):
    """A creator killed between ``link(tmp, key)`` and ``unlink(tmp)`` left the key with two
    links: every later run refused it ('it has other hard links') forever. The temporary of a
    process that is gone, of the key's own inode, is now removed and the key used."""
    import secrets
    import time

    key = tmp_path / KEY_NAME
    secret = secrets.token_bytes(32)
    key.write_bytes(secret)
    os.chmod(key, 0o600)
    tmp = tmp_path / f"{KEY_NAME}.tmp-{_dead_pid()}-{secrets.token_hex(8)}"
    os.link(key, tmp)
    old = time.time() - 120
    os.utime(key, (old, old))
    assert folder_key(tmp_path) == (secret, None)
    assert not tmp.exists() and os.lstat(key).st_nlink == 1
    assert _hidden_but_key(tmp_path) == []
    # a live creator's temporary is not touched (and the key, doubly linked, not used)
    live = tmp_path / f"{KEY_NAME}.tmp-{os.getpid()}-{secrets.token_hex(8)}"
    os.link(key, live)
    got, why = folder_key(tmp_path)
    assert got is None and "other hard links" in why and live.exists()
    live.unlink()
    # a second name that is not a temporary of this tool is never removed
    other = tmp_path / "other-name"
    os.link(key, other)
    got, why = folder_key(tmp_path)
    assert got is None and "other hard links" in why and other.exists()


def test_pid_checks_never_signal_on_windows(monkeypatch):
    """On Windows ``os.kill(pid, 0)`` terminates the process: a PID is then taken as alive."""
    from fgrpo_theory._trust import pid_alive

    calls = []
    monkeypatch.setattr(os, "kill", lambda *a: calls.append(a))
    monkeypatch.setattr(os, "name", "nt")
    alive = [pid_alive(pid) for pid in (12345, 999999, 1, 0, -1)]
    monkeypatch.undo()
    assert alive == [True] * 5 and calls == []


def test_pid_check_on_posix_by_hand():
    """This process is alive; PIDs no process can have are not (no signal is sent: os.kill(0,
    0) and os.kill(-1, 0) would test a process group); a child that has exited and been reaped
    is not; PID 1 (init, another user's) is."""
    import subprocess

    from fgrpo_theory._trust import pid_alive

    if os.name == "nt":
        pytest.skip("POSIX semantics")
    assert pid_alive(os.getpid()) and pid_alive(1)
    assert not any(pid_alive(p) for p in (0, -1, -os.getpid(), 2**31, 2**70))
    child = subprocess.Popen(["true"])
    child.wait()
    assert not pid_alive(child.pid)


def test_dead_key_temporaries_are_kept_on_windows_never_signalled(tmp_path, monkeypatch):
    import secrets
    import time

    from fgrpo_theory import _trust

    tmp = tmp_path / f"{KEY_NAME}.tmp-{_dead_pid()}-{secrets.token_hex(8)}"
    tmp.write_bytes(b"x" * 32)
    old = time.time() - 120
    os.utime(tmp, (old, old))
    calls = []
    monkeypatch.setattr(os, "kill", lambda *a: calls.append(a))
    monkeypatch.setattr(os, "name", "nt")
    _trust._remove_dead_temporaries(tmp_path)
    monkeypatch.undo()
    assert calls == [] and tmp.exists()


def test_setting_aside_survives_a_platform_without_link_no_follow(tmp_path, monkeypatch):
    """``os.link(..., follow_symlinks=False)`` raises NotImplementedError where unsupported:
    setting aside an empty key file (which puts back a key another process put there) ended in
    a traceback; it now puts the key back with a plain link."""
    from fgrpo_theory import _trust

    real_link = os.link

    def link(src, dst, *, follow_symlinks=True):
        if not follow_symlinks:
            raise NotImplementedError("link: follow_symlinks unavailable on this platform")
        return real_link(src, dst)

    key = tmp_path / KEY_NAME
    key.write_bytes(b"k" * 32)  # another process's key, there since the empty one was seen
    os.chmod(key, 0o600)
    gone = tmp_path / "the-empty-one"
    gone.write_bytes(b"")
    monkeypatch.setattr(os, "link", link)
    assert _trust._set_aside(key, os.lstat(gone)) is True
    assert key.read_bytes() == b"k" * 32
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([KEY_NAME, "the-empty-one"])
