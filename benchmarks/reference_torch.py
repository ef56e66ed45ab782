"""Idiomatic PyTorch (CPU) implementation of the paper's categorical simulation: a reference.

The loop a PyTorch user would write for appendix J of the paper: a logits tensor with
``requires_grad``, ``torch.softmax``, ``torch.multinomial`` for the group, the linear surrogate
``(1/N) sum_i g A_i p(a_i)`` with mean-centred advantages (``A_i = R_i - mean R``, rewards +1/-1),
``loss.backward()`` and ``torch.optim.AdamW`` (or SGD). float64 so that it can be compared number
for number with :mod:`reference_numpy` when both are fed the same samples.

Importing this module requires ``torch``; benchmark scripts check :data:`AVAILABLE` first.
"""

from __future__ import annotations

import importlib.util

import numpy as np

__all__ = ["AVAILABLE", "run_linear", "run_tabular_logprob"]

#: Whether ``torch`` can be imported.
AVAILABLE = importlib.util.find_spec("torch") is not None


def run_linear(
    logits: np.ndarray,
    correct: np.ndarray,
    N: int,
    steps: int,
    lr: float,
    gamma: float = 0.0,
    optimizer: str = "adamw",
    weight_decay: float = 0.0,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    seed: int = 0,
    actions_fn=None,
    dtype: str = "float64",
) -> np.ndarray:
    """Linear-surrogate GRPO with mean-centred advantages for one seed; returns the final logits.

    ``actions_fn(t, p) -> int array of N sampled actions`` replaces ``torch.multinomial`` when
    given (tests drive it with the same samples as the NumPy reference). ``dtype="float32"`` is
    PyTorch's usual precision (faster; the simulator computes in float64).
    """
    import torch

    tdtype = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(seed)
    z = torch.tensor(np.asarray(logits, dtype=np.float64), dtype=tdtype, requires_grad=True)
    reward = torch.where(
        torch.as_tensor(np.asarray(correct, dtype=bool)),
        torch.tensor(r_correct, dtype=tdtype),
        torch.tensor(r_incorrect, dtype=tdtype),
    )
    if optimizer == "sgd":
        opt = torch.optim.SGD([z], lr=lr)
    else:
        opt = torch.optim.AdamW([z], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    for t in range(1, steps + 1):
        p = torch.softmax(z, dim=0)
        with torch.no_grad():
            if actions_fn is None:
                actions = torch.multinomial(p, N, replacement=True, generator=gen)
            else:
                actions = torch.as_tensor(actions_fn(t, p.detach().numpy()), dtype=torch.long)
            r = reward[actions]
            adv = r - r.mean()
            mu_hat = (r == r_correct).to(tdtype).mean()
            g = (1.0 - mu_hat) ** gamma
        loss = -(g * adv * p[actions]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return z.detach().double().numpy().copy()


def run_tabular_logprob(
    logits: np.ndarray,
    correct: np.ndarray,
    N: int,
    steps: int,
    seeds: int,
    lr: float,
    gamma: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    """Log-prob GRPO (population std, SGD) on a small tabular prompt, batched over seeds.

    Returns the final logits ``[seeds, K]``.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    corr = torch.as_tensor(np.asarray(correct, dtype=bool))
    z = torch.tensor(np.tile(np.asarray(logits, dtype=np.float64), (seeds, 1)), requires_grad=True)
    opt = torch.optim.SGD([z], lr=lr)
    for _ in range(steps):
        logp = torch.log_softmax(z, dim=1)
        with torch.no_grad():
            actions = torch.multinomial(logp.exp(), N, replacement=True, generator=gen)
            r = corr[actions].double()
            mean = r.mean(dim=1, keepdim=True)
            std = r.std(dim=1, unbiased=False, keepdim=True)
            adv = torch.where(std > 0, (r - mean) / std, torch.zeros_like(r))
            adv = adv * (1.0 - mean) ** gamma
        loss = -(adv * logp.gather(1, actions)).mean(dim=1).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return z.detach().numpy().copy()
