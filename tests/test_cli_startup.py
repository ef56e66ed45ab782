"""Start-up of the CLI (issue 27, target 4): what a warm ``simulate`` imports and loads.

The value conversion that skips Pydantic is checked against Pydantic itself (the oracle Typer
uses); the warm run's imports in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TEXTS = [
    "0", "7", "-3", "1000", "123456789012345678", "0.5", "-0.25", "1e-3", "2.5E4", "1e400",
    "-0", "0.1", "3.141592653589793238462643383279", "08", "+5", " 5", "5 ", "1_000", "1.",
    ".5", "nan", "inf", "0x10", "1e", "--1", "", "1.0", "12345678901234567890",
]  # fmt: skip


@pytest.mark.parametrize("kind", [int, float])
def test_numbers_converted_without_pydantic_are_what_pydantic_gives(kind):
    from pydantic import TypeAdapter, ValidationError

    from fgrpo_theory.cli._app import _FLOAT_TEXT, _INT_TEXT

    pattern = _INT_TEXT if kind is int else _FLOAT_TEXT
    adapter = TypeAdapter(kind)
    fast = 0
    for text in TEXTS:
        if not pattern.match(text):
            continue
        fast += 1
        try:
            want = adapter.validate_python(text)
        except ValidationError:  # pragma: no cover - would be a wrong fast path
            pytest.fail(f"{text!r}: Pydantic refuses it, the fast path converts it")
        got = kind(text)
        assert type(got) is type(want) and repr(got) == repr(want), text
    assert fast >= 5  # the list has canonical texts of both kinds


def test_the_fast_path_is_taken_only_for_plain_options():
    import typer
    from typer.core import TyperOption

    from fgrpo_theory.cli._app import _without_coercion
    from fgrpo_theory.cli._main import app  # noqa: F401  (registers every command)

    cmd = typer.main.get_command(app).commands["simulate"]
    opts = {p.name: p for p in cmd.params if isinstance(p, TyperOption)}
    assert _without_coercion(opts["K"], "1000") == (True, 1000)
    assert _without_coercion(opts["lr"], "0.5") == (True, 0.5)
    assert _without_coercion(opts["K"], "1e3") == (False, None)  # Typer decides (refuses)
    assert _without_coercion(opts["K"], "08") == (False, None)
    assert _without_coercion(opts["subset"], None) == (True, ())
    assert _without_coercion(opts["subset"], ("a=1",)) == (False, None)
    assert _without_coercion(opts["config"], "x.toml") == (False, None)  # a path


PROBE = """
import sys
from fgrpo_theory.cli._main import main
code = main(["simulate", "--K", "6", "--N", "8", "--steps", "5", "--seeds", "1",
             "--threads", "1"])
heavy = ["pydantic", "numba.np.arraymath", "scipy.linalg", "array_api_compat.numpy",
         "matplotlib", "scipy.stats", "torch", "pandas", "pyarrow", "numba.np.arrayobj"]
print(code, *[m for m in heavy if m in sys.modules])
"""


def test_a_warm_simulate_imports_no_pydantic_scipy_linalg_or_numba_registries(tmp_path):
    """Run twice in fresh processes: the second finds its kernels in the cache; loading them
    must not install Numba's lowering registries (which import scipy.linalg) and the command
    must not import Pydantic, the array-API wrapper of NumPy, SciPy's stats or matplotlib, nor
    pandas (one config printed: its summary is built without it), nor Numba's array module
    (the kernels allocate with sim.kalloc, whose code names no environment there)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2].split() == ["0"], out.stdout


_END = """
import atexit, sys, threading, time
import fgrpo_theory.cli._entry as entry

class Torn:
    def __del__(self):
        print("torn down", flush=True)

kept = Torn()  # a module global: freed by the interpreter's teardown only
atexit.register(print, "exit handler")
sys.stdout.write("unflushed ")
"""
_PYTHONS_EXIT = """try:
    entry._end({})
except SystemExit as e:
    print("python's exit", e.code)
    raise
"""


@pytest.mark.parametrize(
    ("tail", "code", "out", "err"),
    [
        ("entry._end(3)", 3, "unflushed exit handler\n", ""),
        ("entry._end(None)", 0, "unflushed exit handler\n", ""),
        ("entry._end('a message')", 1, "unflushed exit handler\n", "a message\n"),
        ("entry._end(256 + 7)", 7, "unflushed exit handler\n", ""),
        ("entry._end(2**64)", 255, "unflushed exit handler\n", ""),  # no C long: -1
        # a thread that is not a daemon: Python's exit (SystemExit), which joins it
        (
            "threading.Thread(target=lambda: (time.sleep(0.3), print('joined'))).start()\n"
            + _PYTHONS_EXIT.format(0),
            0,
            "unflushed python's exit 0\njoined\nexit handler\n",
            "",
        ),
        # a tracer (coverage, a debugger): Python's exit
        ("sys.settrace(lambda *a: None)\n" + _PYTHONS_EXIT.format(4), 4,
         "unflushed python's exit 4\nexit handler\n", ""),
    ],
)  # fmt: skip
def test_the_console_script_ends_as_sys_exit_without_the_teardown(tail, code, out, err):
    """``_end`` (the console script's last step): the exit handlers run and the streams are
    flushed, the status is sys.exit's, and the interpreter's teardown (0.3-0.6 s after a
    simulate) is skipped: a finalizer of a global is not called, unless a thread or a tracer
    needs Python's own exit."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-c", _END + tail], capture_output=True, text=True, env=env, timeout=60
    )
    # (Python's teardown may or may not call the finalizer: it promises nothing)
    assert (r.returncode, r.stdout.replace("torn down\n", ""), r.stderr) == (code, out, err)
    if "python's exit" not in out:
        assert "torn down" not in r.stdout


@pytest.mark.parametrize("status", ["0", "3", "None"])
def test_a_stdout_the_program_closed_ends_as_in_python(status):
    """A closed stdout is skipped at the end, as Python's exit skips it (the oracle): the same
    status, the same output. Before: ``_end`` flushed it, and the ValueError gave status 120."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    prelude = "import sys\nimport fgrpo_theory.cli._entry as entry\nprint('out')\n"
    prelude += "sys.stdout.flush(); sys.stdout.close()\n"
    runs = [
        subprocess.run(
            [sys.executable, "-c", prelude + end],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )  # fmt: skip
        for end in (f"entry._end({status})", f"sys.exit({status})")
    ]
    assert [(r.returncode, r.stdout, r.stderr) for r in runs] == [
        (int(status) if status != "None" else 0, "out\n", "")
    ] * 2


def test_the_console_script_writes_its_file_and_refuses_in_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = [sys.executable, "-c", "from fgrpo_theory.cli._entry import script; script()"]
    out = tmp_path / "miss.csv"
    r = subprocess.run(
        [*run, "miss-prob", "--N", "8", "--mu", "0.5", "--rho", "0.1", "--output", str(out)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert (r.returncode, r.stdout) == (0, "") and out.read_text().startswith("N,")
    r = subprocess.run(
        [*run, "miss-prob", "--N", "0", "--mu", "0.5", "--rho", "0.1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr
    assert "--N" in r.stderr


POP_PROBE = """
import sys
from fgrpo_theory.population import PopulationConfig, simulate_population
simulate_population(PopulationConfig(steps=5, seeds=1), threads=1)
print("numba.np.arrayobj" in sys.modules)
"""


def test_a_warm_population_imports_no_numba_array_module(tmp_path):
    """The population's kernels allocate with sim.kalloc too: loaded from the cache, they import
    no ``numba.np.arrayobj`` (0.06 s of a process; an ``np.arange`` in them did)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", POP_PROBE], capture_output=True, text=True, env=env,
            cwd=tmp_path, timeout=600,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"], out.stdout
