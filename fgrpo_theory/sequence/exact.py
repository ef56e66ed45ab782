"""Exact metrics of the sequence policy by walking the prefix tree of the answer space.

Every answer of every prompt is one of ``4**L`` move sequences. :func:`answer_logprobs` computes
the log-probability of all of them with the prompt's keys and values computed once and, at depth
``d``, one token fed per prefix node (``4**d`` nodes, each attending to the shared prompt cache and
its own ``d`` answer tokens): ``(4**L - 1) / 3`` tokens of compute per prompt instead of one
forward pass of ``P + L`` tokens per answer (:func:`answer_logprobs_bruteforce`, the reference
that tests and ``benchmarks/bench_sequence_exact.py`` compare with).

From these exact probabilities, per prompt (:func:`prompt_metrics`): the correct mass ``mu``, the
mass of the rare correct answers ``tau``, the entropy of the answer distribution (nats), and the
sum of ``-log p`` over the rare correct answers; over a split (:func:`split_metrics`) the same
columns as the population model (:mod:`fgrpo_theory.population.runner`): ``pass_at_k`` = mean_p
[1 - (1 - mu_p)^k] (exact: answers are drawn i.i.d.), ``coverage_at_k`` = mean over prompts with
rare answers of 1 - (1 - tau_p)^k, ``rare_nll`` = mean of -log p over the rare correct
(prompt, answer) pairs (appendix M's rare-solution NLL), ``entropy``.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validate import fail
from .task import Prompts

__all__ = [
    "answer_logprobs",
    "answer_logprobs_bruteforce",
    "prompt_metrics",
    "split_metrics",
    "PASS_K",
    "MAX_CACHE_ELEMENTS",
    "CHUNK_ELEMENTS",
]

#: The pass@k / coverage@k columns (k up to 1,024, as the population model).
PASS_K = (1, 4, 16, 64, 256, 1024)
#: Most cached key/value elements one prompt's tree walk may need (larger is refused).
MAX_CACHE_ELEMENTS = 200_000_000
#: Cached key/value elements the walk holds at once: prompts are processed in chunks below it.
CHUNK_ELEMENTS = 16_000_000


def _walk_chunk(model, tokens: torch.Tensor, L: int) -> torch.Tensor:
    n, P = tokens.shape
    logits, pc = model.prefill(tokens)
    lp = torch.log_softmax(logits, -1).to(torch.float64)  # [n, 4]: depth-1 prefixes
    moves = torch.arange(4, device=tokens.device)
    cur = moves.expand(n, 4)
    ans = None
    for d in range(1, L):
        logits, ans = model.extend(cur, P + d - 1, pc, ans)  # [n, 4**d, 4]
        lp = (lp[..., None] + torch.log_softmax(logits, -1).to(torch.float64)).reshape(n, -1)
        if d < L - 1:  # children of node j are 4j .. 4j+3
            ans = [(k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)) for k, v in ans]
            cur = moves.repeat(4**d).expand(n, -1)
    return lp


@torch.no_grad()
def answer_logprobs(model, tokens, L: int) -> torch.Tensor:
    """Log-probability [n, 4**L] (float64) of every answer to each prompt ``tokens`` [n, P].

    Answer ``i`` is :func:`fgrpo_theory.sequence.task.answer_tokens` ``(i, L)``. Prompts are
    processed in chunks that keep the cached keys and values under :data:`CHUNK_ELEMENTS`.
    """
    tokens = torch.as_tensor(tokens)
    if tokens.ndim != 2 or tokens.shape[0] == 0:
        fail("tokens", f"shape {tuple(tokens.shape)}", "a non-empty [prompts, length] array")
    cfg = model.config
    # the deepest level: 4**(L-1) nodes x (L-1) answer tokens of keys and values, and its copy
    per_prompt = 2 * 2 * cfg.n_layers * cfg.d_model * 4 ** (L - 1) * max(L - 1, 1)
    if per_prompt > MAX_CACHE_ELEMENTS:
        fail("L", L, f"small enough for the tree walk's cache ({per_prompt:,} elements/prompt)")
    if tokens.shape[1] + L - 1 > model.max_len:
        fail("L", L, f"<= {model.max_len - tokens.shape[1] + 1} for this model's positions")
    step = max(1, CHUNK_ELEMENTS // per_prompt)
    was = model.training
    model.eval()
    try:
        out = [_walk_chunk(model, tokens[i : i + step], L) for i in range(0, len(tokens), step)]
    finally:
        model.train(was)
    return torch.cat(out)


@torch.no_grad()
def answer_logprobs_bruteforce(model, tokens, L: int, batch: int = 4096) -> torch.Tensor:
    """The same as :func:`answer_logprobs` by one full forward pass per answer (the reference)."""
    from .task import answer_tokens

    tokens = torch.as_tensor(tokens)
    A = 4**L
    ans = torch.from_numpy(answer_tokens(np.arange(A), L))  # [A, L]
    was = model.training
    model.eval()
    out = torch.empty(len(tokens), A, dtype=torch.float64)
    try:
        for i, t in enumerate(tokens):
            for lo in range(0, A, batch):
                a = ans[lo : lo + batch]
                seq = torch.cat([t.expand(len(a), -1), a[:, :-1]], dim=1)
                lp = torch.log_softmax(model(seq)[:, tokens.shape[1] - 1 :], -1)
                out[i, lo : lo + batch] = lp.gather(-1, a[..., None]).squeeze(-1).sum(-1).double()
    finally:
        model.train(was)
    return out


def prompt_metrics(logp: torch.Tensor, prompts: Prompts, ids) -> dict[str, np.ndarray]:
    """Per prompt ``ids``: ``mu``, ``tau`` (rare correct mass), ``entropy`` (nats),
    ``nll_rare_sum`` (sum of -log p over the rare correct answers) and ``n_rare``."""
    ids = np.asarray(ids)
    lp = logp.detach().to(torch.float64)
    p = lp.exp()
    correct = torch.from_numpy(prompts.correct[ids])
    rare = torch.from_numpy(prompts.rare[ids])
    ent = -torch.where(p > 0, p * lp, torch.zeros_like(p)).sum(-1)
    nll = torch.where(rare, -lp, torch.zeros_like(lp)).sum(-1)
    return {
        "mu": (p * correct).sum(-1).clamp(0.0, 1.0).numpy(),
        "tau": (p * rare).sum(-1).clamp(0.0, 1.0).numpy(),
        "entropy": ent.numpy(),
        "nll_rare_sum": nll.numpy(),
        "n_rare": rare.sum(-1).numpy(),
    }


def split_metrics(m: dict[str, np.ndarray], pass_k=PASS_K) -> dict[str, float]:
    """Dataset means of per-prompt metrics ``m`` (:func:`prompt_metrics`), population columns."""
    mu, tau = m["mu"], m["tau"]
    has = m["n_rare"] > 0
    out: dict[str, float] = {"n_prompts": len(mu)}
    for k in pass_k:
        out[f"pass_at_{k}"] = float(np.mean(-np.expm1(k * np.log1p(-mu))))
    for k in pass_k:
        cov = -np.expm1(k * np.log1p(-tau[has])) if has.any() else None
        out[f"coverage_at_{k}"] = float(np.mean(cov)) if cov is not None else float("nan")
    n = m["n_rare"].sum()
    out["rare_nll"] = float(m["nll_rare_sum"].sum() / n) if n > 0 else float("nan")
    out["entropy"] = float(np.mean(m["entropy"]))
    out["mu"] = float(np.mean(mu))
    out["tau"] = float(np.mean(tau[has])) if has.any() else float("nan")
    return out
