"""``figures --jobs J`` (:func:`registry.run_all`): several figures at a time in worker processes,
the same files as one after another, figures sharing runs never side by side."""

from __future__ import annotations

import json

import pytest

from fgrpo_theory.cli._experiments import experiments_package

experiments_package()
from fgrpo_theory_experiments import registry  # noqa: E402

#: A figure module whose compute sleeps and records when it ran (wall clock, in a JSON-lines
#: file named by $JOBS_TEST_LOG); {shared}, {cost}, {fail} filled in per module.
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
    seconds: float = 1.5


PARAMS = Params()


def compute(params=PARAMS, fast=False):
    t0 = time.time()
    if {fail}:
        raise ValueError("compute of " + __name__ + " failed")
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
        for name, (cost, shared, fail) in spec.items():
            text = _MODULE.format(cost=cost, shared=shared, fail=fail)
            (folder / f"{name}.py").write_text(text)
        return [registry.get(n) for n in spec]

    def records():
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        return {r["name"]: r for r in rows}

    return write, records


def test_figures_sharing_runs_never_overlap_and_the_others_do(timed, tmp_path):
    write, records = timed
    exps = write(
        {
            "timed_a": (3.0, True, False),  # costliest: starts first
            "timed_b": (2.0, True, False),  # shares runs with a: must wait for it
            "timed_c": (1.0, False, False),  # free: runs beside a
        }
    )
    started, done = [], []
    res = registry.run_all(
        exps, tmp_path / "out", ("png",), jobs=2, dpi=200,
        on_start=lambda e: started.append(e.name), on_done=lambda e, r: done.append(e.name),
    )  # fmt: skip
    rec = records()
    a, b, c = rec["timed_a"], rec["timed_b"], rec["timed_c"]
    assert b["t0"] >= a["t1"]  # the two sharing runs: one after the other
    assert c["t0"] < a["t1"] and a["t0"] < c["t1"]  # the free one beside the first
    assert len({a["pid"], b["pid"], c["pid"]} | {__import__("os").getpid()}) >= 3  # workers
    assert started == ["timed_a", "timed_c", "timed_b"]
    assert sorted(done) == sorted(started) and set(res) == set(started)
    assert all(r is not None and r.source == "computed" for r in res.values())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "timed_a.png", "timed_b.png", "timed_c.png"
    ]  # fmt: skip


def test_figures_jobs_give_the_files_of_one_after_another(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    exps = [registry.get(n) for n in ("fig1a_tail_miss", "fig4_focal_magnitudes")]
    one = registry.run_all(exps, tmp_path / "one", ("png", "pdf"), jobs=1, dpi=200)
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache2"))  # computed again
    two = registry.run_all(exps, tmp_path / "two", ("png", "pdf"), jobs=2, dpi=200)
    assert {r.source for r in (*one.values(), *two.values())} == {"computed"}
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "two").iterdir()) and len(files) == 4
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes(), f


def test_figures_jobs_a_failing_figure_stops_the_run(timed, tmp_path):
    write, records = timed
    exps = write({"timed_bad": (5.0, False, True), "timed_ok": (1.0, False, False)})
    with pytest.raises(ValueError, match="compute of .*timed_bad failed"):
        registry.run_all(exps, tmp_path / "out", ("png",), jobs=2, dpi=200)


@pytest.mark.parametrize("jobs", [0, 65, 1.5, True])
def test_run_all_refuses_a_bad_jobs(jobs, tmp_path):
    with pytest.raises(ValueError, match="jobs"):
        registry.run_all([], tmp_path, jobs=jobs)


def test_figures_cli_jobs(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "figs"
    r = cli("figures", "fig1a_tail_miss", "fig4_focal_magnitudes", "--out", out,
            "--figure-format", "png", "--dpi", "200", "--jobs", "2")  # fmt: skip
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [
        "fig1a_tail_miss.png", "fig4_focal_magnitudes.png"
    ]  # fmt: skip
    assert "[2/2]" in r.err and "done: 2 figure(s)" in r.err
    r = cli("figures", "fig1a_tail_miss", "--jobs", "0")
    assert r.code == 2
    assert r.err.strip().splitlines()[-1] == "Error: --jobs must be an integer in [1, 64]; got 0"
    assert "Traceback" not in r.err
