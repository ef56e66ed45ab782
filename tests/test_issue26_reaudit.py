"""Failures found by the hostile re-audit of issue 26 (session of 25 Nov 2026, branch s30r), kept
as strict xfail tests so that each fix flips one of them to a pass (and the xfail must then be
removed). Each test is quick and never allocates: the cases that would hang run in a subprocess
with a timeout; the broadcast cases use shapes whose result NumPy refuses to allocate at once.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _python(code: str, timeout: float = 60, env: dict[str, str] | None = None):
    """Run ``code`` in a fresh interpreter; None if it had to be killed (it hung)."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return None


def test_a_fifo_planted_as_the_key_file_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / ".fgrpo-theory.key")
    code = (
        "from fgrpo_theory._trust import folder_key; "
        f"k, why = folder_key({str(tmp_path)!r}); assert k is None and why, why"
    )
    res = _python(code, timeout=10)
    assert res is not None, "folder_key hung on a FIFO planted as the key file"
    assert res.returncode == 0, res.stderr


def test_a_fifo_planted_as_a_lock_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / ".0123456789abcdef.lock")
    code = (
        "from pathlib import Path; from fgrpo_theory.sim.locks import _read_lock; "
        f"print(_read_lock(Path({str(tmp_path)!r}) / '.0123456789abcdef.lock'))"
    )
    assert _python(code, timeout=10) is not None, "_read_lock hung on a planted FIFO"


@pytest.mark.skipif(not IS_ROOT, reason="planting another user's FIFO needs root (chown)")
def test_a_fifo_planted_in_the_figures_folder_does_not_hang(tmp_path):
    fifo = tmp_path / "fig.png"
    os.mkfifo(fifo)
    os.chown(fifo, 65534, 65534)  # another user's
    code = (
        "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; "
        "from fgrpo_theory.plotting import save_figure; fig, ax = plt.subplots(); "
        f"save_figure(fig, {str(tmp_path / 'fig')!r}, formats='png', dpi=200)"
    )
    res = _python(code, timeout=40)
    assert res is not None, "save_figure hung writing into a planted FIFO"
    # another user's FIFO is no device the user chose: replaced by the figure, like their file
    assert res.returncode == 0, res.stderr
    assert fifo.is_file() and fifo.read_bytes().startswith(b"\x89PNG")


@pytest.mark.skipif(not IS_ROOT, reason="a symlink owned by another user needs root (chown -h)")
def test_a_cache_folder_reached_through_another_users_symlink_is_refused(tmp_path):
    from fgrpo_theory._trust import owned_private_dir

    real = tmp_path / "private"
    real.mkdir(mode=0o700)
    sticky = tmp_path / "shared"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    link = sticky / "cache"
    link.symlink_to(real)
    os.chown(link, 65534, 65534, follow_symlinks=False)  # the other user can retarget it
    (real / "numba").mkdir(mode=0o700)
    assert owned_private_dir(link / "numba") is not None


NOT_NUMBERS = [np.datetime64("2020-01-01"), np.timedelta64(5, "D"), "0.5", b"0.5"]


@pytest.mark.parametrize("bad", NOT_NUMBERS, ids=["datetime64", "timedelta64", "str", "bytes"])
@pytest.mark.parametrize(
    "call",
    [
        lambda v: __import__("fgrpo_theory").lr_multiplier(v),
        lambda v: __import__("fgrpo_theory").focal_weight(0.5, v),
        lambda v: __import__("fgrpo_theory").effective_lr_multiplier(0.5, 8, v),
        lambda v: __import__("fgrpo_theory").binary_advantages(v, 8),
        lambda v: __import__("fgrpo_theory").focal_weight(v, 1.0),
    ],
    ids=["lr_multiplier", "focal_weight", "effective_lr_multiplier", "binary_advantages", "mu_hat"],
)
def test_dates_text_and_bytes_are_not_numbers_in_advantages(call, bad):
    with pytest.raises(ValueError, match="not text"):
        call(bad)


HUGE = 10**7  # 10**14 values: NumPy refuses the allocation at once, nothing is touched


@pytest.mark.parametrize(
    "call",
    [
        lambda a, b: __import__("fgrpo_theory").pass_at_k(a.astype(np.int64) + 8, 1, 1 + 0 * b),
        lambda a, b: __import__("fgrpo_theory").focal_weight(0.5 + 0 * a, b),
        lambda a, b: __import__("fgrpo_theory").binary_advantages(0 * a.astype(np.int64), 8 + b),
        lambda a, b: __import__("fgrpo_theory").pass_at_k_exact(0.5 + 0 * a, 1 + b),
    ],
    ids=["pass_at_k", "focal_weight", "binary_advantages", "pass_at_k_exact"],
)
def test_a_huge_broadcast_is_refused_not_a_memory_error(call):
    a = np.broadcast_to(np.zeros(1), (HUGE, 1))
    b = np.broadcast_to(np.ones(1, dtype=np.int64), (HUGE,))
    with pytest.raises(ValueError, match="broadcast"):
        call(a, b)


def test_pass_at_k_shape_mismatch_names_an_argument():
    from fgrpo_theory import pass_at_k

    with pytest.raises(ValueError, match=r"^(n|c|k) must be"):
        pass_at_k(np.array([8, 9, 10]), np.array([1, 2]), 1)


def test_peak_with_a_subnormal_tau_is_silent():
    import warnings

    from fgrpo_theory import peak_group_size

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            peak_group_size(0.5, 5e-321)
        except ValueError:
            pass  # a refusal is fine; a RuntimeWarning (8 lines in the CLI) is not


@pytest.mark.parametrize(
    "args, code, first",
    [
        (["--mu", "0.5", "--rho", "1e-320"], 0, None),  # the peak (1065) is computed
        (["--mu", "1e-300", "--rho", "0.5"], 2, "Error: --rho must be such that the peak group"),
        (["--mu", "0.5", "--rho", "1e-330"], 2, "Error: --rho must be a number float64 can hold"),
    ],
)
def test_cli_peak_with_a_subnormal_tau_prints_no_warning(args, code, first):
    exe = os.path.join(os.path.dirname(sys.executable), "fgrpo-theory")
    res = subprocess.run(
        [exe, "peak", *args, "--format", "csv"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == code, res.stderr
    if first is None:
        assert res.stderr == "", res.stderr
        assert res.stdout.splitlines()[1].split(",")[3] == "1065", res.stdout
    else:
        assert res.stderr.startswith(first), res.stderr
        assert res.stderr.count("\n") == 1, res.stderr  # one line: no warning lines


def test_json_into_a_closed_pipe_exits_141():
    exe = os.path.join(os.path.dirname(sys.executable), "fgrpo-theory")
    cmd = f"'{exe}' passk --n 1..100000 --c 1 --k 1 --format json | head -c 10 >/dev/null"
    res = subprocess.run(
        ["bash", "-c", cmd + "; exit ${PIPESTATUS[0]}"], capture_output=True, timeout=300
    )
    assert res.returncode == 141, res.stderr


@pytest.mark.parametrize("args", ["--help", "simulate --help", "--version"])
def test_help_into_a_closed_pipe_exits_141(args):
    exe = os.path.join(os.path.dirname(sys.executable), "fgrpo-theory")
    cmd = f"'{exe}' {args} | (exec 0<&-; sleep 2)"
    res = subprocess.run(
        ["bash", "-c", cmd + "; exit ${PIPESTATUS[0]}"], capture_output=True, timeout=120
    )
    assert res.returncode == 141, res.stderr


def test_importing_plotting_never_creates_a_missing_home(tmp_path):
    home = tmp_path / "nohome"
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME")}
    env["HOME"] = str(home)
    res = _python("import fgrpo_theory.plotting", env=env)
    assert res is not None and res.returncode == 0, res and res.stderr
    assert not home.exists(), sorted(str(p) for p in home.rglob("*"))


def _without_home(tmp_path):
    home = tmp_path / "nohome"
    drop = ("MPLCONFIGDIR", "XDG_CACHE_HOME", "FGRPO_THEORY_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(HOME=str(home), OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    return home, env


def test_figures_never_create_a_missing_home(tmp_path):
    """matplotlib (~/.config, ~/.cache/matplotlib) created a missing home folder (and the table
    cache then used it); matplotlib now gets a temporary folder, removed at exit."""
    home, env = _without_home(tmp_path)
    exe = os.path.join(os.path.dirname(sys.executable), "fgrpo-theory")
    out = tmp_path / "figs"
    res = subprocess.run(
        [exe, "figures", "fig1a_tail_miss", "--out", str(out), "--figure-format", "png"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert (out / "fig1a_tail_miss.png").is_file()
    assert "the table cache is not used" in res.stderr, res.stderr
    assert not home.exists(), sorted(str(p) for p in home.rglob("*"))


def test_figures_fast_without_home_needs_out(tmp_path):
    home, env = _without_home(tmp_path)
    exe = os.path.join(os.path.dirname(sys.executable), "fgrpo-theory")
    res = subprocess.run(
        [exe, "figures", "fig1a_tail_miss", "--fast"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("Error: --out must be a folder when the home folder is missing")
    assert res.stderr.count("\n") == 1, res.stderr
    assert not home.exists()


@pytest.mark.parametrize(
    "command, option",
    [
        ("simulate", "--K"),
        ("simulate", "--seeds"),
        ("simulate", "--seed"),
        ("compare-passk", "--m"),
    ],
)
def test_a_huge_int_option_is_cut_in_the_message(cli, command, option):
    r = cli(command, option, "9" * 4400)
    assert r.code == 2
    assert len(r.err) < 400, len(r.err)
    assert r.err.startswith(f"Error: {option} must be an integer of at most"), r.err
    assert "(4402 characters)" in r.err, r.err  # the repr's quotes count
