"""The RL loop of the sequence rung: group sampling, any scheme, the log-prob surrogate.

One step: draw ``B`` distinct train prompts (NumPy generator), sample ``N`` answers to each at
temperature 1 from the current policy (inverse-CDF draws from a seeded ``torch.Generator``, the
prompt's keys and values shared by its ``N`` rollouts), score them with the verifier (reward 1
correct, 0 incorrect), turn each group's rewards into advantages with the scheme
(:func:`scheme_advantages`), and take ``inner_updates`` optimizer steps on the surrogate:

- ``inner_updates = 1``: the log-prob surrogate sum_i A_i log pi(a_i) (theory.md sections 6, 15);
- ``inner_updates > 1``: PPO's clipped surrogate min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)
  per token, r = pi / pi_old against the sampling policy (equal to the above at the first update).

Aggregation (:data:`AGGREGATIONS`): ``token-mean`` divides the sum over all answer tokens of the
batch by their number (DAPO/TRL style); ``sequence-sum`` sums each answer's tokens and divides by
the number of answers, the (1/N) sum_i A_i log pi(a_i) of theory.md section 15. Every answer of
this task has ``L`` tokens, so here the two differ by the constant factor ``L`` (which matters to
SGD's step size, not to Adam's); section 15's length weighting needs answers of varying length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .._validate import fail
from .model import TinyDecoder
from .task import Prompts

__all__ = [
    "RLConfig",
    "AGGREGATIONS",
    "OPTIMIZERS",
    "check_scheme",
    "scheme_advantages",
    "sample_answers",
    "token_logprobs",
    "surrogate_loss",
    "rl_step",
    "make_optimizer",
]

AGGREGATIONS = ("token-mean", "sequence-sum")
OPTIMIZERS = ("adamw", "sgd")
#: Largest number of rollouts (B x N) per step.
MAX_ROLLOUTS = 65_536


def check_scheme(spec: str) -> str:
    """The canonical spec of a scheme of :mod:`fgrpo_theory.schemes` this loop can train with
    (an advantage scheme with an optional focal weight; regularizers are not in this loop yet)."""
    from ..schemes import parse_scheme

    s = parse_scheme(spec)
    if s.regularizers:
        names = ", ".join(t.name for t in s.regularizers)
        fail("scheme", spec, f"without regularizers ({names}): the sequence loop has none yet")
    return s.spec


def scheme_advantages(spec: str, rewards: torch.Tensor, logprobs=None) -> torch.Tensor:
    """Advantages [G, N] of 0/1 ``rewards`` [G, N] under the scheme ``spec``:
    ``parse_scheme(spec).advantages`` of :mod:`fgrpo_theory.schemes` (the same functions the
    trainer integrations call; correct = reward 1), ``logprobs`` the rollouts' sequence
    log-probabilities under the sampling policy (likelihood-aware schemes)."""
    from ..schemes import parse_scheme

    return parse_scheme(spec).advantages(rewards, logprobs=logprobs)


@dataclass(frozen=True)
class RLConfig:
    """The RL run: ``B`` prompts x ``N`` rollouts per step for ``steps`` steps, the ``scheme``,
    the loss ``aggregation``, the ``optimizer`` (``lr``, ``weight_decay``), ``inner_updates``
    with PPO clipping (``clip_low``, ``clip_high``), exact evaluation every ``log_every`` steps
    on at most ``eval_prompts`` prompts per split, and the ``seed`` of prompts and rollouts."""

    B: int = 8
    N: int = 8
    steps: int = 40
    scheme: str = "grpo"
    aggregation: str = "token-mean"
    optimizer: str = "adamw"
    lr: float = 3e-4
    weight_decay: float = 0.0
    inner_updates: int = 1
    clip_low: float = 0.2
    clip_high: float = 0.2
    log_every: int = 20
    eval_prompts: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("B", "N", "steps", "inner_updates", "log_every", "eval_prompts", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                fail(name, v, "an integer")
        if self.B < 1:
            fail("B", self.B, ">= 1")
        if self.N < 2:
            fail("N", self.N, ">= 2")
        if self.B * self.N > MAX_ROLLOUTS:
            fail("N", self.N, f"such that B x N <= {MAX_ROLLOUTS:,} (B = {self.B})")
        if not 0 <= self.steps <= 1_000_000:
            fail("steps", self.steps, "in [0, 1000000]")
        if not 1 <= self.inner_updates <= 64:
            fail("inner_updates", self.inner_updates, "in [1, 64]")
        if self.log_every < 1:
            fail("log_every", self.log_every, ">= 1")
        if self.eval_prompts < 1:
            fail("eval_prompts", self.eval_prompts, ">= 1")
        if self.seed < 0:
            fail("seed", self.seed, ">= 0")
        if self.aggregation not in AGGREGATIONS:
            fail("aggregation", self.aggregation, "one of " + ", ".join(AGGREGATIONS))
        if self.optimizer not in OPTIMIZERS:
            fail("optimizer", self.optimizer, "one of " + ", ".join(OPTIMIZERS))
        for name in ("lr", "weight_decay", "clip_low", "clip_high"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v < 0:
                fail(name, v, "a finite number >= 0")
        if self.clip_low >= 1:
            fail("clip_low", self.clip_low, "< 1")
        object.__setattr__(self, "scheme", check_scheme(self.scheme))

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def sample_answers(
    model: TinyDecoder, prompt_tokens: torch.Tensor, N: int, L: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``N`` answers [G, N, L] to each prompt [G, P] at temperature 1, and their sequence
    log-probabilities [G, N] (float64) under the sampling policy.

    Each move is an inverse-CDF draw: the first move ``k`` whose cumulative probability exceeds a
    uniform from ``generator`` (float64), so a seed gives the same answers.
    """
    G, P = prompt_tokens.shape
    was = model.training
    model.eval()
    try:
        logits, pc = model.prefill(prompt_tokens)
        logits = logits[:, None, :].expand(G, N, 4)
        ans = None
        moves = torch.empty(G, N, L, dtype=torch.long)
        lp = torch.zeros(G, N, dtype=torch.float64)
        for t in range(L):
            logq = torch.log_softmax(logits.to(torch.float64), -1)
            cum = logq.exp().cumsum(-1)
            u = torch.rand(G, N, generator=generator, dtype=torch.float64)
            tok = (cum[..., :3] <= u[..., None]).sum(-1)
            moves[..., t] = tok
            lp += logq.gather(-1, tok[..., None]).squeeze(-1)
            if t < L - 1:
                logits, ans = model.extend(tok, P + t, pc, ans)
    finally:
        model.train(was)
    return moves, lp


def token_logprobs(model: TinyDecoder, prompt_tokens: torch.Tensor, moves: torch.Tensor):
    """log pi of each answer token [G, N, L] (differentiable), by one causal forward pass."""
    G, N, L = moves.shape
    flat = moves.reshape(G * N, L)
    seq = torch.cat([prompt_tokens.repeat_interleave(N, 0), flat[:, :-1]], dim=1)
    logits = model(seq)[:, prompt_tokens.shape[1] - 1 :]
    lp = torch.log_softmax(logits, -1).gather(-1, flat[..., None]).squeeze(-1)
    return lp.reshape(G, N, L)


def surrogate_loss(
    lp_tok: torch.Tensor, adv: torch.Tensor, cfg: RLConfig, old: torch.Tensor | None = None
) -> torch.Tensor:
    """The loss (minus the surrogate) of token log-probs [G, N, L] and advantages [G, N]:
    A log pi per token, or PPO's clipped ratio objective when ``old`` (log pi_old) is given."""
    a = adv.to(lp_tok.dtype)[..., None]
    if old is None:
        obj = a * lp_tok
    else:
        r = torch.exp(lp_tok - old)
        obj = torch.minimum(r * a, r.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high) * a)
    if cfg.aggregation == "token-mean":
        return -obj.sum() / obj.numel()
    return -obj.sum() / (obj.shape[0] * obj.shape[1])


def make_optimizer(model: TinyDecoder, cfg: RLConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def rl_step(
    model: TinyDecoder,
    opt: torch.optim.Optimizer,
    prompts: Prompts,
    ids: np.ndarray,
    cfg: RLConfig,
    generator: torch.Generator,
    before_update: Callable[[torch.Tensor, np.ndarray, torch.Tensor], None] | None = None,
) -> dict[str, np.ndarray]:
    """One RL step on the prompts ``ids`` (module doc); the groups' correct counts ``X`` [B],
    rollouts in the rare set ``rare_hits`` [B] and rewards [B, N]."""
    L = prompts.task.L
    ptok = torch.from_numpy(prompts.tokens[ids])
    moves, lp_seq = sample_answers(model, ptok, cfg.N, L, generator)
    mv = moves.numpy()
    rewards = prompts.rewards(ids, mv)
    from .task import answer_index

    idx = answer_index(mv)
    rare_hits = prompts.rare[np.asarray(ids)[:, None], idx].sum(axis=1)
    adv = scheme_advantages(cfg.scheme, torch.from_numpy(rewards), logprobs=lp_seq)
    if before_update is not None:
        before_update(moves, rewards, adv)
    old = None
    for it in range(cfg.inner_updates):
        lp_tok = token_logprobs(model, ptok, moves)
        if cfg.inner_updates > 1 and it == 0:
            old = lp_tok.detach()
        loss = surrogate_loss(lp_tok, adv, cfg, old)
        if not torch.isfinite(loss):
            fail("lr", cfg.lr, "small enough that the policy stays finite (diverged)")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {"X": rewards.sum(axis=1).astype(np.int64), "rare_hits": rare_hits, "rewards": rewards}
