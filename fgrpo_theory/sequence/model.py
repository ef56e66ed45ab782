"""A small decoder-only transformer over prompt + answer tokens (plain PyTorch).

Pre-LayerNorm blocks (causal multi-head self-attention, a GELU MLP), learned token and position
embeddings, and an output head over the four moves only: the policy's next-token distribution
at every answer position is a softmax over {U, D, L, R}, so an answer of ``L`` moves is one of
exactly ``4**L`` sequences and its probability is the product of ``L`` such softmaxes.

Ways to run it, equal up to float rounding (``tests/test_sequence_exact.py`` and
``tests/test_sequence_rl.py`` check it): :meth:`TinyDecoder.forward` (whole sequences, a causal
mask; SFT); the cached path :meth:`TinyDecoder.prefill` + :meth:`TinyDecoder.extend`, where many
continuations of one prompt share the prompt's keys and values and each carries only the keys
and values of its own answer tokens (the exact evaluation walks the prefix tree of the answer
space this way, at one token of compute per node); :meth:`TinyDecoder.prompt_cache` (the
prefill's results by fused attention calls, the last block at the last position only), then
:meth:`TinyDecoder.decode`, one token per rollout against a preallocated key/value buffer (the
RL sampler); and :meth:`TinyDecoder.rollout_logits`, one pass over packed groups, each prompt
once followed by its ``N`` answers under a block mask, the last block at the answer positions
only (the RL loss).

Weights are drawn from a ``torch.Generator`` seeded with ``seed`` (nothing global), so a seed
gives the same weights whatever else the process did.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .._validate import fail

F = torch.nn.functional
_sdpa = F.scaled_dot_product_attention

__all__ = ["ModelConfig", "TinyDecoder", "build_model"]

#: Largest parameter count a model may have (refused before allocation).
MAX_PARAMS = 50_000_000
#: Most answers in one packed group of :meth:`TinyDecoder.rollout_logits`.
MAX_PACK = 32


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

    def causal(
        self, x: torch.Tensor, last_only: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`full` by one fused attention call; with ``last_only``, the block's output at
        the last position only [B, 1, d] (the keys and values [B, H, T, dh] of all)."""
        q, k, v = (t.transpose(1, 2) for t in self._split(x))  # [B, H, T, dh]
        if last_only:  # the last query sees every key: no mask
            x, o = x[:, -1:], _sdpa(q[:, :, -1:], k, v)
        else:
            o = _sdpa(q, k, v, is_causal=True)
        return self._mlp(x + self.proj(o.transpose(1, 2).reshape(x.shape))), (k, v)

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

    def masked(self, x: torch.Tensor, bias: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Self-attention over x [B, S, d] where position i sees position j iff bias[i, j] is 0
        (-inf otherwise; an additive mask, as :func:`packed_layout`'s); the block's output at
        positions ``start`` onwards only [B, S - start, d] (the keys and values of all; one
        fused attention call, an additive mask: a boolean one is converted at every call)."""
        q, k, v = (t.transpose(1, 2) for t in self._split(x))  # [B, H, S, dh]
        o = _sdpa(q[:, :, start:], k, v, attn_mask=bias[start:]).transpose(1, 2)
        o = o.reshape(x.shape[0], x.shape[1] - start, x.shape[2])
        return self._mlp(x[:, start:] + self.proj(o))

    def decode(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor], pos: int):
        """One new token per row, x [n, d] at position ``pos``: its key and value are written
        into ``cache`` [n, H, S, dh] (the rows' keys and values at positions < pos filled).
        The same operations as :meth:`extend`'s, called functionally (this runs once per layer
        and token when sampling, where the per-call overhead is most of the cost)."""
        n, d = x.shape
        h = F.layer_norm(x, (d,), self.ln1.weight, self.ln1.bias, self.ln1.eps)
        qkv = F.linear(h, self.qkv.weight, self.qkv.bias).view(n, 3, self.h, d // self.h)
        K, V = cache
        K[:, :, pos] = qkv[:, 1]
        V[:, :, pos] = qkv[:, 2]
        o = _sdpa(qkv[:, 0, :, None], K[:, :, : pos + 1], V[:, :, : pos + 1]).view(n, d)
        x = x + F.linear(o, self.proj.weight, self.proj.bias)
        h = F.layer_norm(x, (d,), self.ln2.weight, self.ln2.bias, self.ln2.eps)
        h = F.gelu(F.linear(h, self.fc1.weight, self.fc1.bias))
        return x + F.linear(h, self.fc2.weight, self.fc2.bias)


@functools.lru_cache(maxsize=64)
def packed_layout(
    P: int, N: int, T: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions [S] and additive attention mask [S, S] of ``dtype`` (0 where seen, -inf
    elsewhere; S = P + N T) of a packed group: a prompt of ``P`` tokens followed by ``N``
    continuations of ``T`` tokens each, every continuation at positions P..P+T-1 and seeing the
    prompt and its own earlier tokens only."""
    with torch.inference_mode(False):  # cached: ordinary tensors even if first made in one
        pos = torch.cat([torch.arange(P), torch.arange(P, P + T).repeat(N)])
        cont = torch.cat([torch.full((P,), -1), torch.arange(N).repeat_interleave(T)])
        same = (cont[None, :] == -1) | (cont[None, :] == cont[:, None])
        seen = (pos[None, :] <= pos[:, None]) & same
        return pos, torch.zeros(seen.shape, dtype=dtype).masked_fill(~seen, float("-inf"))


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

    def prompt_cache(self, prompts: torch.Tensor) -> tuple[torch.Tensor, list]:
        """:meth:`prefill`'s results (equal up to float rounding) for the sampler: one fused
        causal attention call per block, and the last block's attention output and MLP at the
        last position only (its other positions feed nothing: their keys and values come from
        the block's input)."""
        T = prompts.shape[1]
        x = self.tok(prompts) + self.pos(torch.arange(T, device=prompts.device))
        cache = []
        last = len(self.blocks) - 1
        for i, b in enumerate(self.blocks):
            x, kv = b.causal(x, i == last)
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

    def rollout_logits(self, prompts: torch.Tensor, moves: torch.Tensor) -> torch.Tensor:
        """Move logits [G, N, L, 4] at every answer position of ``N`` answers [G, N, L] to each
        prompt [G, P], by one pass over packed groups (:func:`packed_layout`): each prompt once,
        then its answers' first ``L - 1`` moves, each answer attending to the prompt and to its
        own earlier moves. Equal to :meth:`forward` on the ``G N`` sequences prompt + answer up
        to float rounding, with ``P + N (L - 1)`` tokens per group instead of ``N (P + L)``.
        A pack holds at most :data:`MAX_PACK` answers (attention grows with the square of a
        pack's length): with larger ``N``, each prompt heads ``N / c`` packs of ``c`` answers,
        ``c`` the largest divisor of ``N`` up to :data:`MAX_PACK`."""
        G, P = prompts.shape
        N, L = moves.shape[1:]
        T = L - 1
        c = max(d for d in range(1, min(N, MAX_PACK) + 1) if N % d == 0)
        if c < N:
            prompts = prompts.repeat_interleave(N // c, 0)
        g = prompts.shape[0]
        pos, bias = packed_layout(P, c, T, self.head.weight.dtype)
        tokens = torch.cat([prompts, moves[..., :T].reshape(g, c * T)], dim=1)
        x = self.tok(tokens) + self.pos(pos.to(tokens.device))
        bias = bias.to(tokens.device)
        last = len(self.blocks) - 1
        for i, b in enumerate(self.blocks):
            # the last block only at the positions whose logits are used (from the prompt's last)
            x = b.masked(x, bias, P - 1 if i == last else 0)
        h = self.head(self.ln_f(x))  # [g, 1 + c T, 4]: the first move, then the rest
        first = h[:, :1, None].expand(g, c, 1, h.shape[-1])
        out = torch.cat([first, h[:, 1:].reshape(g, c, T, h.shape[-1])], dim=2)
        return out.reshape(G, N, L, h.shape[-1])

    def decode_cache(self, prompt_cache: list, rows: torch.Tensor, length: int) -> list:
        """Per layer, key and value buffers [n, H, length, dh] for decoding the continuations
        ``rows`` [n] (each the index of its prompt in ``prompt_cache``), the prompt's keys and
        values copied into the first positions."""
        out = []
        for k, v in prompt_cache:  # [G, H, P, dh]
            K = k.new_empty(len(rows), k.shape[1], length, k.shape[3])
            V = torch.empty_like(K)
            K[:, :, : k.shape[2]] = k.index_select(0, rows)
            V[:, :, : k.shape[2]] = v.index_select(0, rows)
            out.append((K, V))
        return out

    def decode(self, tokens: torch.Tensor, pos: int, cache: list) -> torch.Tensor:
        """Feed one token per row, ``tokens`` [n] at position ``pos``, into ``cache``
        (:meth:`decode_cache`, updated in place); the logits of the next move [n, 4]."""
        x = self.tok(tokens) + self.pos.weight[pos]
        for b, c in zip(self.blocks, cache, strict=True):
            x = b.decode(x, c, pos)
        return self.head(self.ln_f(x))


def build_model(config: ModelConfig, vocab: int, max_len: int) -> TinyDecoder:
    """A :class:`TinyDecoder` with the config's seeded weights; too large a model is refused
    before anything is allocated."""
    if not isinstance(config, ModelConfig):
        fail("model", config, "a ModelConfig")
    n = config.n_params(vocab, max_len)
    if n > MAX_PARAMS:
        fail("d_model", config.d_model, f"small enough for <= {MAX_PARAMS:,} parameters ({n:,})")
    return TinyDecoder(config, vocab, max_len)
