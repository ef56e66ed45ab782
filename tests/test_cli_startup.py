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
         "matplotlib", "scipy.stats", "torch"]
print(code, *[m for m in heavy if m in sys.modules])
"""


def test_a_warm_simulate_imports_no_pydantic_scipy_linalg_or_numba_registries(tmp_path):
    """Run twice in fresh processes: the second finds its kernels in the cache; loading them
    must not install Numba's lowering registries (which import scipy.linalg) and the command
    must not import Pydantic, the array-API wrapper of NumPy, SciPy's stats or matplotlib."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2].split() == ["0"], out.stdout
