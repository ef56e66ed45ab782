"""``figures --workers W`` (:func:`registry.run_all`): several figures at a time in worker
processes, the same files as one after another, figures sharing runs never side by side, nothing
left running after a failure."""

from __future__ import annotations

import json

import pytest

from fgrpo_theory.cli._experiments import experiments_package

experiments_package()
from fgrpo_theory_experiments import registry  # noqa: E402

#: A figure module whose compute sleeps and records when it ran (wall clock, in a JSON-lines
#: file named by $JOBS_TEST_LOG); {cost}, {shared}, {fail}, {child}, {wait_for}, {torch} filled
#: in per module: with ``wait_for``, it waits until that figure has started (a handshake: only two
#: figures running at once get past it).
_MODULE = '''"""A test figure that records when it computed."""
import json
import os
import time
from dataclasses import dataclass

import pandas as pd

TITLE = "A timed test figure"
IN_PAPER = False
COST_SECONDS = {cost}
SHARED_RUNS = {shared}


@dataclass(frozen=True)
class Params:
    seconds: float = 0.5


PARAMS = Params()


def compute(params=PARAMS, fast=False):
    t0 = time.time()
    if {torch}:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")
    if {fail}:
        if {child}:  # a process of its own (as a population figure's pool), left to be killed
            import subprocess
            import sys
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            with open(os.environ["JOBS_TEST_LOG"] + ".child", "w") as f:
                f.write(str(p.pid))
            time.sleep(1.0)
        raise ValueError("compute failed")
    name = __name__.rsplit(".", 1)[-1]
    folder = os.path.dirname(os.environ["JOBS_TEST_LOG"])
    open(os.path.join(folder, name + ".started"), "w").close()
    wait = os.path.join(folder, "{wait_for}.started")
    deadline = time.time() + 120.0
    while "{wait_for}" and not os.path.exists(wait) and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(params.seconds)
    with open(os.environ["JOBS_TEST_LOG"], "a") as f:
        f.write(json.dumps(dict(name=__name__.rsplit(".", 1)[-1], t0=t0, t1=time.time(),
                                pid=os.getpid())) + "\\n")
    return pd.DataFrame(dict(x=[0.0, 1.0], y=[0.0, 1.0]))


def plot(df, params=PARAMS):
    from fgrpo_theory.plotting import new_figure

    fig = new_figure(3.0, 2.0)
    ax = fig.subplots()
    ax.plot(df["x"], df["y"])
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    return fig
'''


@pytest.fixture()
def timed(tmp_path, monkeypatch):
    """Write timed figure modules ``{name: (cost, shared, fail)}`` into a folder on
    $FGRPO_THEORY_FIGURES_PATH; returns a reader of the compute records by name."""
    folder = tmp_path / "timed"
    folder.mkdir()
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("FGRPO_THEORY_FIGURES_PATH", str(folder))
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JOBS_TEST_LOG", str(log))

    def write(spec):
        for name, (cost, shared, fail, *rest) in spec.items():
            child, wait_for, torch = [*rest, *[False, "", False][len(rest) :]]
            text = _MODULE.format(
                cost=cost, shared=shared, fail=fail, child=child, wait_for=wait_for, torch=torch
            )
            (folder / f"{name}.py").write_text(text)
        return [registry.get(n) for n in spec]

    def records():
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        return {r["name"]: r for r in rows}

    return write, records, log


def test_figures_sharing_runs_never_overlap_and_the_others_do(timed, tmp_path):
    write, records, _ = timed
    exps = write(
        {
            "timed_a": (3.0, True, False, False, "timed_c"),  # costliest: starts first
            "timed_b": (2.0, True, False),  # shares runs with a: must wait for it
            "timed_c": (1.0, False, False, False, "timed_a"),  # free: runs beside a
        }
    )
    started, done = [], []
    res = registry.run_all(
        exps, tmp_path / "out", ("png",), workers=2, dpi=200,
        on_start=lambda e: started.append(e.name), on_done=lambda e, r: done.append(e.name),
    )  # fmt: skip
    rec = records()
    a, b, c = rec["timed_a"], rec["timed_b"], rec["timed_c"]
    assert b["t0"] >= a["t1"]  # the two sharing runs: one after the other
    # a and c passed each other's handshake (else both would have waited 120 s): side by side
    assert a["t1"] - a["t0"] < 60.0 and c["t1"] - c["t0"] < 60.0
    assert started == ["timed_a", "timed_c", "timed_b"]
    assert sorted(done) == sorted(started) and set(res) == set(started)
    assert all(r is not None and r.source == "computed" for r in res.values())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "timed_a.png", "timed_b.png", "timed_c.png"
    ]  # fmt: skip


def test_figures_workers_give_the_files_of_one_after_another(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    exps = [registry.get(n) for n in ("fig1a_tail_miss", "fig4_focal_magnitudes")]
    one = registry.run_all(exps, tmp_path / "one", "png,pdf", workers=1, dpi=200)
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache2"))  # computed again
    two = registry.run_all(exps, tmp_path / "two", "png,pdf", workers=2, dpi=200)
    assert {r.source for r in (*one.values(), *two.values())} == {"computed"}
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "two").iterdir()) and len(files) == 4
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes(), f


def test_figures_workers_a_failing_figure_stops_everything(timed, tmp_path):
    """The error names the figure; the other figure's worker and a process the failing figure
    started are killed, not left running."""
    import multiprocessing as mp
    import os
    import time

    write, _, log = timed
    exps = write(
        {
            "timed_bad": (5.0, False, True, True),  # starts a child process, then fails
            "timed_slow": (1.0, False, False, False, "never"),  # would wait 120 s
        }
    )
    t0 = time.time()
    with pytest.raises(ValueError, match=r"^figure timed_bad: compute failed$"):
        registry.run_all(exps, tmp_path / "out", ("png",), workers=2, dpi=200)
    assert time.time() - t0 < 60.0  # timed_slow was stopped, not waited for
    assert mp.active_children() == []
    child = int((tmp_path / "log.jsonl.child").read_text())
    for _ in range(200):  # the killed child: gone (reaped by init) or a zombie
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(") ")[-1].startswith("Z"):
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        raise AssertionError("the failing figure's child process was left running")


@pytest.mark.parametrize("workers", [1, 2])
def test_figures_workers_a_figure_needing_torch(timed, tmp_path, workers):
    """A figure whose compute needs PyTorch where it is missing: None with skip_missing_torch
    (``figures all`` skips it), else ModuleNotFoundError, in this process as in a worker."""
    write, _, _ = timed
    exps = write(
        {"timed_torch": (2.0, False, False, False, "", True), "timed_ok": (1.0, False, False)}
    )
    res = registry.run_all(exps, tmp_path / "o", ("png",), workers=workers, dpi=200,
                           skip_missing_torch=True)  # fmt: skip
    assert res["timed_torch"] is None and res["timed_ok"] is not None
    with pytest.raises(ModuleNotFoundError) as e:
        registry.run_all(exps, tmp_path / "o2", ("png",), workers=workers, dpi=200)
    assert e.value.name == "torch"


@pytest.mark.parametrize("workers", [0, 257, 1.5, True])
def test_run_all_refuses_a_bad_workers(workers, tmp_path):
    with pytest.raises(ValueError, match="^workers must be "):
        registry.run_all([], tmp_path, workers=workers)


def test_figures_cli_workers(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "figs"
    r = cli("figures", "fig1a_tail_miss", "fig4_focal_magnitudes", "--out", out,
            "--figure-format", "png", "--dpi", "200", "--workers", "2")  # fmt: skip
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [
        "fig1a_tail_miss.png", "fig4_focal_magnitudes.png"
    ]  # fmt: skip
    assert "[2/2]" in r.err and "done: 2 figure(s)" in r.err
    r = cli("figures", "fig1a_tail_miss", "--workers", "0")
    assert r.code == 2
    assert r.err.strip().splitlines()[-1] == (
        "Error: --workers must be an integer in [1, 256]; got 0"
    )
    assert "Traceback" not in r.err
