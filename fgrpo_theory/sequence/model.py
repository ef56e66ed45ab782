"""A small decoder-only transformer over prompt + answer tokens (plain PyTorch).

Pre-LayerNorm blocks (causal multi-head self-attention, a GELU MLP), learned token and position
embeddings, and an output head over the four moves only: the policy's next-token distribution
at every answer position is a softmax over {U, D, L, R}, so an answer of ``L`` moves is one of
exactly ``4**L`` sequences and its probability is the product of ``L`` such softmaxes.

Two ways to run it, equal up to float rounding (``tests/test_sequence_exact.py`` checks it):
:meth:`TinyDecoder.forward` (whole sequences, a causal mask) and the cached path
:meth:`TinyDecoder.prefill` + :meth:`TinyDecoder.extend`, where many continuations of one prompt
share the prompt's keys and values and each carries only the keys and values of its own answer
tokens: that is what lets the exact evaluation walk the prefix tree of the answer space at one
token of compute per node, and the sampler draw ``N`` rollouts per prompt.

Weights are drawn from a ``torch.Generator`` seeded with ``seed`` (nothing global), so a seed
gives the same weights whatever else the process did.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .._validate import fail

__all__ = ["ModelConfig", "TinyDecoder", "build_model"]

#: Largest parameter count a model may have (refused before allocation).
MAX_PARAMS = 50_000_000


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the transformer: ``d_model`` (64-128 in the presets), ``n_layers``, ``n_heads``,
    MLP width ``d_ff`` (0: 4 x d_model) and the weight ``seed``."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "d_ff", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                fail(name, v, "an integer")
        if not 8 <= self.d_model <= 1024:
            fail("d_model", self.d_model, "in [8, 1024]")
        if not 1 <= self.n_layers <= 12:
            fail("n_layers", self.n_layers, "in [1, 12]")
        if self.n_heads < 1 or self.d_model % self.n_heads:
            fail("n_heads", self.n_heads, f">= 1 and a divisor of d_model = {self.d_model}")
        if self.d_ff < 0:
            fail("d_ff", self.d_ff, ">= 0")
        if self.seed < 0:
            fail("seed", self.seed, ">= 0")

    @property
    def ff(self) -> int:
        return self.d_ff or 4 * self.d_model

    def n_params(self, vocab: int, max_len: int) -> int:
        d, f = self.d_model, self.ff
        block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
        return vocab * d + max_len * d + self.n_layers * block + 2 * d + 4 * d + 4

    def to_dict(self) -> dict:
        return asdict(self)


class _Block(nn.Module):
    def __init__(self, d: int, h: int, f: int) -> None:
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, f)
        self.fc2 = nn.Linear(f, d)

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v [..., H, dh] of x [..., d]."""
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        shape = (*x.shape[:-1], self.h, x.shape[-1] // self.h)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    def full(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Causal self-attention over x [B, T, d]; also the keys and values [B, H, T, dh]."""
        q, k, v = (t.transpose(1, 2) for t in self._split(x))  # [B, H, T, dh]
        T = x.shape[1]
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
        return self._mlp(x + self.proj(o)), (k, v)

    def extend(
        self,
        x: torch.Tensor,
        prompt_kv: tuple[torch.Tensor, torch.Tensor],
        ans_kv: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """One new token per continuation: x [n, M, d]; prompt keys/values [n, H, P, dh] shared
        by the M continuations of a prompt; answer keys/values [n, M, H, t, dh] (or None)."""
        q, k, v = self._split(x)  # [n, M, H, dh]
        k, v = k.unsqueeze(3), v.unsqueeze(3)
        if ans_kv is not None:
            k = torch.cat([ans_kv[0], k], dim=3)
            v = torch.cat([ans_kv[1], v], dim=3)
        scale = 1.0 / math.sqrt(q.shape[-1])
        sp = torch.einsum("nmhd,nhpd->nmhp", q, prompt_kv[0]) * scale
        sa = torch.einsum("nmhd,nmhtd->nmht", q, k) * scale
        w = torch.cat([sp, sa], dim=-1).softmax(-1)
        P = sp.shape[-1]
        o = torch.einsum("nmhp,nhpd->nmhd", w[..., :P], prompt_kv[1])
        o = o + torch.einsum("nmht,nmhtd->nmhd", w[..., P:], v)
        return self._mlp(x + self.proj(o.reshape(x.shape))), (k, v)


class TinyDecoder(nn.Module):
    """Decoder-only transformer: tokens [B, T] -> move logits [B, T, 4] (see the module doc)."""

    def __init__(self, config: ModelConfig, vocab: int, max_len: int) -> None:
        super().__init__()
        self.config = config
        self.vocab = vocab
        self.max_len = max_len
        d = config.d_model
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(
            _Block(d, config.n_heads, config.ff) for _ in range(config.n_layers)
        )
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, 4)
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        g = torch.Generator().manual_seed(self.config.seed)
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif ".ln" in name or name.startswith("ln_"):
                p.fill_(1.0)
            else:
                std = (
                    0.02 / math.sqrt(2 * self.config.n_layers)
                    if "fc2" in name or ("proj" in name)
                    else 0.02
                )
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Move logits [B, T, 4] after every position of ``tokens`` [B, T] (causal)."""
        T = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(T, device=tokens.device))
        for b in self.blocks:
            x, _ = b.full(x)
        return self.head(self.ln_f(x))

    def prefill(self, prompts: torch.Tensor) -> tuple[torch.Tensor, list]:
        """Logits of the first move [n, 4] and the prompts' keys/values per layer."""
        T = prompts.shape[1]
        x = self.tok(prompts) + self.pos(torch.arange(T, device=prompts.device))
        cache = []
        for b in self.blocks:
            x, kv = b.full(x)
            cache.append(kv)
        return self.head(self.ln_f(x[:, -1])), cache

    def extend(
        self, tokens: torch.Tensor, pos: int, prompt_cache: list, ans_cache: list | None
    ) -> tuple[torch.Tensor, list]:
        """Feed one token per continuation, ``tokens`` [n, M] at position ``pos``; the logits of
        the next move [n, M, 4] and the continuations' answer keys/values per layer."""
        x = self.tok(tokens) + self.pos.weight[pos]
        new = []
        for i, b in enumerate(self.blocks):
            x, kv = b.extend(x, prompt_cache[i], None if ans_cache is None else ans_cache[i])
            new.append(kv)
        return self.head(self.ln_f(x)), new


def build_model(config: ModelConfig, vocab: int, max_len: int) -> TinyDecoder:
    """A :class:`TinyDecoder` with the config's seeded weights; too large a model is refused
    before anything is allocated."""
    if not isinstance(config, ModelConfig):
        fail("model", config, "a ModelConfig")
    n = config.n_params(vocab, max_len)
    if n > MAX_PARAMS:
        fail("d_model", config.d_model, f"small enough for <= {MAX_PARAMS:,} parameters ({n:,})")
    return TinyDecoder(config, vocab, max_len)
