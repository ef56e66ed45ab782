"""Supervised fine-tuning from scratch on a biased teacher, deterministic and cached.

The teacher (:func:`fgrpo_theory.sequence.task.teacher_probabilities`) puts weight
``exp(-teacher_beta * turns)`` on each correct answer of a train prompt, so the model it trains
puts most of its correct mass on the few-turn (common) routes and little on the rare ones: the
state in which SFT leaves an LLM. Each step draws ``batch`` train prompts uniformly and one
teacher answer for each (NumPy generator seeded from ``seed``), and takes one AdamW step on the
cross-entropy of the answer tokens.

The checkpoint is a pure function of (task, model, SFT config, code, torch version, threads, the
CPU kernels torch runs: :func:`._isa.label`):
:func:`load_or_train_sft` keys it by the hash of the configs plus a digest of this package's
sequence sources and stores it under ``<user cache>/sequence/`` (see
:func:`fgrpo_theory._trust.user_cache_dir`), written atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from .._validate import fail
from ._isa import label
from .model import ModelConfig, TinyDecoder, build_model
from .task import GridTask, Prompts, make_prompts, teacher_probabilities

__all__ = ["SFTConfig", "train_sft", "load_or_train_sft", "sft_cache_path", "code_digest",
           "torch_settings"]  # fmt: skip

_HERE = Path(__file__).resolve().parent
#: Most torch threads a run may ask for.
MAX_THREADS = 256


@dataclass(frozen=True)
class SFTConfig:
    """Supervised training: teacher bias ``teacher_beta``, ``steps`` of ``batch`` answers,
    AdamW with ``lr`` and ``weight_decay``, data ``seed``."""

    teacher_beta: float = 2.0
    steps: int = 600
    batch: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                fail(f"sft_{name}", v, "an integer")
        if not 0 <= self.steps <= 1_000_000:
            fail("sft_steps", self.steps, "in [0, 1000000]")
        if not 1 <= self.batch <= 65_536:
            fail("sft_batch", self.batch, "in [1, 65536]")
        for name in ("teacher_beta", "lr", "weight_decay"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v < 0:
                fail(name if name == "teacher_beta" else f"sft_{name}", v, "a finite number >= 0")

    def to_dict(self) -> dict:
        return asdict(self)


def code_digest() -> str:
    """sha256 of torch's version and the sources a checkpoint depends on: this module and every
    package module it imports, transitively (the static import graph of
    :func:`fgrpo_theory._imports.import_closure`; an edit to the RL loop or the CLI keeps
    the cached checkpoint, an edit to the task, the model or the SFT recomputes it)."""
    from .._imports import import_closure

    pkg = _HERE.parent
    h = hashlib.sha256(torch.__version__.encode())
    for p in import_closure([Path(__file__)], {pkg.name: pkg}, packages=False):
        h.update(str(p.relative_to(pkg)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@contextlib.contextmanager
def torch_settings(threads: int) -> Iterator[None]:
    """Run with ``threads`` intra-op threads and torch's deterministic algorithms on; restored
    after. With the same seed and thread count every number is identical (CPU)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        fail("threads", threads, f"an integer in [1, {MAX_THREADS}]")
    old_t = torch.get_num_threads()
    old_d = torch.are_deterministic_algorithms_enabled()
    old_w = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(threads)
    _set_deterministic(True, False)
    try:
        yield
    finally:
        torch.set_num_threads(old_t)
        _set_deterministic(old_d, old_w)


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)`` without its import of ``torch._inductor``
    (3.5 s of start-up, ~800 modules, measured: it only sets the compiler's flag, and nothing
    here compiles): the ATen switch itself, and the compiler's flag when it is loaded."""
    import sys

    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.deterministic = mode


def sft_key(task: GridTask, model: ModelConfig, sft: SFTConfig, threads: int) -> str:
    blob = json.dumps(
        {"task": task.to_dict(), "model": model.to_dict(), "sft": sft.to_dict(),
         "threads": threads, "code": code_digest(), "isa": label()},
        sort_keys=True,
    )  # fmt: skip
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def sft_cache_path(task: GridTask, model: ModelConfig, sft: SFTConfig, threads: int = 1) -> Path:
    from .._trust import user_cache_dir

    return user_cache_dir() / "sequence" / f"sft-{sft_key(task, model, sft, threads)}.pt"


def answer_loss(model: TinyDecoder, prompt_tokens: torch.Tensor, moves: torch.Tensor):
    """Per-token log-probabilities [G, L] of answers ``moves`` [G, L] after ``prompt_tokens``."""
    seq = torch.cat([prompt_tokens, moves[:, :-1]], dim=1)
    logits = model(seq)[:, prompt_tokens.shape[1] - 1 :]
    return torch.log_softmax(logits, -1).gather(-1, moves[..., None]).squeeze(-1)


def train_sft(
    task: GridTask,
    model_config: ModelConfig,
    sft: SFTConfig,
    *,
    prompts: Prompts | None = None,
    threads: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> TinyDecoder:
    """Train the model from its seeded initial weights on the biased teacher (module doc)."""
    from .task import answer_tokens

    if not isinstance(sft, SFTConfig):
        fail("sft", sft, "an SFTConfig")
    prompts = make_prompts(task) if prompts is None else prompts
    model = build_model(model_config, task.vocab, task.prompt_len + task.L)
    teacher = teacher_probabilities(prompts, sft.teacher_beta)[: prompts.n_train]
    cum = np.cumsum(teacher, axis=1)
    cum[:, -1] = 1.0
    rng = np.random.default_rng([sft.seed, 1])
    ptok = torch.from_numpy(prompts.tokens)
    with torch_settings(threads):
        opt = torch.optim.AdamW(model.parameters(), lr=sft.lr, weight_decay=sft.weight_decay)
        for s in range(sft.steps):
            pid = rng.integers(0, prompts.n_train, size=sft.batch)
            u = rng.random(sft.batch)
            idx = (cum[pid] <= u[:, None]).sum(axis=1)
            moves = torch.from_numpy(answer_tokens(idx, task.L))
            loss = -answer_loss(model, ptok[pid], moves).mean()
            if not torch.isfinite(loss):
                fail("sft_lr", sft.lr, "small enough that the SFT loss stays finite (diverged)")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if progress is not None:
                progress(s + 1, sft.steps)
    return model


def load_or_train_sft(
    task: GridTask,
    model_config: ModelConfig,
    sft: SFTConfig,
    *,
    prompts: Prompts | None = None,
    threads: int = 1,
    cache: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[TinyDecoder, bool]:
    """The SFT model from the cache, else trained and stored; ``(model, was_cached)``."""
    path = sft_cache_path(task, model_config, sft, threads)
    if cache and path.is_file():
        try:
            state = torch.load(path, weights_only=True)
            model = build_model(model_config, task.vocab, task.prompt_len + task.L)
            model.load_state_dict(state)
            return model, True
        except Exception:  # an unreadable cache entry is recomputed, not trusted
            pass
    model = train_sft(task, model_config, sft, prompts=prompts, threads=threads, progress=progress)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            torch.save(model.state_dict(), tmp)
            os.replace(tmp, path)
        except OSError:
            pass  # no cache is no error: the model is in memory
        finally:
            tmp.unlink(missing_ok=True)  # also after Ctrl-C during the write
    return model, False
