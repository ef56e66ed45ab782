"""``run_validation``: every closed form against its oracle, and the checks can fail."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory import validation
from fgrpo_theory.validation import Z_CRIT, _exact_row, _mc_prop_row, _mc_row, run_validation

COLUMNS = [
    "group",
    "quantity",
    "parameters",
    "method",
    "closed_form",
    "estimate",
    "stderr",
    "z",
    "tolerance",
    "passed",
]


@pytest.fixture(scope="module")
def quick() -> pd.DataFrame:
    return run_validation(quick=True)


def test_quick_validation_passes(quick):
    assert list(quick.columns) == COLUMNS
    failed = quick[~quick["passed"]]
    assert failed.empty, failed.to_string()
    assert set(quick["group"]) == {"tail_miss", "modes", "advantages", "passk", "mass", "schemes"}
    assert {"monte_carlo", "enumeration", "quadrature", "scan", "mpmath"} <= set(quick["method"])
    assert len(quick) >= 100
    assert np.isfinite(quick[["closed_form", "estimate", "stderr", "z"]].to_numpy()).all()


def test_quick_validation_is_deterministic(quick):
    pd.testing.assert_frame_equal(quick, run_validation(quick=True))


def test_every_library_closed_form_is_covered(quick):
    text = " ".join(quick["quantity"])
    for needle in (
        "Lemma 3.1",
        "P-7",
        "hit",
        "missed modes",
        "peak N*",
        "P-3",
        "P-13",
        "Fig. 4",
        "app. N",
        "pass@k",
        "P-17",
        "P-10",
        "E[U2]",
        "Lemma H.1",
        "section 6",
        "sec. 15",
    ):
        assert needle in text, needle


def test_a_wrong_closed_form_fails(monkeypatch):
    """A 3 % error in Lemma 3.1 is caught by the Monte Carlo checks (20,000 groups)."""
    from fgrpo_theory import tail_miss

    real = tail_miss.tail_miss_probability
    monkeypatch.setattr(tail_miss, "tail_miss_probability", lambda n, m, t: real(n, m, t) + 0.03)
    rows = validation._checks_tail_miss(20_000)
    mc = [r for r in rows if r.method == "monte_carlo" and "Lemma 3.1" in r.quantity]
    assert mc and not any(r.passed for r in mc)


def test_row_rules():
    # Monte Carlo: |z| <= 4 passes, beyond fails.
    assert _mc_row("q", "p", 0.5, 0.5 + 3.9 * 0.01, 0.01).passed
    assert not _mc_row("q", "p", 0.5, 0.5 + 4.1 * 0.01, 0.01).passed
    # Zero-variance estimate: only an exact match passes.
    assert _mc_row("q", "p", 1.0, 1.0, 0.0).passed
    assert not _mc_row("q", "p", 0.999, 1.0, 0.0).passed
    # A proportion uses the standard error under the closed form: sqrt(p0 (1 - p0) / n).
    r = _mc_prop_row("q", "p", 0.2, 0.21, 10_000)
    assert r.stderr == pytest.approx(0.004) and r.z == pytest.approx(2.5)
    # Deterministic: relative tolerance times max(1, |closed|).
    assert _exact_row("q", "p", "enumeration", 10.0, 10.0 + 9e-12, 1e-12).passed
    assert not _exact_row("q", "p", "enumeration", 10.0, 10.0 + 2e-11, 1e-12).passed
    assert not _exact_row("q", "p", "scan", 9, 10, 0.0).passed
    assert Z_CRIT == 4.0


@pytest.mark.slow
def test_full_validation_passes():
    df = run_validation(quick=False)
    assert df["passed"].all(), df[~df["passed"]].to_string()


def test_a_wrong_scheme_profile_fails(monkeypatch):
    """A 1 % error in H(mu; N) is caught by enumeration, 20 % by Monte Carlo (20,000 reps), and
    1 % in the pass@k weights by the reference values."""
    from fgrpo_theory.schemes import theory
    from fgrpo_theory.validation._schemes import _checks_schemes

    good = theory.difficulty_profile
    monkeypatch.setattr(theory, "difficulty_profile", lambda *a, **k: 1.01 * good(*a, **k))
    rows = _checks_schemes(20_000)
    assert not all(r.passed for r in rows if r.method == "enumeration")
    monkeypatch.setattr(theory, "difficulty_profile", lambda *a, **k: 1.2 * good(*a, **k))
    rows = _checks_schemes(20_000)
    assert not all(r.passed for r in rows if r.method == "monte_carlo")
    monkeypatch.setattr(theory, "difficulty_profile", good)
    weights = theory.passk_weights
    monkeypatch.setattr(theory, "passk_weights", lambda *a, **k: weights(*a, **k) * 1.01)
    rows = _checks_schemes(20_000)
    assert not all(r.passed for r in rows if r.method in ("reference", "mpmath"))
