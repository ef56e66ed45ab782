"""One sequence-rung run: task, SFT (cached), RL, exact evaluation; the tidy table.

:func:`run_sequence` is the one library call behind ``fgrpo-theory sequence``. Rows: one per
logged step x split (``train``, ``test``), with the population model's columns
(:mod:`fgrpo_theory.population.runner`): ``pass_at_k``, ``coverage_at_k``, ``rare_nll``,
``rare_nll_rise`` (from step 0), ``entropy``, ``n_prompts``; train rows also ``groups``,
``active_frac`` (groups with mixed rewards since the previous logged step) and
``tail_miss_rate`` (active groups with no rollout in the rare set, among active groups of
prompts that have one; Lemma 3.1's event B given activity). Then the config columns and
``config_hash``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import fail
from .model import ModelConfig
from .rl import RLConfig
from .sft import SFTConfig
from .task import GridTask

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SequenceConfig", "PRESETS", "preset", "run_sequence", "sequence_config_hash"]

#: Largest estimated memory of one RL step's activations (refused before anything is allocated).
MAX_STEP_BYTES = 4_000_000_000


@dataclass(frozen=True)
class SequenceConfig:
    """A whole run: ``task``, ``model``, ``sft``, ``rl`` and the torch ``threads``."""

    name: str = "custom"
    task: GridTask = field(default_factory=GridTask)
    model: ModelConfig = field(default_factory=ModelConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    threads: int = 1

    def __post_init__(self) -> None:
        from .sft import MAX_THREADS

        t = self.threads
        if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= MAX_THREADS:
            fail("threads", t, f"an integer in [1, {MAX_THREADS}]")
        if self.rl.B > self.task.n_train:
            fail("B", self.rl.B, f"<= the number of train prompts ({self.task.n_train})")
        need = self.step_bytes()
        if need > MAX_STEP_BYTES:
            rollouts = self.rl.B * self.rl.N
            fail(
                "N",
                self.rl.N,
                f"such that one RL step fits in {MAX_STEP_BYTES / 1e9:g} GB "
                f"(B x N = {rollouts:,} rollouts need ~{need / 1e9:.1f} GB)",
            )

    def step_bytes(self) -> int:
        """Estimated float32 activations kept for the backward pass of one RL step: per token and
        layer ~12 d_model + 2 d_ff values and the attention weights (heads x length)."""
        T = self.task.prompt_len + self.task.L
        m = self.model
        per_token = m.n_layers * (12 * m.d_model + 2 * m.ff + 2 * m.n_heads * T) + 8 * m.d_model
        return 4 * self.rl.B * self.rl.N * self.rl.inner_updates * T * per_token

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task.to_dict(),
            "model": self.model.to_dict(),
            "sft": self.sft.to_dict(),
            "rl": self.rl.to_dict(),
            "threads": self.threads,
        }


def sequence_config_hash(cfg: SequenceConfig) -> str:
    d = cfg.to_dict()
    d.pop("name")
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


#: Named configurations. ``quick``: the default task, a 2-layer width-64 model, 300 SFT steps,
#: 40 RL steps of 8 prompts x 8 rollouts (well under 2 minutes on one core, SFT included).
PRESETS: dict[str, SequenceConfig] = {
    "quick": SequenceConfig(
        name="quick",
        task=GridTask(L=7, n_train=64, n_test=64, seed=0),
        model=ModelConfig(d_model=64, n_layers=2, n_heads=4, seed=0),
        sft=SFTConfig(teacher_beta=2.0, steps=300, batch=64, lr=3e-3, seed=0),
        rl=RLConfig(B=8, N=8, steps=40, lr=3e-4, log_every=20, eval_prompts=32, seed=0),
    ),
    "single-quick": SequenceConfig(
        name="single-quick",
        task=GridTask(L=7, variant="single", max_walls=10, n_train=64, n_test=64, seed=0),
        model=ModelConfig(d_model=64, n_layers=2, n_heads=4, seed=0),
        sft=SFTConfig(teacher_beta=2.0, steps=300, batch=64, lr=3e-3, seed=0),
        rl=RLConfig(B=8, N=8, steps=40, lr=3e-4, log_every=20, eval_prompts=32, seed=0),
    ),
    # seconds long, for tests and CI smoke runs (L = 4: 256 answers, a width-16 model)
    "smoke": SequenceConfig(
        name="smoke",
        task=GridTask(L=4, n_train=12, n_test=6, max_walls=3, min_correct=3, rare_turns=2),
        model=ModelConfig(d_model=16, n_layers=1, n_heads=2, seed=0),
        sft=SFTConfig(teacher_beta=1.0, steps=20, batch=16, lr=1e-2, seed=0),
        rl=RLConfig(B=4, N=4, steps=4, lr=1e-3, log_every=2, eval_prompts=6, seed=0),
    ),
}


def preset(name: str, **rl_overrides: Any) -> SequenceConfig:
    """A preset, with fields of its RL config replaced (``seed`` also sets the task, model and
    SFT seeds; ``threads`` the thread count)."""
    if name not in PRESETS:
        fail("preset", name, "one of " + ", ".join(sorted(PRESETS)))
    cfg = PRESETS[name]
    threads = rl_overrides.pop("threads", None)
    seed = rl_overrides.get("seed")
    if seed is not None:
        cfg = replace(
            cfg,
            task=replace(cfg.task, seed=seed),
            model=replace(cfg.model, seed=seed),
            sft=replace(cfg.sft, seed=seed),
        )
    rl = replace(cfg.rl, **{k: v for k, v in rl_overrides.items() if v is not None})
    return replace(cfg, rl=rl, threads=cfg.threads if threads is None else threads)


@contextlib.contextmanager
def interrupt_between_steps() -> Iterator[Callable[[str, int, int], None]]:
    """Ctrl-C (SIGINT) takes effect between steps: the handler only records it, and the
    ``check(phase, done, total)`` this yields, called after each SFT and RL step, raises
    ``KeyboardInterrupt("<phase> step <done>/<total>")``. A second Ctrl-C interrupts at once.
    Either way the handler this one replaced is called first (:func:`fgrpo_theory._sigint.
    deliver`: the console script's arms its watchdog). Outside the main thread (no signal
    handlers there) ``check`` does nothing."""
    import signal
    import threading

    from .._sigint import deliver

    hit = [False]
    old: object = None

    def check(phase: str, done: int, total: int) -> None:
        if hit[0]:
            deliver(old)  # the handler replaced acts now (the console script's watchdog arms)
            raise KeyboardInterrupt(f"{phase} step {done}/{total}")

    if threading.current_thread() is not threading.main_thread():
        yield check
        return

    def handler(signum, frame):  # noqa: ARG001
        if hit[0]:
            deliver(old, frame)
            raise KeyboardInterrupt
        hit[0] = True

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, old)


def _evaluate(model, prompts, ids, pass_k) -> dict[str, Any]:
    from .exact import answer_logprobs, prompt_metrics, split_metrics

    lp = answer_logprobs(model, prompts.tokens[ids], prompts.task.L)
    return split_metrics(prompt_metrics(lp, prompts, ids), pass_k)


def run_sequence(
    config: SequenceConfig,
    *,
    cache: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    lemma_check: bool = False,
) -> pd.DataFrame:
    """SFT (from the cache when it holds this config's checkpoint), then RL with exact
    evaluation at steps 0, ``log_every``, ... and the last; the tidy table of the module doc.

    ``progress(phase, done, total)`` is called after each SFT and RL step (phase ``"sft"`` or
    ``"rl"``). ``lemma_check``: before each step, the exact ``mu`` and ``tau`` of the batch's
    prompts (a tree walk each) give Lemma 3.1's Pr(B) of every group; train rows get
    ``p_tail_miss`` (groups of prompts with a rare set that were active and drew no rare answer,
    among those groups), ``p_tail_miss_lemma`` (the mean Pr(B) of the same groups) and
    ``tail_miss_z`` (:func:`fgrpo_theory.sequence.theory.tail_miss_z`).
    ``df.attrs["sft_cached"]`` says whether the checkpoint came from the cache. A scheme with a
    ``kl`` term takes the SFT model (the policy at RL start) as its reference. Ctrl-C stops
    between steps (:func:`interrupt_between_steps`): ``KeyboardInterrupt`` after the step that
    was running, the SFT cache written whole or not at all.
    """
    with interrupt_between_steps() as check:
        return _run(config, cache, progress, lemma_check, check)


def _run(config, cache, progress, lemma_check, check) -> pd.DataFrame:
    import pandas as pd
    import torch

    from ..schemes import parse_scheme
    from ..tail_miss import tail_miss_probability
    from .exact import PASS_K, answer_logprobs, prompt_metrics
    from .rl import make_optimizer, rl_step
    from .sft import load_or_train_sft, torch_settings
    from .task import make_prompts
    from .theory import tail_miss_z

    if not isinstance(config, SequenceConfig):
        fail("config", config, "a SequenceConfig")
    cfg = config
    rl = cfg.rl
    prompts = make_prompts(cfg.task)

    def sft_progress(done: int, total: int) -> None:
        if progress is not None:
            progress("sft", done, total)
        check("sft", done, total)

    model, cached = load_or_train_sft(
        cfg.task, cfg.model, cfg.sft, prompts=prompts, threads=cfg.threads, cache=cache,
        progress=sft_progress,
    )  # fmt: skip
    ref = None
    if parse_scheme(rl.scheme).regularizer("kl") is not None:
        import copy

        ref = copy.deepcopy(model).requires_grad_(False)
    splits = {s: prompts.split(s)[: rl.eval_prompts] for s in ("train", "test")}
    splits = {s: ids for s, ids in splits.items() if len(ids)}
    log_steps = sorted({*range(0, rl.steps + 1, rl.log_every), rl.steps})
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng([rl.seed, 3])
    # since the previous logged step: groups, active groups, active groups of prompts with a
    # rare set, those that drew no rare answer (event B), groups of prompts with a rare set
    counts = np.zeros(5, dtype=np.int64)
    lemma: list[np.ndarray] = []  # Pr(B) of each group of a prompt with a rare set (lemma_check)

    def log(step: int) -> None:
        for s, ids in splits.items():
            row = {"step": step, "split": s, **_evaluate(model, prompts, ids, PASS_K)}
            if not all(np.isfinite(row[c]) for c in ("mu", "entropy", "pass_at_1")):
                fail("lr", rl.lr, "small enough that the policy stays finite (diverged)")
            if s == "train":
                g, a, ar, t, gr = (int(c) for c in counts)
                row.update(groups=g, active_frac=a / g if g else np.nan,
                           tail_miss_rate=t / ar if ar else np.nan)  # fmt: skip
                if lemma_check:
                    pb = np.concatenate(lemma) if lemma else np.zeros(0)
                    row.update(p_tail_miss=t / gr if gr else np.nan,
                               p_tail_miss_lemma=float(pb.mean()) if gr else np.nan,
                               tail_miss_z=tail_miss_z(t, pb))  # fmt: skip
            else:
                row.update(groups=0, active_frac=np.nan, tail_miss_rate=np.nan)
                if lemma_check:
                    row.update(p_tail_miss=np.nan, p_tail_miss_lemma=np.nan, tail_miss_z=np.nan)
            rows.append(row)
        counts[:] = 0
        lemma.clear()

    with torch_settings(cfg.threads):
        gen = torch.Generator().manual_seed(rl.seed)
        opt = make_optimizer(model, rl)
        log(0)
        for step in range(1, rl.steps + 1):
            ids = np.sort(rng.choice(prompts.n_train, size=rl.B, replace=False))
            has_rare = prompts.rare[ids].any(axis=1)
            if lemma_check and has_rare.any():  # exact mu, tau of the policy that samples
                m = prompt_metrics(
                    answer_logprobs(model, prompts.tokens[ids[has_rare]], cfg.task.L),
                    prompts, ids[has_rare],
                )  # fmt: skip
                lemma.append(np.asarray(tail_miss_probability(rl.N, m["mu"], m["tau"])))
            st = rl_step(model, opt, prompts, ids, rl, gen, ref_model=ref)
            active = (st["X"] > 0) & (st["X"] < rl.N)
            miss = active & has_rare & (st["rare_hits"] == 0)
            counts += (rl.B, active.sum(), (active & has_rare).sum(), miss.sum(), has_rare.sum())
            if step in log_steps:
                log(step)
            if progress is not None:
                progress("rl", step, rl.steps)
            check("rl", step, rl.steps)
    df = pd.DataFrame(rows)
    first = df[df["step"] == 0].set_index("split")["rare_nll"]
    df.insert(df.columns.get_loc("rare_nll") + 1, "rare_nll_rise",
              df["rare_nll"] - df["split"].map(first))  # fmt: skip
    cols = {
        "name": cfg.name, "variant": cfg.task.variant, "L": cfg.task.L, "B": rl.B, "N": rl.N,
        "steps": rl.steps, "scheme": rl.scheme, "aggregation": rl.aggregation,
        "optimizer": rl.optimizer, "lr": rl.lr, "inner_updates": rl.inner_updates,
        "d_model": cfg.model.d_model, "n_layers": cfg.model.n_layers, "seed": rl.seed,
        "threads": cfg.threads,
    }  # fmt: skip
    for k, v in cols.items():
        df[k] = v
    df["config_hash"] = sequence_config_hash(cfg)
    df.attrs["sft_cached"] = cached
    return df
