"""A fuzz test that stays (issue 10): every command, argument lists built from its own options.

For each command the option list is read from the Typer/click command itself (names, flags,
choices, defaults), so a new option is fuzzed without editing this file. Values mix valid ones,
boundary ones and garbage. Each argument list runs in-process through ``fgrpo_theory.cli.main``
in a temporary working directory, and the CLI contract is checked:

- exit code 0 or 2 (1 only for a failed ``validate``), never a traceback;
- exactly one line on stderr, starting with ``Error:``, when the exit code is 2;
- no NaN in what is printed or written;
- no file left behind by a failing run.

Hypothesis runs derandomized (tests/conftest.py) with a fixed number of examples per command, so
the test is deterministic and takes about a minute on 2 cores. Commands that can start heavy work
(``simulate``, ``mass``, ``figures``, ``validate``) get tiny sizes: ``simulate`` always gets small
``--K/--N/--steps/--seeds`` unless the fuzzed value is itself small or garbage, ``figures`` is
only asked for ``list`` or an unknown name, ``sequence`` always runs its seconds-long ``smoke``
preset (other options fuzzed on it), and ``validate``'s library call is replaced by a
two-row stand-in (what is fuzzed is the command's parsing and output, not the checks).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fgrpo_theory.cli import app, main

# Valid values by option name (the grammar of each option; see HELPERS.md / fgrpo_theory._spec).
VALID: dict[str, list[str]] = {
    "--N": ["1", "4", "2,8", "2..8:x2", "4..16:4"],
    "--mu": ["0.3", "0.2,0.8", "1e-9"],
    "--rho": ["0.05", "0.1,0.5", "0.999"],
    "--tau": ["0.01", "0.001,0.1"],
    "--gamma": ["0", "1", "0,0.5,2"],
    "--advantage": ["grpo", "trl", "verl", "dr-grpo", "rloo", "openrlhf", "grpo-bessel"],
    "--convention": ["grpo", "trl", "rloo"],
    "--rewards": ["1,-1", "1,0", "2,-3"],
    "--n": ["1", "16", "1024"],
    "--c": ["0", "3", "16"],
    "--k": ["1", "2,8", "1..4"],
    "--from-csv": ["counts.csv", "bad.csv", "-"],
    "--output": ["out.csv", "out.json", "sub/missing.csv", "/dev/full", "."],
    "--plot": ["p.png", "p.svg"],
    "--logits": ["0x3,1", "z.npy", "z.csv", "z2d.npy", "zc.npy"],
    "--correct": ["0", "0..1", "2.0x1,1.0x2"],
    "--incorrect": ["0x2", ""],
    "--n-correct": ["1", "2"],
    "--correct-mask": ["m.csv"],
    "--eta": ["0.01", "1"],
    "--lr": ["0.01", "1"],
    "--group": ["0x2", "0,1", "1x3"],
    "--seed": ["0", "7"],
    "--seeds": ["1", "2"],
    "--samples": ["10", "100"],
    "--K": ["3", "4"],
    "--steps": ["1", "2"],
    "--log-every": ["1", "2"],
    "--pass-k": ["1", "1,2"],
    "--threads": ["1"],
    "--inner-updates": ["1", "2"],
    "--weight-decay": ["0", "0.1"],
    "--subset": ["rare=0"],
    "--out": ["sw"],
    "--config": ["missing.toml", "cfg.toml"],
    "--scheduler": ["local", "nonsense"],
    "--algo": ["grpo", "dapo", "cispo"],
    "--optimizer": ["sgd", "adam"],
    "--rule": ["theory", "linear", "logprob"],
}
BOUNDARY = ["0", "1", "-1", "2", "1e-300", "0.5", "9007199254740993", "1..1", "0..0"]
GARBAGE = ["", " ", "abc", "nan", "inf", "-inf", ",", "1..", "..2", "x", "1e999", "0x0", "1+2j"]
GARBAGE += ["1,,2", "--", "é", "2..1", "1..8:x1", "1..8:0", "[1]", "None"]
# Values that could start unbounded work in commands still waiting for their bounds: never
# sent to these options (simulate/mass bounds are other helpers' work; see the lead's notes).
HEAVY = {"simulate", "mass", "figures"}
HEAVY_OK = ["0", "1", "2", "-1", *GARBAGE]

#: A small configuration added to every simulate run unless the option is fuzzed itself.
SIMULATE_TINY = {"--K": "4", "--N": "2", "--steps": "2", "--seeds": "1", "--threads": "1"}
#: Appended last to every sequence run (the last one wins): the seconds-long preset, whatever
#: preset was fuzzed (quick trains for half a minute); the other options are fuzzed on it.
SEQUENCE_TINY = ["--preset", "smoke"]

COMMANDS = sorted(__import__("typer").main.get_command(app).commands)
EXAMPLES = {"simulate": 12, "validate": 15, "figures": 15, "mass": 30, "sequence": 12}


def _params(command: str) -> list:
    import typer.main

    group = typer.main.get_command(app)
    return [p for p in group.commands[command].params if p.name != "help"]


def _choices(param) -> list[str]:
    desc = getattr(param, "type_descriptor", None)
    if desc is not None and getattr(desc, "is_choice", False):
        return [getattr(c, "value", str(c)) for c in desc.choices or ()]
    return []


def _value_strategy(command: str, param) -> st.SearchStrategy[str]:
    """Half valid values (the option's grammar, choices, default), half boundary and garbage."""
    name = param.opts[0]
    valid = list(VALID.get(name, [])) + _choices(param)
    if param.default is not None and not isinstance(param.default, bool):
        valid.append(str(getattr(param.default, "value", param.default)))
    bad = HEAVY_OK if command in HEAVY else BOUNDARY + GARBAGE
    if not valid:
        return st.sampled_from(sorted(set(bad)))
    return st.one_of(st.sampled_from(sorted(set(valid))), st.sampled_from(sorted(set(bad))))


#: A valid starting point per command (fuzzed options come after it, and the last one wins).
BASE = {
    "miss-prob": ["--N", "1..16", "--mu", "0.3", "--rho", "0.1"],
    "peak": ["--mu", "0.3", "--rho", "0.1"],
    "passk": ["--n", "16", "--c", "3"],
}


@st.composite
def _argv(draw, command: str) -> list[str]:
    argv = [command]
    if command in BASE and draw(st.booleans()):
        argv += BASE[command]
    if command == "figures":
        argv.append(draw(st.sampled_from(["list", "no-such-figure"])))
    params = [p for p in _params(command) if p.param_type_name == "option"]
    chosen = draw(st.lists(st.sampled_from(params), max_size=5, unique_by=lambda p: p.name))
    given_opts = set()
    for p in chosen:
        if p.is_flag:
            opts = p.opts + list(p.secondary_opts)
            argv.append(draw(st.sampled_from(opts)))
            continue
        argv += [p.opts[0], draw(_value_strategy(command, p))]
        given_opts.add(p.opts[0])
    if command == "simulate":
        for opt, val in SIMULATE_TINY.items():
            if opt not in given_opts:
                argv += [opt, val]
    if command == "sequence":
        argv += SEQUENCE_TINY
    return argv


def _fixtures(folder: Path) -> None:
    """Input files the value pools name (some deliberately bad)."""
    (folder / "counts.csv").write_text("problem,n,c\nA,16,3\nB,8,0\n")
    (folder / "bad.csv").write_text("n,c\n10,abc\n")
    np.save(folder / "z.npy", np.array([1.0, 0.0, 0.5]))
    np.save(folder / "z2d.npy", np.zeros((2, 2)))
    np.save(folder / "zc.npy", np.array([1 + 1j, 0]))
    (folder / "z.csv").write_text("1.0\n0.0\n0.5\n")
    (folder / "m.csv").write_text("1\n0\n0\n")
    (folder / "cfg.toml").write_text('K = 4\nN = 2\nsteps = 2\nseeds = 1\nlogits = "0x4"\n')


def _listing(folder: Path) -> set[str]:
    names = {str(p.relative_to(folder)) for p in folder.rglob("*")}
    return {n for n in names if not n.startswith(".cache")}


_NAN = re.compile(r"(?<![A-Za-z])nan(?![A-Za-z])", re.IGNORECASE)


def _fake_validation(quick: bool = False) -> pd.DataFrame:
    return pd.DataFrame({"quantity": ["a", "b"], "value": [0.5, 1.0], "passed": [True, True]})


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_contract_holds_for_fuzzed_arguments(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("FGRPO_THEORY_CACHE", str(tmp_path / ".cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))
    _fixtures(tmp_path)
    baseline = _listing(tmp_path)

    @settings(
        max_examples=EXAMPLES.get(command, 80),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )
    @given(argv=_argv(command))
    def check(argv: list[str]) -> None:
        with mock.patch("fgrpo_theory.validation.run_validation", _fake_validation):
            code, out, err = _run(argv)
        try:
            assert "Traceback" not in err, (argv, err)
            allowed = (0, 1, 2) if command == "validate" else (0, 2)
            assert code in allowed, (argv, code, err)
            if code == 2:
                assert err.count("\n") == 1 and err.startswith("Error: "), (argv, err)
                assert _listing(tmp_path) == baseline, (argv, err)
            assert not _NAN.search(out), (argv, out[:500])
            for new in _listing(tmp_path) - baseline:
                path = tmp_path / new
                if path.is_file() and path.suffix in (".csv", ".json"):
                    assert not _NAN.search(path.read_text(errors="replace")), (argv, new)
        finally:  # a successful run may write files: start every example from the fixtures
            for new in sorted(_listing(tmp_path) - baseline, reverse=True):
                path = tmp_path / new
                if path.is_dir() and not path.is_symlink():
                    with contextlib.suppress(OSError):
                        os.rmdir(path)
                else:
                    path.unlink(missing_ok=True)

    check()
