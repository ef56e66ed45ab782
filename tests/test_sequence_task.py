"""The grid-route task of the sequence rung (issue 24): verifier, enumeration, variants, teacher.

Oracles: the verifier walks a route on the grid (``route_is_correct``), independent of the
enumeration of monotone routes that builds the correctness masks; binomial route counts of an
open box; turn counts recomputed by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fgrpo_theory.sequence.task import (
    GridTask,
    _routes,
    answer_index,
    answer_tokens,
    make_prompts,
    route_is_correct,
    teacher_probabilities,
    turns,
)


def _walls(p, i):
    return p.walls[i]


@pytest.mark.parametrize("variant", ["multi", "single"])
def test_masks_agree_with_the_walking_verifier_on_every_answer(variant):
    task = GridTask(L=5, variant=variant, n_train=6, n_test=4, max_walls=8, min_correct=2,
                    rare_turns=2, seed=3)  # fmt: skip
    p = make_prompts(task)
    ans = answer_tokens(np.arange(4**5), 5)
    for i in range(p.n):
        walk = [route_is_correct(p.h[i], p.v[i], p.a[i], 5, _walls(p, i), m) for m in ans]
        np.testing.assert_array_equal(p.correct[i], walk)


def test_default_task_masks_on_two_prompts():
    p = make_prompts(GridTask(n_train=2, n_test=0, seed=11))
    ans = answer_tokens(np.arange(4**7), 7)
    for i in range(2):
        walk = [route_is_correct(p.h[i], p.v[i], p.a[i], 7, p.walls[i], m) for m in ans]
        np.testing.assert_array_equal(p.correct[i], walk)


def test_multi_prompts_have_common_and_rare_answers():
    task = GridTask(n_train=40, n_test=20, seed=5)
    p = make_prompts(task)
    t = turns(answer_tokens(np.arange(task.n_answers), task.L))
    assert (p.correct.sum(1) >= task.min_correct).all()
    assert not (p.rare & ~p.correct).any()
    np.testing.assert_array_equal(p.rare, p.correct & (t >= task.rare_turns)[None, :])
    assert p.rare.any(1).all() and (p.correct & ~p.rare).any(1).all()


def test_single_variant_has_one_answer_and_no_rare_set():
    p = make_prompts(GridTask(variant="single", max_walls=10, n_train=30, n_test=10))
    assert (p.correct.sum(1) == 1).all() and not p.rare.any()


def test_prompts_distinct_splits_disjoint_and_seeded():
    task = GridTask(n_train=50, n_test=50, seed=1)
    p = make_prompts(task)
    rows = {tuple(r) for r in p.tokens}
    assert len(rows) == p.n
    assert set(map(tuple, p.tokens[p.split("train")])).isdisjoint(
        map(tuple, p.tokens[p.split("test")])
    )
    np.testing.assert_array_equal(make_prompts(task).tokens, p.tokens)
    assert not np.array_equal(make_prompts(GridTask(n_train=50, n_test=50, seed=2)).tokens,
                              p.tokens)  # fmt: skip


def test_open_box_route_count_is_binomial():
    for a in range(8):
        assert len(_routes(a, 7 - a, frozenset())) == math.comb(7, a)


def test_answer_index_round_trip_and_turns_by_hand():
    i = np.arange(4**4)
    np.testing.assert_array_equal(answer_index(answer_tokens(i, 4)), i)
    assert answer_index([3, 0, 0]) == 3 * 16
    assert turns([0, 0, 3, 3, 0]) == 2 and turns([1, 1, 1]) == 0


def test_teacher_weights_follow_turns():
    task = GridTask(n_train=10, n_test=0, seed=4)
    p = make_prompts(task)
    q = teacher_probabilities(p, 1.5)
    np.testing.assert_allclose(q.sum(1), 1.0, rtol=1e-12)
    assert (q[~p.correct] == 0).all()
    t = turns(answer_tokens(np.arange(task.n_answers), task.L))
    i, j = np.flatnonzero(p.correct[0])[:2]
    np.testing.assert_allclose(q[0, i] / q[0, j], math.exp(-1.5 * (t[i] - t[j])), rtol=1e-12)


def test_rewards_look_up_the_verifier():
    p = make_prompts(GridTask(n_train=4, n_test=0, seed=9))
    moves = answer_tokens(np.arange(4**7).reshape(4, -1)[:, :64], 7)  # [4, 64, 7]
    r = p.rewards(np.arange(4), moves)
    assert r.shape == (4, 64)
    for g in range(4):
        for n in range(0, 64, 7):
            assert r[g, n] == route_is_correct(p.h[g], p.v[g], p.a[g], 7, p.walls[g], moves[g, n])


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(L=8), "L must be in [2, 7]"),
        (dict(variant="maze"), "variant must be"),
        (dict(n_train=0), "n_train must be >= 1"),
        (dict(rare_turns=7), "rare_turns must be in [1, L - 1 = 6]"),
        (dict(n_train=20_000, n_test=0), "n_train must be such that"),
        (dict(L=3, rare_turns=2, n_train=500, n_test=0), "n_train must be small enough"),
    ],
)
def test_refusals_are_one_line(kw, words):
    with pytest.raises(ValueError) as e:
        make_prompts(GridTask(**kw))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_sequence_package_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, fgrpo_theory as ft\n"
        "t = ft.sequence.make_prompts(ft.sequence.GridTask(n_train=2, n_test=1))\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
