"""The advantage conventions and the focal weight on NumPy and on torch (issue 13 part 3).

Oracle: the NumPy path, itself tested against hand computations in test_advantages.py. Torch
tensors must come back as torch tensors of the same dtype, equal to the NumPy result.
"""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.advantages import PRESETS, focal_advantages, focal_weight, group_advantages

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(13)
BINARY = RNG.integers(0, 2, size=(64, 8)).astype(float) * 2 - 1  # rewards +1/-1, [groups, N]
BINARY[0] = 1.0  # a flat group
BINARY[1] = -1.0
GENERAL = np.round(RNG.normal(size=(32, 5)), 3)


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("rewards", [BINARY, GENERAL], ids=["binary", "general"])
def test_group_advantages_torch_equals_numpy(name, rewards):
    ref = group_advantages(rewards, name)
    out = group_advantages(torch.from_numpy(rewards), name)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", ["grpo", "trl", "trl-batch", "verl-vectorized", "dr-grpo", "rloo"])
@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 2.0])
def test_focal_advantages_torch_equals_numpy(name, gamma):
    ref = focal_advantages(BINARY, gamma, name)
    out = focal_advantages(torch.from_numpy(BINARY), gamma, name)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13, atol=1e-14)
    mask = BINARY > 0
    ref_m = focal_advantages(BINARY[:32, :4], gamma, name, mask[:32, :4])
    out_m = focal_advantages(
        torch.from_numpy(BINARY[:32, :4].copy()), gamma, name, torch.from_numpy(mask[:32, :4])
    )
    np.testing.assert_allclose(out_m.numpy(), ref_m, rtol=1e-13, atol=1e-14)


def test_float32_tensors_stay_float32():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]], dtype=torch.float32)
    out = focal_advantages(r, 1.0, "trl", r_incorrect=0.0)
    assert out.dtype == torch.float32
    ref = focal_advantages(r.double().numpy(), 1.0, "trl", r_incorrect=0.0)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


def test_focal_weight_torch_and_gamma_tensor():
    mu = torch.tensor([0.0, 0.25, 1.0], dtype=torch.float64)
    out = focal_weight(mu, torch.tensor(2.0, dtype=torch.float64))
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), focal_weight(mu.numpy(), 2.0))
    np.testing.assert_array_equal(focal_weight(mu, 0.0).numpy(), [1.0, 1.0, 1.0])


def test_torch_errors_are_the_same_one_liners():
    with pytest.raises(ValueError, match="^rewards must be a finite number; got nan$"):
        group_advantages(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match=r"^rewards must be r_correct = 1.0 or r_incorrect"):
        focal_advantages(torch.tensor([[0.0, -1.0]]), 1.0)
    with pytest.raises(ValueError, match=r"^rewards must be real \(not complex\)"):
        group_advantages(torch.tensor([1.0 + 1j, 0.0]))
    with pytest.raises(ValueError, match="^correct must be a boolean array"):
        focal_advantages(torch.tensor([[1.0, -1.0]]), 1.0, correct=torch.tensor([[1, 0]]))
