"""Every command-line user error names the option the user typed (issue 10).

Ported from an abandoned branch's table; the mechanism is ``fgrpo_theory.cli._in_option_words``.
A hostile review found messages that named the library's argument (``lr``, ``K``, ``steps``,
``gamma``, ...) instead of the option (``--lr``, ``--K``, ``--steps``, ``--gamma``). Each case runs
in-process through :func:`fgrpo_theory.cli.main` and must end with exit code 2, exactly one line
on stderr that starts with ``Error:`` and names the option (and, where given, a fragment of the
bad value), nothing on stdout and no traceback. Sizes are tiny, and every case is refused before
anything is simulated, so the table runs in seconds.
"""

from __future__ import annotations

import pytest

from fgrpo_theory.cli import main

SIM = ["simulate", "--K", "4", "--N", "2", "--steps", "2", "--seeds", "1", "--format", "csv"]
POP = ["population", "--preset", "quick", "--format", "csv"]
MASS = ["mass", "--logits", "0x3,1", "--correct", "0..1", "--samples", "10", "--format", "csv"]


def _without(base: list[str], opt: str) -> list[str]:
    if opt not in base:
        return list(base)
    i = base.index(opt)
    return base[:i] + base[i + 2 :]


def _sim(opt: str, value: str) -> list[str]:
    return _without(SIM, opt) + [opt, value]


# (argv, the option the message must start with, a fragment of the bad value or None)
CASES = [
    # simulate: SimConfig keys used to be reported as the library names them
    (_sim("--K", "1"), "--K", "1"),
    (_sim("--K", "1000000000000"), "--K", "1000000000000"),
    (_sim("--steps", "0"), "--steps", "0"),
    (_sim("--steps", "1000000000000"), "--steps", "1000000000000"),
    (_sim("--steps", "9223372036854775808"), "--steps", "9223372036854775808"),
    (_sim("--seeds", "0"), "--seeds", "0"),
    (_sim("--seeds", "1000000000"), "--seeds", "1000000000"),
    (_sim("--seeds", "9223372036854775808"), "--seeds", "9223372036854775808"),
    (_sim("--seed", "-1"), "--seed", "-1"),
    (_sim("--lr", "0"), "--lr", "0"),
    (_sim("--lr", "nan"), "--lr", "nan"),
    (_sim("--lr", "inf"), "--lr", "inf"),
    (_sim("--lr", "1e400"), "--lr", "inf"),
    (_sim("--gamma", "-1"), "--gamma", "-1"),
    (_sim("--weight-decay", "nan"), "--weight-decay", "nan"),
    (_sim("--weight-decay", "-1"), "--weight-decay", "-1"),
    (_sim("--inner-updates", "0"), "--inner-updates", "0"),
    (_sim("--inner-updates", "1000000000000"), "--inner-updates", "1000000000000"),
    (_sim("--max-resamples", "1000000000000"), "--max-resamples", "1000000000000"),
    (_sim("--clip-low", "nan"), "--clip-low", "nan"),
    (_sim("--clip-high", "-1"), "--clip-high", "-1"),
    (_sim("--dual-clip", "0.5"), "--dual-clip", "0.5"),
    (_sim("--log-every", "0"), "--log-every", "0"),
    (_sim("--pass-k", "1..1000000"), "--pass-k", "1000000"),
    (_sim("--thresholds", "1"), "--thresholds", "1"),
    (_sim("--controls", "bogus"), "--controls", "bogus"),
    (_sim("--algo", "bogus"), "--algo", "bogus"),
    (_sim("--rule", "theory"), "--rule", "theory"),
    (_sim("--optimizer", "bogus"), "--optimizer", "bogus"),
    (_sim("--advantage", "paper-sim"), "--advantage", "paper-sim"),
    (_sim("--rewards", "1,1"), "--rewards R_c", "1"),
    (_sim("--logits", "nan,0,0,0"), "--logits", "nan"),
    (_sim("--logits", "0x5"), "--logits", "0x5"),
    (_sim("--correct", "4"), "--correct", "4"),
    (_sim("--correct", "-1"), "--correct", "-1"),
    (_sim("--subset", "rare=9"), "--subset rare", "9"),
    (_sim("--dynamic-sampling", "bogus"), "--dynamic-sampling", "bogus"),
    (_sim("--ds-range", "0.9,0.1"), "--ds-range", "0.9"),
    (_sim("--config", "missing.toml"), "--config", "missing.toml"),
    # a value Typer cannot convert to the option's int or float type: the option and the value
    # (Typer's own words named the option only: "Input should be a valid integer")
    *[(_sim(o, "1.5"), o, "'1.5'") for o in ("--inner-updates", "--steps", "--seeds", "--K")],
    *[(_sim(o, "x"), o, "'x'") for o in ("--seed", "--max-resamples", "--log-every", "--threads")],
    (_sim("--steps", "1e3"), "--steps", "'1e3'"),
    (_sim("--lr", "abc"), "--lr", "'abc'"),
    (_sim("--weight-decay", "1,2"), "--weight-decay", "'1,2'"),
    *[(POP + [o, "2.5"], o, "'2.5'") for o in ("--inner-updates", "--steps", "--seeds", "--seed")],
    (POP + ["--threads", "x"], "--threads", "'x'"),
    (POP + ["--clip-low", "wide"], "--clip-low", "'wide'"),
    (["figures", "fig1a_tail_miss", "--dpi", "300.5"], "--dpi", "'300.5'"),
    (["compare-passk", "--m", "1.5"], "--m", "'1.5'"),
    # a dynamic-sampling option without a filter: the filter is named as its option
    (_sim("--ds-range", "0.2,0.8"), "--ds-range", "0.2"),
    (POP + ["--ds-range", "0.2,0.8"], "--ds-range", "0.2"),
    (POP + ["--ds-fill", "next-prompt"], "--ds-fill", "next-prompt"),
    # lr-multiplier: the library's bound on gamma
    (["lr-multiplier", "--gamma", "1e300"], "--gamma", "1e+300"),
    # mass: rule, lr, N, samples and group in the user's words
    (_without(MASS, "--samples") + ["--samples", "1"], "--samples", "1"),
    (MASS + ["--lr", "nan"], "--lr", "nan"),
    (MASS + ["--lr", "0"], "--lr", "0"),
    (MASS + ["--gamma", "-1"], "--gamma", "-1"),
    (MASS + ["--N", "0"], "--N", "0"),
    (MASS + ["--N", "1000000000", "--method", "monte-carlo"], "--N", "1000000000"),
    (MASS + ["--group", "0x0"], "--group", None),
    (MASS + ["--rewards", "1,1"], "--rewards R_c", "1"),
    (MASS + ["--advantage", "bogus"], "--advantage", "bogus"),
    (MASS + ["--method", "monte-carlo", "--samples", "1000000000000"], "--samples", None),
]


@pytest.mark.parametrize(
    ("argv", "option", "fragment"),
    CASES,
    ids=[" ".join(c[0][len(c[0]) - 2 :]) + f" [{c[0][0]}]" for c in CASES],
)
def test_error_names_the_option(argv, option, fragment, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"Error: {option} "), lines[0]
    if fragment is not None:
        assert fragment in lines[0], lines[0]
    assert out == ""
    assert list(tmp_path.iterdir()) == []


def test_config_value_keeps_its_key_and_a_flag_its_option(capsys, tmp_path, monkeypatch):
    """A bad value from --config is named by its key (as written in the file); the same value
    typed as a flag is named by the option."""
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "run.toml"
    cfg.write_text("K = 4\nN = 2\nsteps = 0\nseeds = 1\nrewards = [1.0, 1.0]\n")
    assert main(["simulate", "--config", str(cfg), "--format", "csv"]) == 2
    assert capsys.readouterr().err.strip() == "Error: steps must be >= 1; got 0"
    assert main(["simulate", "--config", str(cfg), "--steps", "-3", "--format", "csv"]) == 2
    assert capsys.readouterr().err.strip() == "Error: --steps must be >= 1; got -3"
    assert main(["simulate", "--config", str(cfg), "--steps", "2", "--format", "csv"]) == 2
    assert capsys.readouterr().err.strip().startswith("Error: r_correct must be > r_incorrect")


def test_figures_out_that_cannot_be_made(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["figures", "fig1a_tail_miss", "--out", str(blocker / "sub")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("Error: --out "), err
    assert list(tmp_path.iterdir()) == [blocker]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (_sim("--inner-updates", "1.5"), "--inner-updates must be an integer; got '1.5'"),
        (POP + ["--inner-updates=1.5"], "--inner-updates must be an integer; got '1.5'"),
        (POP + ["--seeds", "2", "--seeds", "x"], "--seeds must be an integer; got 'x'"),
        (_sim("--lr", "abc"), "--lr must be a number; got 'abc'"),
        (
            _sim("--ds-range", "0.2,0.8"),
            "--ds-range must be None unless --dynamic-sampling = 'openrlhf'; got [0.2, 0.8]",
        ),
        (
            POP + ["--ds-fill", "next-prompt"],
            "--ds-fill must be 'redraw' unless --dynamic-sampling is on; got 'next-prompt'",
        ),
    ],
)
def test_unconverted_numbers_and_dynamic_sampling_in_option_words(argv, message, capsys):
    """The whole line: the option and the value typed, in the words of every other user error;
    the filter a dynamic-sampling option needs is named as the option --dynamic-sampling."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err == f"Error: {message}\n" and out == ""


def test_a_config_key_in_the_requirement_stays_a_key(capsys, tmp_path):
    """Only a message whose argument the user typed is put in option words: a ds_range from the
    config file keeps naming the key dynamic_sampling, as the file does."""
    cfg = tmp_path / "run.toml"
    cfg.write_text("K = 4\nN = 2\nsteps = 2\nseeds = 1\nds_range = [0.2, 0.8]\n")
    assert main(["simulate", "--config", str(cfg), "--format", "csv"]) == 2
    assert capsys.readouterr().err == (
        "Error: ds_range must be None unless dynamic_sampling = 'openrlhf'; got [0.2, 0.8]\n"
    )
