"""Start-up of the ``fgrpo-theory`` command (issue 27, target 4).

Same-run ratios against the reference ``python -c "import numpy, pandas"``: every command and the
reference run as fresh subprocesses, interleaved (reference, commands, reference, ...), and the
median wall time (and the median CPU time, user + system, of the child) of the repeats is
compared. Targets:

- ``fgrpo-theory --help`` and ``fgrpo-theory miss-prob ...`` within 1.3x of the reference;
- a warm ``simulate`` (kernels in the cache) of a small config: the process's wall time minus
  the time of that work measured in this process (after a warm-up call) under 0.5 s;
- a cold ``simulate``: the same command with an empty kernel cache (a fresh ``NUMBA_CACHE_DIR``
  per run: every kernel the config uses is compiled) under 5 s.

Shown for reference, not judged: ``python -c "import numpy, pandas, numba"`` (the imports every
``simulate`` needs: its wall time minus the reference's is the part of the start-up overhead no
change in this package can remove), the same without pandas plus one tiny kernel of this package
loaded from the disk cache and called (:func:`fgrpo_theory._libm_loops.exp_into` on 3 elements:
what any command that runs a cached kernel pays, however little else it does, plus about 0.03 s
of this package's ``sim`` imports that its module pulls in; a process doing the same through
Numba's own loader, which rebuilds its whole target context, took 0.3 s more) and the warm
``simulate``'s overhead in CPU time.

The reference and the two floors are plain ``python -c`` processes and end with Python's own
teardown of their modules (about 0.1 s of them); the ``fgrpo-theory`` commands end without it
(``fgrpo_theory.cli._entry._end``), as a user's process does.

Targets are reported, never asserted (``met`` / ``MISSED``); the load average is printed before
and after, since a loaded machine slows start-up (file system, imports) more than computing:
on a loaded machine read the CPU columns.

Usage: ``python benchmarks/bench_startup.py [--repeats R] [--cold C]`` (``--cold 0``: no cold
run; each costs a full compilation of the simulator's kernels, 15-45 s of CPU).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The warm simulate: about 0.1-0.3 s of work on one core of the 2-core machine.
SIM_ARGS = ["--K", "1000", "--N", "8", "--steps", "5000", "--seeds", "8", "--threads", "1"]
REF = "reference: python -c 'import numpy, pandas'"
FLOOR = "python -c 'import numpy, pandas, numba'"
WARM = "fgrpo-theory simulate (warm)"
KERNEL_FLOOR = "python: numpy, numba, 1 cached kernel, no pandas"
_KERNEL_CALL = (
    "import numpy; from fgrpo_theory._libm_loops import exp_into; "
    "exp_into(numpy.ones(3), numpy.empty(3))"
)


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("fgrpo-theory")
    if script.is_file():
        return [str(script)]
    found = shutil.which("fgrpo-theory")
    if found:
        return [found]
    return [sys.executable, "-c", "from fgrpo_theory.cli._entry import script; script()"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # as installed for a user: byte code cached (pip compiles at install, Python on first use)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("NUMBA_NUM_THREADS", "1")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU user + system) seconds of ``cmd`` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _work_seconds(repeats: int) -> tuple[float, float]:
    """The simulate's work in this process: the same config, warm, best of ``repeats``
    (wall, CPU)."""
    from fgrpo_theory.sim import SimConfig, simulate

    cfg = SimConfig(K=1000, N=8, steps=5000, seeds=8)
    simulate(cfg, threads=1)  # load (or compile) the kernels
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        simulate(cfg, threads=1)
        best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
    return best


def _load() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--cold", type=int, default=1, help="cold runs (empty kernel cache)")
    args = parser.parse_args()
    env = _env()
    cli = _cli()
    load_before = _load()
    runs = {
        REF: [sys.executable, "-c", "import numpy, pandas"],
        FLOOR: [sys.executable, "-c", "import numpy, pandas, numba"],
        KERNEL_FLOOR: [sys.executable, "-c", _KERNEL_CALL],
        "fgrpo-theory --help": [*cli, "--help"],
        "fgrpo-theory miss-prob --N 8 --mu 0.5 --rho 0.1": [
            *cli, "miss-prob", "--N", "8", "--mu", "0.5", "--rho", "0.1"],
        WARM: [*cli, "simulate", *SIM_ARGS],
    }  # fmt: skip
    for cmd in runs.values():  # warm the file cache and the kernel cache
        _run(cmd, env)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
    for _ in range(args.repeats):
        for name, cmd in runs.items():
            times[name].append(_run(cmd, env))
    cold: list[tuple[float, float]] = []
    for _ in range(args.cold):
        with tempfile.TemporaryDirectory(prefix="fgrpo-startup-cold-") as cache:
            cold.append(_run(runs[WARM], dict(env, NUMBA_CACHE_DIR=cache)))
    work, work_cpu = _work_seconds(5)
    med = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
    med_cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
    ref, ref_cpu = med[REF], med_cpu[REF]
    print(
        f"# start-up, median of {args.repeats} interleaved runs; load average {load_before} "
        f"before, {_load()} after; {sys.executable}"
    )
    head = f"{'what':<52} {'median':>8} {'min':>8} {'ratio':>6} {'CPU':>8} {'ratio':>6}  target"
    print(head)
    for name, ts in times.items():
        ratio, ratio_cpu = med[name] / ref, med_cpu[name] / ref_cpu
        verdict = ""
        if name not in (REF, FLOOR, KERNEL_FLOOR, WARM):
            verdict = f"<= 1.30x  {'met' if ratio <= 1.30 else 'MISSED'}"
        print(
            f"{name:<52} {med[name]:>7.3f}s {min(w for w, _ in ts):>7.3f}s {ratio:>5.2f}x "
            f"{med_cpu[name]:>7.3f}s {ratio_cpu:>5.2f}x  {verdict}"
        )
    over, over_cpu = med[WARM] - work, med_cpu[WARM] - work_cpu
    print(f"{'  simulate work in-process (best of 5)':<52} {work:>7.3f}s {'':>8} {'':>6} "
          f"{work_cpu:>7.3f}s")  # fmt: skip
    print(
        f"{'  simulate start-up overhead (median - work)':<52} {over:>7.3f}s {'':>8} {'':>6} "
        f"{over_cpu:>7.3f}s {'':>6}  < 0.5 s  {'met' if over < 0.5 else 'MISSED'}"
    )
    print(
        f"{'  its floor: python + import numpy, pandas, numba':<52} {med[FLOOR]:>7.3f}s "
        f"{'':>8} {'':>6} {med_cpu[FLOOR]:>7.3f}s"
    )
    print(
        f"{'  without pandas, with 1 cached kernel run':<52} {med[KERNEL_FLOOR]:>7.3f}s "
        f"{'':>8} {'':>6} {med_cpu[KERNEL_FLOOR]:>7.3f}s"
    )
    if cold:
        cw = statistics.median(w for w, _ in cold)
        cc = statistics.median(c for _, c in cold)
        print(
            f"{'fgrpo-theory simulate (cold: empty kernel cache)':<52} {cw:>7.3f}s "
            f"{min(w for w, _ in cold):>7.3f}s {cw / ref:>5.2f}x {cc:>7.3f}s {cc / ref_cpu:>5.2f}x"
            f"  < 5 s  {'met' if cw < 5.0 else 'MISSED'} ({len(cold)} run(s))"
        )


if __name__ == "__main__":
    main()
