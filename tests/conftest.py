"""Shared test fixtures.

Hypothesis runs derandomized (a fixed seed derived from each test) with no deadline, so the suite
is deterministic and Numba's first compilation never trips a time limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "deterministic",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("deterministic")


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """Run ``fgrpo-theory`` in-process: ``cli("miss-prob", "--N", "4")`` -> CliResult."""
    from fgrpo_theory.cli import main

    def run(*args: str) -> CliResult:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run
