"""The RL loop of the sequence rung: group sampling, any scheme, the log-prob surrogate.

One step: draw ``B`` distinct train prompts (NumPy generator), sample ``N`` answers to each at
temperature 1 from the current policy (inverse-CDF draws from a seeded ``torch.Generator``, the
prompt computed once for its ``N`` rollouts, which then decode against a key/value buffer),
score them with the verifier (reward 1
correct, 0 incorrect), turn each group's rewards into advantages with the scheme
(:func:`scheme_advantages`), and take ``inner_updates`` optimizer steps on the surrogate,
whose log-probabilities come from one pass over packed groups (each prompt once, then its ``N``
answers: :meth:`~fgrpo_theory.sequence.model.TinyDecoder.rollout_logits`):

- ``inner_updates = 1``: the log-prob surrogate sum_i A_i log pi(a_i) (theory.md sections 6, 15);
- ``inner_updates > 1``: PPO's clipped surrogate min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)
  per token, r = pi / pi_old against the sampling policy (equal to the above at the first update).

Aggregation (:data:`AGGREGATIONS`): ``token-mean`` divides the sum over all answer tokens of the
batch by their number (DAPO/TRL style); ``sequence-sum`` sums each answer's tokens and divides by
the number of answers, the (1/N) sum_i A_i log pi(a_i) of theory.md section 15. Every answer of
this task has ``L`` tokens, so here the two differ by the constant factor ``L`` (which matters to
SGD's step size, not to Adam's); section 15's length weighting needs answers of varying length.

Regularizers of the registry (``+entropy:coef=c``, ``+kl:coef=c[,estimator=k3]``) are per-token
terms aggregated like the surrogate (:func:`regularizer_loss`): at every answer position ``t`` of
every rollout, the exact entropy ``H_t`` of the policy's next-move softmax (added with ``c``), the
exact ``KL(pi_t || pi_ref_t)`` over the four moves, or the k3 estimate
``rho - log rho - 1``, ``rho = pi_ref(a_t) / pi(a_t)`` at the sampled move (subtracted with
``c``); ``pi_ref`` is the model at the start of RL (``rl_step(..., ref_model=...)``). These are
the terms :mod:`fgrpo_theory.schemes.regularizers` defines on a softmax; the tests check values
and logit gradients against its NumPy functions. Likelihood-aware advantage schemes
(``unlikeliness``, ``ds``) get each rollout's *sequence* log-probability under the sampling
policy (the authors' per-token mean is that divided by ``L``, the same for every answer here).

docs/sequence.md ("The RL engine and TRL") maps these options onto ``trl.GRPOTrainer``'s.
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
    "aggregate",
    "token_logits",
    "regularizer_loss",
    "rl_loss",
    "rl_step",
    "make_optimizer",
    "SAMPLE_BUFFER_BYTES",
]

AGGREGATIONS = ("token-mean", "sequence-sum")
OPTIMIZERS = ("adamw", "sgd")
#: Largest number of rollouts (B x N) per step.
MAX_ROLLOUTS = 65_536


def check_scheme(spec: str) -> str:
    """The canonical spec of a scheme of :mod:`fgrpo_theory.schemes` (any advantage term, an
    optional focal weight, optional ``entropy`` and ``kl`` regularizers)."""
    from ..schemes import parse_scheme

    return parse_scheme(spec).spec


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


#: Bytes of key/value buffers :func:`sample_answers` allocates at once (it decodes the rollouts
#: in chunks of rows that fit).
SAMPLE_BUFFER_BYTES = 256 * 2**20


def sample_answers(
    model: TinyDecoder, prompt_tokens: torch.Tensor, N: int, L: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``N`` answers [G, N, L] to each prompt [G, P] at temperature 1, and their sequence
    log-probabilities [G, N] (float64) under the sampling policy.

    Each move is an inverse-CDF draw: the first move ``k`` whose cumulative probability exceeds a
    uniform from ``generator`` (float64; ``L`` draws of [G, N], move by move), so a seed gives
    the same answers. The prompts are computed once (:meth:`TinyDecoder.prompt_cache`); each rollout
    then decodes one token per move against a key/value buffer holding its prompt's keys and
    values (:meth:`TinyDecoder.decode`), in chunks of rollouts of at most
    :data:`SAMPLE_BUFFER_BYTES` of buffers (fixed by the sizes, so a run is reproducible; another
    chunk size changes the numbers in the last bits, as another matrix kernel does). Runs
    under ``torch.inference_mode`` (less per-operation bookkeeping than ``no_grad``; the same
    numbers); the results are returned as ordinary tensors.
    """
    with torch.inference_mode():
        moves, lp = _sample(model, prompt_tokens, N, L, generator)
    return moves.clone(), lp.clone()


def _sample(model, prompt_tokens, N, L, generator):
    # No train/eval switch: the model has no mode-dependent layer (no dropout), and toggling
    # its ~30 modules cost a measurable share of one step.
    G, P = prompt_tokens.shape
    n = G * N
    u = torch.rand(L, n, generator=generator, dtype=torch.float64)  # = L draws of [G, N]
    first, pc = model.prompt_cache(prompt_tokens)
    width = P + L - 1
    row_bytes = 2 * sum(k.shape[1] * width * k.shape[3] * k.element_size() for k, _ in pc)
    chunk = max(1, SAMPLE_BUFFER_BYTES // max(row_bytes, 1))
    moves = torch.empty(n, L, dtype=torch.long)
    lp = torch.zeros(n, dtype=torch.float64)
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        group = torch.arange(lo, hi) // N
        cache = model.decode_cache(pc, group, width)
        logits = first.index_select(0, group)
        mv, acc = moves[lo:hi], lp[lo:hi]
        for t in range(L):
            logq = torch.log_softmax(logits, -1, dtype=torch.float64)
            cum = logq.exp().cumsum(-1)
            tok = (cum[:, :3] <= u[t, lo:hi, None]).sum(-1)
            mv[:, t] = tok
            acc += logq.gather(-1, tok[:, None]).squeeze(-1)
            if t < L - 1:
                logits = model.decode(tok, P + t, cache)
    return moves.reshape(G, N, L), lp.reshape(G, N)


def token_logits(model: TinyDecoder, prompt_tokens: torch.Tensor, moves: torch.Tensor):
    """Move logits [G, N, L, 4] at every answer position of ``moves`` [G, N, L] after the
    prompts [G, P] (differentiable), by one pass over the packed groups: each prompt once, then
    its ``N`` answers (:meth:`TinyDecoder.rollout_logits`)."""
    return model.rollout_logits(prompt_tokens, moves)


def _gather(logq: torch.Tensor, moves: torch.Tensor) -> torch.Tensor:
    return logq.gather(-1, moves[..., None]).squeeze(-1)


def token_logprobs(model: TinyDecoder, prompt_tokens: torch.Tensor, moves: torch.Tensor):
    """log pi of each answer token [G, N, L] (differentiable), by one causal forward pass."""
    return _gather(torch.log_softmax(token_logits(model, prompt_tokens, moves), -1), moves)


def aggregate(x: torch.Tensor, aggregation: str) -> torch.Tensor:
    """Per-token values [G, N, L] to one number: ``token-mean`` (sum over their number) or
    ``sequence-sum`` (sum over the number of answers G x N)."""
    if aggregation == "token-mean":
        return x.sum() / x.numel()
    if aggregation == "sequence-sum":
        return x.sum() / (x.shape[0] * x.shape[1])
    fail("aggregation", aggregation, "one of " + ", ".join(AGGREGATIONS))


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
    return -aggregate(obj, cfg.aggregation)


def regularizer_loss(
    logits: torch.Tensor,
    moves: torch.Tensor,
    scheme,
    aggregation: str,
    ref_logits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The regularizers' part of the loss, and their aggregated values (module doc).

    ``logits`` [G, N, L, 4] of the policy at the rollouts' answer positions, ``moves`` [G, N, L],
    ``scheme`` a spec or :class:`~fgrpo_theory.schemes.Scheme`, ``ref_logits`` the reference
    policy's (required by ``kl``). The loss is ``- c_H agg(H_t) + c_KL agg(KL_t)`` with
    ``KL_t`` exact over the four moves or k3 at the sampled move; 0 without regularizers.
    """
    from ..schemes import parse_scheme

    s = parse_scheme(scheme)
    loss = logits.new_zeros(())
    parts: dict[str, float] = {}
    if not s.regularizers:
        return loss, parts
    logq = torch.log_softmax(logits, -1)
    ent = s.regularizer("entropy")
    if ent is not None:
        H = -(logq.exp() * logq).sum(-1)  # exact entropy of each next-move softmax
        h = aggregate(H, aggregation)
        loss = loss - ent["coef"] * h
        parts["entropy"] = float(h.detach())
    kl = s.regularizer("kl")
    if kl is not None:
        if ref_logits is None:
            fail("ref_model", None, "the reference policy of the scheme's kl term")
        logr = torch.log_softmax(ref_logits.detach().to(logits.dtype), -1)
        if kl["estimator"] == "k3":
            d = _gather(logr, moves) - _gather(logq, moves)  # log rho
            K = torch.expm1(d) - d
        else:
            K = (logq.exp() * (logq - logr)).sum(-1)
        k = aggregate(K, aggregation)
        loss = loss + kl["coef"] * k
        parts["kl"] = float(k.detach())
    return loss, parts


def rl_loss(
    model: TinyDecoder,
    prompt_tokens: torch.Tensor,
    moves: torch.Tensor,
    adv: torch.Tensor,
    cfg: RLConfig,
    old: torch.Tensor | None = None,
    ref_logits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """The whole loss of one update: the surrogate (:func:`surrogate_loss`) plus the scheme's
    regularizers (:func:`regularizer_loss`); also the token log-probs [G, N, L] and the
    regularizers' values. With ``inner_updates > 1`` and no ``old``, the ratio is taken to the
    current policy (the first update: r = 1, TRL's ``old_per_token_logps = per_token_logps``)."""
    logits = token_logits(model, prompt_tokens, moves)
    lp_tok = _gather(torch.log_softmax(logits, -1), moves)
    if old is None and cfg.inner_updates > 1:
        old = lp_tok.detach()
    loss = surrogate_loss(lp_tok, adv, cfg, old)
    reg, parts = regularizer_loss(logits, moves, cfg.scheme, cfg.aggregation, ref_logits)
    return loss + reg, lp_tok, parts


def make_optimizer(model: TinyDecoder, cfg: RLConfig) -> torch.optim.Optimizer:
    """SGD (the multi-tensor implementation, the same numbers as the per-tensor loop) or AdamW
    (torch's fused kernel: one call for all parameters, 5-6x faster on this model's ~30 small
    tensors than the per-tensor loop; its numbers differ from the loop's in the last bits)."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True
        )
    return torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True
    )


def rl_step(
    model: TinyDecoder,
    opt: torch.optim.Optimizer,
    prompts: Prompts,
    ids: np.ndarray,
    cfg: RLConfig,
    generator: torch.Generator,
    before_update: Callable[[torch.Tensor, np.ndarray, torch.Tensor], None] | None = None,
    ref_model: TinyDecoder | None = None,
) -> dict[str, np.ndarray]:
    """One RL step on the prompts ``ids`` (module doc); the groups' correct counts ``X`` [B],
    rollouts in the rare set ``rare_hits`` [B], rewards [B, N] and the loss of the first update
    ``loss`` (with ``entropy`` / ``kl``, the regularizers' aggregated values, when the scheme
    has them). ``ref_model``: the reference policy of a ``kl`` term (the model at RL start)."""
    from ..schemes import parse_scheme

    L = prompts.task.L
    ptok = torch.from_numpy(prompts.tokens[ids])
    moves, lp_seq = sample_answers(model, ptok, cfg.N, L, generator)
    mv = moves.numpy()
    rewards = prompts.rewards(ids, mv)
    from .task import answer_index

    idx = answer_index(mv)
    rare_hits = prompts.rare[np.asarray(ids)[:, None], idx].sum(axis=1)
    # in NumPy (the registry's own namespace: a third of the time of the same functions on
    # 8 x 8 torch tensors; the same values up to the last bits of float64)
    adv = scheme_advantages(cfg.scheme, rewards, logprobs=lp_seq.numpy())
    adv = torch.from_numpy(np.ascontiguousarray(adv, dtype=np.float64))
    if before_update is not None:
        before_update(moves, rewards, adv)
    ref_logits = None
    if parse_scheme(cfg.scheme).regularizer("kl") is not None:
        if ref_model is None:
            fail("ref_model", None, f"the reference policy of scheme {cfg.scheme!r} (its kl term)")
        with torch.no_grad():
            ref_logits = token_logits(ref_model, ptok, moves)
    old = None
    first: dict[str, float] = {}
    for it in range(cfg.inner_updates):
        loss, lp_tok, parts = rl_loss(model, ptok, moves, adv, cfg, old, ref_logits)
        if cfg.inner_updates > 1 and it == 0:
            old = lp_tok.detach()
        if not torch.isfinite(loss):
            fail("lr", cfg.lr, "small enough that the policy stays finite (diverged)")
        if it == 0:
            first = {"loss": float(loss.detach()), **parts}
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    out = {"X": rewards.sum(axis=1).astype(np.int64), "rare_hits": rare_hits, "rewards": rewards}
    return {**out, **{k: np.float64(v) for k, v in first.items()}}
