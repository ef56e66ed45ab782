"""CLI command ``sequence`` (issue 24 step 5): thin, reproducible, refuses before allocating."""

from __future__ import annotations

import io

import pandas as pd
import pytest

pytest.importorskip("torch")


def test_smoke_run_is_reproducible_and_cached(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path))
    r1 = cli("sequence", "--preset", "smoke", "--format", "csv")
    assert r1.code == 0, r1.err
    assert "SFT checkpoint trained" in r1.err
    df = pd.read_csv(io.StringIO(r1.out))
    assert list(df["split"]) == ["train", "test"] * 3 and list(df["step"]) == [0, 0, 2, 2, 4, 4]
    assert df["pass_at_1"].between(0, 1).all() and (df["rare_nll_rise"].iloc[:2] == 0).all()
    r2 = cli("sequence", "--preset", "smoke", "--format", "csv")
    assert r2.code == 0 and "from the cache" in r2.err and r2.out == r1.out
    r3 = cli("sequence", "--preset", "smoke", "--no-cache", "--format", "csv")
    assert r3.code == 0 and r3.out == r1.out  # retrained from scratch: the same bits
    r4 = cli("sequence", "--preset", "smoke", "--seed", "1", "--format", "json")
    assert r4.code == 0 and r4.out != r1.out


def test_options_reach_the_run(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path))
    out = tmp_path / "s.csv"
    r = cli("sequence", "--preset", "smoke", "--scheme", "grpo+focal:gamma=1", "--aggregation",
            "sequence-sum", "--optimizer", "sgd", "--lr", "0.1", "--inner-updates", "2",
            "--steps", "2", "--lemma-check", "--output", out)  # fmt: skip
    assert r.code == 0, r.err
    df = pd.read_csv(out)
    assert list(df["step"]) == [0, 0, 2, 2]
    assert df["p_tail_miss_lemma"].iloc[2] > 0 and df["tail_miss_z"].notna().iloc[2]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--N", "100000"], "Error: --N must be such that B x N <= 65,536 (B = 4); got 100000"),
        (["--preset", "quick", "--N", "8192", "--B", "8"], "Error: --N must be such that one RL"),
        (["--B", "100"], "Error: --B must be <= the number of train prompts (12); got 100"),
        (["--aggregation", "mean"], "Error: --aggregation must be one of token-mean"),
        (["--threads", "0"], "Error: --threads must be an integer in [1, 256]; got 0"),
        (["--optimizer", "sgd", "--lr", "1e30"], "Error: --lr must be small enough that the"),
        (["--preset", "x"], "Error: --preset must be one of quick, single-quick, smoke; got 'x'"),
    ],
)
def test_refusals_are_one_line_exit_2(cli, args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path))
    r = cli("sequence", *(["--preset", "smoke"] if "--preset" not in args else []), *args)
    assert r.code == 2 and r.err.startswith(message) and r.err.count("\n") == 1, r.err
    if "--lr" not in args:
        assert not any(tmp_path.rglob("*.pt"))  # refused before any training


def test_ctrl_c_exits_130(cli, monkeypatch):
    import fgrpo_theory.sequence.run as run

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_sequence", interrupted)
    r = cli("sequence", "--preset", "smoke")
    assert r.code == 130 and "interrupted" in r.err


def test_without_torch_one_line(cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    r = cli("sequence", "--preset", "smoke")
    assert r.code == 2 and "needs PyTorch" in r.err and r.err.count("\n") == 1


def test_sigint_stops_between_steps_exit_130(tmp_path):
    """A real Ctrl-C (SIGINT to a subprocess whose stderr is a terminal, so that it prints its
    progress) during RL: the run stops after the step that was running, one line, exit 130."""
    import os
    import pty
    import select
    import signal
    import subprocess
    import sys
    import time

    master, slave = pty.openpty()
    env = {**os.environ, "FGRPO_THEORY_CACHE_DIR": str(tmp_path)}
    args = ["--preset", "smoke", "--steps", "1000000", "--format", "csv"]
    code = "from fgrpo_theory.cli._entry import script; script()"
    proc = subprocess.Popen([sys.executable, "-c", code, "sequence", *args], env=env,
                            stdout=subprocess.PIPE, stderr=slave)  # fmt: skip
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 240

    def read(wait: float) -> bool:
        nonlocal seen
        if not select.select([master], [], [], wait)[0]:
            return False
        try:
            chunk = os.read(master, 4096)
        except OSError:
            return False
        seen += chunk
        return bool(chunk)

    try:
        while b"\rrl 3/" not in seen and time.monotonic() < deadline:
            read(1.0)
        assert b"\rrl 3/" in seen, seen[-300:]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        while read(0.5):
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = seen.decode(errors="replace")
    assert proc.returncode == 130, text[-500:]
    last = text.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("fgrpo-theory: interrupted after rl step "), text[-300:]
    assert last.endswith("/1000000") and int(last.split()[-1].split("/")[0]) >= 3
    assert "Traceback" not in text and proc.stdout.read() == b""


def test_sigint_during_sft_stops_after_the_step(tmp_path, monkeypatch):
    """In-process: a SIGINT delivered during SFT step 2 takes effect when step 2 is done
    (KeyboardInterrupt naming it), no checkpoint is written, and the handler is restored."""
    import os
    import signal

    from fgrpo_theory.sequence.run import preset, run_sequence

    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path))
    done = []

    def progress(phase, d, t):
        done.append((phase, d))
        if (phase, d) == ("sft", 2):
            os.kill(os.getpid(), signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt, match=r"^sft step 2/20$"):
        run_sequence(preset("smoke"), progress=progress)
    assert done == [("sft", 1), ("sft", 2)]
    assert signal.getsignal(signal.SIGINT) is before
    assert not any(tmp_path.rglob("*.pt")) and not any(tmp_path.rglob("*.tmp"))
