"""SimConfig validation, TOML loading, sweeps and hashes (no simulation, no compilation)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fgrpo_theory
from fgrpo_theory.sim import SimConfig, config_hash, expand_grid, load_config
from fgrpo_theory.sim.config import parse_index_set, parse_logits

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"K": 1}, "K must be >= 2; got 1"),
        ({"K": 2.5}, "K must be an integer; got 2.5"),
        ({"correct": 0}, "correct must be >= 1; got 0"),
        ({"correct": ""}, "correct must be a non-empty comma-separated list; got ''"),
        ({"correct": "6"}, "correct must be indices in [0, 5] (size 6); got '6'"),
        ({"N": 0}, "N must be >= 1; got 0"),
        ({"steps": 0}, "steps must be >= 1; got 0"),
        ({"lr": 0.0}, "lr must be > 0.0; got 0.0"),
        ({"lr": -1.0}, "lr must be > 0.0; got -1.0"),
        ({"algo": "ppo"}, "algo must be one of grpo, dapo, cispo; got 'ppo'"),
        ({"rule": "exp"}, "rule must be one of linear, logprob; got 'exp'"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of sgd, adam, adamw; got 'rmsprop'"),
        ({"advantage": "ppo"}, "advantage must be one of"),
        (
            {"subsets": {"rare": "1..6"}},
            "subsets.rare must be indices in [0, 5] (size 6); got '1..6'",
        ),
        (
            {"subsets": {"rare": "7"}},
            "subsets.rare must be indices in [0, 5] (size 6); got '7'",
        ),
        ({"subsets": {"bad name": "1"}}, "subsets must be names that are identifiers"),
        (
            {"logits": "1.0x3,0x2"},
            "logits must be a spec of K = 6 actions (its counts add up to 5)",
        ),
        ({"logits": "ax2"}, "logits must be VALUE or VALUExCOUNT with a number VALUE"),
        ({"gamma": -0.5}, "gamma must be >= 0.0; got -0.5"),
        ({"r_correct": -1.0}, "r_correct must be > r_incorrect = -1.0; got -1.0"),
        ({"seeds": 0}, "seeds must be >= 1; got 0"),
        ({"inner_updates": 0}, "inner_updates must be >= 1; got 0"),
        ({"clip_low": 1.5}, "clip_low must be in [0.0, 1.0]; got 1.5"),
        ({"log_steps": [0, 200]}, "log_steps must be <= 100; got 200"),
        ({"backend": "sumtree", "optimizer": "adam"}, "backend must be dense unless"),
        ({"backend": "gpu"}, "backend must be one of auto, dense, sumtree; got 'gpu'"),
    ],
)
def test_bad_configs_raise_naming_field_and_value(kwargs, message):
    with pytest.raises(ValueError) as exc:
        SimConfig(**kwargs)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_defaults_and_clip_defaults_per_algo():
    assert SimConfig().clip_bounds() == (0.2, 0.2)
    assert SimConfig(algo="dapo").clip_bounds() == (0.2, 0.28)
    assert SimConfig(algo="cispo").clip_bounds() == (1.0, 5.0)
    # replace() re-derives the defaults of the new algorithm
    assert SimConfig().replace(algo="cispo").clip_bounds() == (1.0, 5.0)
    assert SimConfig(algo="cispo", clip_high=2.0).clip_bounds() == (1.0, 2.0)


def test_parse_logits_and_indices():
    z = parse_logits("5.0x1,3.0x2,0.0x3", 6)
    np.testing.assert_array_equal(z, [5, 3, 3, 0, 0, 0])
    np.testing.assert_array_equal(parse_logits("0.5x4", 4), [0.5] * 4)
    np.testing.assert_array_equal(parse_logits(None, 3), [0.0] * 3)
    with pytest.raises(ValueError, match="K = 4 actions"):
        parse_logits("0.5", 4)  # one grammar: "0.5" is ONE action
    np.testing.assert_array_equal(parse_index_set("1..3,5", 6, "x"), [1, 2, 3, 5])


def test_log_schedule():
    assert SimConfig(steps=25, log_every=10).log_schedule().tolist() == [0, 10, 20, 25]
    assert SimConfig(steps=25, log_steps=[25, 3]).log_schedule().tolist() == [3, 25]


def test_expand_grid_product_and_order():
    cfgs = expand_grid({"K": 6, "N": [2, 4, 8], "gamma": [0.0, 1.0], "pass_k": [1, 4]})
    assert [(c.N, c.gamma) for c in cfgs] == [
        (2, 0.0), (2, 1.0), (4, 0.0), (4, 1.0), (8, 0.0), (8, 1.0)
    ]  # fmt: skip
    assert all(c.pass_k == (1, 4) for c in cfgs)
    # a list of lists sweeps a list-valued field
    assert len(expand_grid({"pass_k": [[1], [1, 8]]})) == 2
    with pytest.raises(ValueError, match="sweep field must be a SimConfig field"):
        expand_grid({"KK": 3})
    with pytest.raises(ValueError, match="N must be >= 1; got 0"):
        expand_grid({"N": [4, 0]})


def test_config_hash_is_stable_and_sensitive(monkeypatch):
    a = SimConfig(K=6, N=4)
    h = config_hash(a)
    assert len(h) == 16 and int(h, 16) >= 0
    assert config_hash(SimConfig(K=6, N=4)) == h
    assert config_hash(a.replace(gamma=1.0)) != h
    monkeypatch.setattr(fgrpo_theory, "__version__", "9.9.9")
    assert config_hash(a) != h


def test_config_pickles():
    import pickle

    c = SimConfig(subsets={"rare": "1..3"})
    c2 = pickle.loads(pickle.dumps(c))
    assert c2 == c and hash(c2) == hash(c)
    with pytest.raises(TypeError):
        c.subsets["x"] = "1"


def test_toml_loading(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('K = 6\nN = [2, 4]\ngamma = 1.0\n[subsets]\nrare = "1..2"\n')
    cfgs = load_config(p)
    assert [c.N for c in cfgs] == [2, 4] and cfgs[0].subsets == {"rare": "1..2"}
    with pytest.raises(ValueError, match="a single config"):
        SimConfig.from_toml(p)
    p.write_text("K = 6\nNN = 3\n")
    with pytest.raises(ValueError, match="config key in c.toml must be a SimConfig field"):
        load_config(p)
    p.write_text("K = [\n")
    with pytest.raises(ValueError, match="must be valid TOML"):
        load_config(p)
    with pytest.raises(ValueError, match="must be an existing TOML file"):
        load_config(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("name", "rule", "optimizer"),
    [
        ("fig2-logprob-adam", "logprob", "adam"),
        ("fig2-linear-adamw", "linear", "adamw"),
    ],
)
def test_fig2_presets(name, rule, optimizer):
    from fgrpo_theory.sim.presets import load_preset, preset_names

    assert name in preset_names()
    cfgs = expand_grid(load_preset(name))
    assert len(cfgs) == 17 * 2
    assert sorted({c.N for c in cfgs}) == [2**j for j in range(1, 18)]
    assert {c.gamma for c in cfgs} == {0.0, 1.0}
    c = cfgs[0]
    assert (c.K, c.steps, c.seeds, c.lr, c.weight_decay) == (128000, 1000, 4, 1e-2, 0.0)
    assert (c.rule, c.optimizer, c.advantage) == (rule, optimizer, "dr-grpo")
    assert (c.r_correct, c.r_incorrect) == (1.0, -1.0)
    z = parse_logits(c.logits, c.K)
    assert (z == 5.0).sum() == 1 and (z == 3.0).sum() == 9999 and (z == 0.0).sum() == 118000
    assert z[0] == 5.0 and parse_index_set(c.correct, c.K, "c").tolist() == list(range(10000))
    assert parse_index_set(c.subsets["rare"], c.K, "r").tolist() == list(range(1, 10000))


def test_importing_sim_and_bad_config_do_not_touch_numba():
    code = (
        "import sys\n"
        "import fgrpo_theory.sim\n"
        "from fgrpo_theory.cli import main\n"
        "code = main(['simulate', '--K', '6', '--subset', 'rare=0..9'])\n"
        "print(code, 'numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "False"]
    assert out.stderr.strip() == (
        "Error: --subset rare must be indices in [0, 5] (size 6); got '0..9'"
    )


def test_preset_unknown_name():
    from fgrpo_theory.sim.presets import load_preset

    with pytest.raises(ValueError, match="preset must be one of fig2-linear-adamw"):
        load_preset("fig3")


def test_building_a_config_does_not_import_the_cli():
    code = (
        "import sys; from fgrpo_theory.sim.config import SimConfig; "
        "from fgrpo_theory.sim.grid import load_sweep; "
        "SimConfig(K=10, correct='0..3', subsets={'a': '1,5..7'}); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'click') "
        "or m.startswith('fgrpo_theory.cli')]; print(bad)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_index_sets_hand_checked():
    assert parse_index_set("0,5,7..9", 10, "correct").tolist() == [0, 5, 7, 8, 9]
    assert parse_index_set("1..9:4, 0", 10, "correct").tolist() == [0, 1, 5, 9]
    for bad, msg in [("3..1", "A <= B"), ("x", "integer index or a range"), ("0..10", r"\[0, 9\]")]:
        with pytest.raises(ValueError, match=msg):
            parse_index_set(bad, 10, "correct")


def test_rewards_key_pair_and_sweep(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text("K = 6\nrewards = [2.0, 0.5]\n")
    (c,) = load_config(p)
    assert (c.r_correct, c.r_incorrect) == (2.0, 0.5)
    cs = expand_grid({"K": 6, "rewards": [[1.0, -1.0], [1.0, 0.0]], "N": [2, 4]})
    assert [(c.N, c.r_correct, c.r_incorrect) for c in cs] == [
        (2, 1.0, -1.0), (2, 1.0, 0.0), (4, 1.0, -1.0), (4, 1.0, 0.0)
    ]  # fmt: skip
    with pytest.raises(ValueError, match="rewards must be a pair"):
        expand_grid({"rewards": [1.0]})
    with pytest.raises(ValueError, match="rewards must be given once"):
        expand_grid({"rewards": [1.0, 0.0], "r_correct": 2.0})


def test_paper_sim_preset_removed():
    with pytest.raises(ValueError, match="it is now 'dr-grpo'"):
        SimConfig(advantage="paper-sim")


@pytest.mark.parametrize(
    ("field", "value"),
    [("steps", 2**63), ("seeds", 2**63), ("prompts", 2**54), ("log_every", 2**60)],
)
def test_counts_bounded(field, value):
    with pytest.raises(ValueError, match=rf"{field} must be <= 9007199254740992"):
        SimConfig(**{field: value})


def test_pass_k_count_bounded():
    with pytest.raises(ValueError, match="pass_k must be at most 1024 values"):
        SimConfig(pass_k=list(range(1, 2000)))


def test_non_utf8_config_named(tmp_path):
    p = tmp_path / "latin.toml"
    p.write_bytes(b"name = 'caf\xe9'\n")
    with pytest.raises(ValueError, match=r"config must be a UTF-8 text file.*latin.toml|latin"):
        load_config(p)
