"""The trainer-independent helpers of fgrpo_theory.integrations (NumPy; no trainer needed)."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.integrations.groups import (
    correct_from_scores,
    grouped_advantages,
    trainer_scheme,
)


def test_grouped_advantages_unequal_groups_any_order():
    rng = np.random.default_rng(1)
    sizes = [5, 1, 3, 8, 2]
    ids = np.concatenate([[f"u{i}"] * n for i, n in enumerate(sizes)])
    scores = (rng.random(ids.size) < 0.5).astype(float)
    perm = rng.permutation(ids.size)
    ids, scores = ids[perm], scores[perm]
    scheme, has_base = trainer_scheme("verl+focal:gamma=0.5")
    assert has_base
    out = grouped_advantages(scheme, scores, ids, scores == 1)
    for u in np.unique(ids):  # hand formula per group: verl's GRPO times (1 - X/n)^0.5
        m = ids == u
        r = scores[m]
        mean, std = (r.mean(), r.std(ddof=1)) if r.size > 1 else (0.0, 1.0)
        g = (1 - r.mean()) ** 0.5
        np.testing.assert_allclose(out[m], g * (r - mean) / (std + 1e-6), rtol=1e-12, atol=1e-15)


def test_correct_from_scores_and_scheme_refusals():
    assert correct_from_scores(np.array([1.0, -1.0, 1.0])).tolist() == [True, False, True]
    assert correct_from_scores(np.array([0.3, 0.7]), 0.5).tolist() == [False, True]
    with pytest.raises(ValueError, match="threshold") as e:
        correct_from_scores(np.array([1.0, 0.5]))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="one binary pair"):
        correct_from_scores(np.array([1.0, 0.0, -1.0]))
    assert trainer_scheme("focal:gamma=1")[1] is False
    with pytest.raises(ValueError, match="without entropy/kl"):
        trainer_scheme("grpo+entropy:coef=0.001")
    with pytest.raises(ValueError, match="^scheme must"):
        trainer_scheme("nosuchscheme")
