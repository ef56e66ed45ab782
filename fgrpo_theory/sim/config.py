"""Declarative simulator configuration: :class:`SimConfig` and the trainers' filter tables.

A config describes one experiment: a softmax policy over ``K`` actions (initial logits, correct
set, named subsets), the group size ``N``, the algorithm (GRPO / DAPO / CISPO, PPO-style inner
updates and clipping, focal weight ``gamma``), the surrogate (``rule``), the advantage convention
(a preset of :mod:`fgrpo_theory.advantages`), the optimizer and the logging schedule. Every field is
validated when the config is built, before any compilation or simulation, and errors name the
field and the bad value.

Sweeps (mappings whose values may be lists), TOML loading and config hashes are in
:mod:`fgrpo_theory.sim.grid`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import _spec
from .._validate import check_integer, check_scalar, fail, format_value
from .dynamic_sampling import (  # noqa: F401 (re-exported: the config's public names)
    DS_FILTERS,
    DS_RANGE_DEFAULT,
    _ds_range,
    check_dynamic_sampling,
    ds_keep_table,
)

__all__ = [
    "SimConfig",
    "ALGOS",
    "RULES",
    "OPTIMIZERS",
    "BACKENDS",
    "SAMPLERS",
    "PRECISIONS",
    "CLIP_DEFAULTS",
    "DS_FILTERS",
    "parse_logits",
    "parse_index_set",
    "ds_keep_table",
    "check_dynamic_sampling",
]

ALGOS = ("grpo", "dapo", "cispo")
RULES = ("linear", "logprob")
OPTIMIZERS = ("sgd", "adam", "adamw")
BACKENDS = ("auto", "dense", "sumtree")
SAMPLERS = ("auto", "iid", "sorted")
PRECISIONS = ("float64", "float32")
#: (eps_low, eps_high) per algorithm: PPO clip for GRPO, clip-higher for DAPO, CISPO's IS bounds.
CLIP_DEFAULTS = {"grpo": (0.2, 0.2), "dapo": (0.2, 0.28), "cispo": (1.0, 5.0)}
#: Largest supported action count and group size.
MAX_K = 100_000_000
MAX_N = 100_000_000
#: Largest step, seed and prompt count (2**53: integers stay exact in float64 checks).
MAX_COUNT = 2**53
#: Largest number of pass@k values (each is a full output column).
MAX_PASS_K = 1024
#: Matched vanilla controls of a focal config (:mod:`fgrpo_theory.fair.controls`): lr x m_gamma,
#: lr x h_gamma / h_0 and the progress-matched lr.
CONTROL_NAMES = ("m", "h", "progress")
#: Largest number of Q_pos thresholds (each is a row per run of the threshold table).
MAX_THRESHOLDS = 10_000
#: Advantage presets the simulator accepts ("paper-sim" was removed: it is "dr-grpo").
REMOVED_PRESETS = {"paper-sim": "dr-grpo"}


def _as_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if not isinstance(value, str) or value.lower() not in choices:
        fail(name, value, "one of " + ", ".join(choices))
    return value.lower()


def parse_logits(spec: str | None, K: int, name: str = "logits") -> np.ndarray:
    """The initial logits of a config as a float array of length ``K``.

    ``spec`` uses the toolkit's one logit grammar (:func:`fgrpo_theory._spec.parse_logits`):
    ``"5.0x1,3.0x9999,0.0x118000"`` is one action at 5.0, then 9,999 at 3.0, then 118,000 at 0.0,
    or a path to a ``.npy`` / ``.csv`` / ``.txt`` file. It must describe exactly ``K`` actions;
    ``None`` is ``K`` zero logits (the uniform policy).
    """
    if spec is None:
        return np.zeros(K)
    z = _spec.parse_logits(spec, name=name, max_actions=MAX_K)
    if z.size != K:
        fail(name, spec, f"a spec of K = {K} actions (it has {z.size})")
    return z


def _check_logits(spec: Any, K: int, name: str = "logits") -> None:
    """Validate a logit spec for ``K`` actions without expanding it (files are read)."""
    if spec is None:
        return
    if not isinstance(spec, str):
        fail(name, spec, "a spec string such as '5.0x1,3.0x9999,0.0x118000'")
    if _spec.is_logit_file(spec):
        parse_logits(spec, K, name)
        return
    _, counts = _spec.logit_items(spec, name=name, max_actions=MAX_K)
    if sum(counts) != K:
        fail(name, spec, f"a spec of K = {K} actions (its counts add up to {sum(counts)})")


def parse_index_set(spec: Any, K: int, name: str) -> np.ndarray:
    """Sorted unique 0-based action indices from ``"0..9999"``, ``"0,3,5"`` or ``"1..99:2"``.

    The toolkit's one index-set grammar (:func:`fgrpo_theory._spec.parse_index_set`); ranges are
    inclusive and every index must be in ``[0, K-1]``.
    """
    return _spec.parse_index_set(spec, K, name=name)


def _check_index_set(spec: Any, K: int, name: str) -> None:
    """Validate an index spec like :func:`parse_index_set` without building the index array."""
    _spec.index_ranges(spec, K, name=name)


def _tuple_of_ints(name: str, value: Any, lo: int, hi: int | None = None) -> tuple[int, ...]:
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list | tuple | np.ndarray) or len(value) == 0:
        fail(name, value, "a non-empty list of integers")
    out = tuple(sorted({check_integer(name, v, lo, hi) for v in value}))
    return out


def _thresholds(value: Any) -> tuple[float, ...]:
    """Sorted unique Q_pos thresholds, each in (0, 1) (the ``thresholds`` field)."""
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list | tuple | np.ndarray):
        fail("thresholds", value, "a list of numbers in (0, 1)")
    if len(value) > MAX_THRESHOLDS:
        fail("thresholds", f"{len(value)} values", f"at most {MAX_THRESHOLDS} values")
    out = set()
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            fail("thresholds", v, "a list of numbers in (0, 1)")
        f = float(v)
        if not 0.0 < f < 1.0:  # also refuses NaN
            fail("thresholds", v, "in (0, 1)")
        out.add(f)
    return tuple(sorted(out))


def _controls(value: Any) -> tuple[str, ...]:
    """Control names of :data:`CONTROL_NAMES` (a list or a comma-separated string), in that
    order, without repeats (the ``controls`` field)."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple):
        fail("controls", value, "a list of " + ", ".join(CONTROL_NAMES))
    for v in value:
        if v not in CONTROL_NAMES:
            fail("controls", v, "a list of " + ", ".join(CONTROL_NAMES))
    return tuple(c for c in CONTROL_NAMES if c in value)


@dataclass(frozen=True)
class SimConfig:
    """One simulator experiment (validated on construction).

    The surrogate (``rule``), the optimizer and the weight decay are options (see
    docs/theory.md section 10): the paper fixes neither, and the Fig. 2 picture depends on them.

    Parameters
    ----------
    K : int
        Number of actions (outcomes) of each prompt's softmax policy, >= 2.
    logits : str or None
        Initial logits, a logit spec of exactly ``K`` actions (see :func:`parse_logits`):
        ``"5.0x1,3.0x9999,0.0x118000"`` = the paper's Fig. 2 start, ``"0x6"`` = six zeros, or a
        ``.npy`` / ``.csv`` / ``.txt`` file (its content enters :func:`config_hash`). ``None``
        (the default) = the uniform policy.
    correct : str or int
        Correct set: a 0-based index spec (``"0..9999"``, ``"0,3"``) or an int = the number of
        leading actions that are correct. Must be non-empty.
    subsets : mapping of str to str
        Named action subsets (index specs) for ``mass_<name>`` and ``tail_miss_<name>`` metrics,
        e.g. ``{"rare": "1..9999"}``. Names must be identifiers.
    prompts : int
        Number of independent prompts; every prompt starts from the same policy (heterogeneous
        prompts are separate configs of a sweep). Runs are prompts x seeds.
    N : int
        Group size (rollouts per prompt per step), >= 1.
    steps : int
        Number of sampled groups (optimization steps) per run, >= 1.
    algo : {"grpo", "dapo", "cispo"}
        GRPO and DAPO: PPO clipped surrogate (clip-higher for DAPO); CISPO: stop-gradient clipped
        importance weight (P-15, P-16). Identical when ``inner_updates == 1`` (ratio 1).
    rule : {"linear", "logprob"}
        Per-sample surrogate: ``A * p(a)`` (linear, the paper's simulation and BroRL) or
        ``A * log p(a)`` (policy gradient).
    advantage : str
        Advantage convention, a preset name of :mod:`fgrpo_theory.advantages` ("grpo",
        "grpo-bessel", "trl", "verl", "openrlhf", "dr-grpo", "rloo"). The paper's simulation uses
        "dr-grpo" (``A = R - mean R``).
    gamma : float
        Focal exponent (P-12), >= 0; 0 is the vanilla algorithm.
    optimizer : {"sgd", "adam", "adamw"}
        SGD, Adam (weight decay as an L2 term in the gradient) or AdamW (decoupled decay).
    lr : float
        Learning rate, > 0.
    weight_decay : float
        Weight decay, >= 0 (L2 for sgd/adam, decoupled for adamw).
    beta1, beta2, adam_eps : float
        Adam moments and denominator epsilon (PyTorch defaults).
    inner_updates : int
        Optimizer steps per sampled group (PPO epochs); ratios and clipping only matter if > 1.
    clip_low, clip_high : float or None
        Clip range ``[1 - clip_low, 1 + clip_high]``; ``None`` = the algorithm's default
        (GRPO 0.2/0.2, DAPO 0.2/0.28, CISPO 1.0/5.0).
    dynamic_sampling : {"off", "dapo", "verl", "openrlhf"}
        Dynamic-sampling filter: a group the filter drops is redrawn, up to ``max_resamples``
        times per step (the last draw is trained on if every redraw is dropped); the redraws are
        reported in ``resamples``. ``"dapo"``: drop a group whose rewards are all equal
        (``X = 0`` or ``X = N``; at ``N = 1`` every group is dropped, so every step makes
        ``max_resamples`` redraws). ``"verl"``: keep a group when the population std of its
        rewards is > 0 or it has one member (verl's DAPO recipe ``filter_groups``): DAPO's rule,
        except that groups of one are kept. ``"openrlhf"``: keep a group when its success rate
        ``X/N`` lies strictly inside ``ds_range`` (OpenRLHF's dynamic filtering). ``True`` /
        ``False`` are read as ``"dapo"`` / ``"off"``.
    max_resamples : int
        Cap on redraws per step, >= 1.
    r_correct, r_incorrect : float
        Rewards of correct and incorrect actions (``r_correct > r_incorrect``); the paper's
        simulation uses +1 / -1. In a TOML file and on the CLI they are the pair
        ``rewards = [R_c, R_w]`` / ``--rewards R_c,R_w``.
    seeds : int
        Number of seeds per prompt, >= 1.
    seed : int
        Base seed of the counter-based random streams, >= 0.
    log_every : int
        Log metrics at step 0, every ``log_every`` steps and at the last step.
    log_steps : tuple of int or None
        Explicit steps to log (in ``[0, steps]``), overriding ``log_every``.
    pass_k : tuple of int
        ``k`` values of the exact pass@k columns ``pass_at_<k>``.
    backend : {"auto", "dense", "sumtree"}
        ``sumtree``: O(log K) per sampled action, only for SGD + log-prob + one inner update + no
        weight decay + a zero-sum advantage convention (only sampled logits move); ``auto`` uses it
        for such configs (unless ``sampler = "sorted"``) when K >= 16384 or
        ``N ceil(log2 K) <= 4 (N + K)`` (measured 2.5x faster than dense at K = 6, N = 8).
    sampler : {"auto", "iid", "sorted"}
        Dense-path sampling: i.i.d. uniforms with binary search (O(N log K)) or sorted uniforms
        from exponential spacings merged with the CDF (O(N + K)); ``auto`` picks by cost.
    renorm_every : int
        Sum-tree path: rebuild the tree from the logits (fresh shift) every this many steps.
    name : str
        Free label copied into the output.
    thresholds : tuple of float
        Q_pos thresholds, each in (0, 1) (default none): per run and threshold the kernel records
        the first step whose Q_pos reaches it and M_ret, the subset masses and NLLs there
        (``simulate(config, tables=True).thresholds``; theory.md section 11). Sweeps
        (:func:`~fgrpo_theory.sim.run_sweep`) store the per-step logs only.
    controls : tuple of str
        Matched vanilla controls of this focal config (gamma > 0), a subset of ``("m", "h",
        "progress")`` (default none): the arms :func:`fgrpo_theory.fair.run_comparison` and
        ``simulate --controls`` run besides the config itself (theory.md section 11).
        :func:`fgrpo_theory.sim.simulate` runs the config alone and ignores it.
    dual_clip : float or None
        Dual-clip PPO (verl's ``clip_ratio_c``, default there 3.0): for a negative advantage the
        clipped loss is also bounded by ``dual_clip * |A|``, so a sample whose ratio exceeds
        ``dual_clip`` gets no gradient. A number > 1, or ``None`` (the default) = off. Only for
        ``algo`` grpo or dapo; it matters only with ``inner_updates > 1`` (ratios != 1).
    ds_range : pair of float or None
        ``dynamic_sampling = "openrlhf"`` only: the open interval ``(lo, hi)`` the success rate
        ``X/N`` must lie in for a group to be kept; ``None`` = ``(0, 1)`` (OpenRLHF's default,
        = keep mixed groups). OpenRLHF applies its range to the mean reward; with its 0/1
        rewards that is ``X/N``; a range ``(m_lo, m_hi)`` on a mean reward with rewards
        ``(R_c, R_w)`` is ``((m_lo - R_w)/(R_c - R_w), (m_hi - R_w)/(R_c - R_w))`` here.
    precision : {"float64", "float32"}
        Arithmetic of the dense path's logits, weights, Adam moments and updates (default
        float64). ``float32`` rounds the initial logits to float32 and runs the per-step
        arithmetic in float32 (twice the SIMD lanes of float64); sums of weights, the sampler's
        CDF and every logged metric stay float64 (computed from the float32 logits). Dense path
        only (``backend = "auto"`` then picks dense); refused where float32 cannot be trusted,
        see ``docs/precision.md``. Enters ``config_hash`` only when not float64; every output
        row has a ``precision`` column.
    scheme : str
        A training scheme spec of :mod:`fgrpo_theory.schemes` (``"maxrl"``,
        ``"w-reinforce:lambda=0.1"``, ``"trl+focal:gamma=1"``, ...), or ``""`` (the default):
        the scheme is then ``advantage`` with focal ``gamma``. A spec that is a convention with
        an optional focal term is stored as those two fields (so ``"focal:gamma=1"`` and
        ``gamma = 1`` are one config, one hash); any other is stored in canonical form, and
        ``advantage`` and ``gamma`` must then stay at their defaults (one scheme per config).
        Enters ``config_hash`` only when not empty; every output row has a ``scheme`` column
        (the effective canonical spec). Likelihood-aware schemes (``unlikeliness``, ``ds``:
        advantages from each sampled action's ``log p_old``, correctness as 0/1 rewards, so
        ``r_correct`` / ``r_incorrect`` do not enter) and regularizers (``entropy``, ``kl``
        with the initial policy as reference; they move every logit) run on the dense path in
        float64 only (``precision = "float32"`` and ``backend = "sumtree"`` are refused).
    """

    K: int = 6
    logits: str | None = None
    correct: str | int = 1
    subsets: Mapping[str, str] = field(default_factory=dict)
    prompts: int = 1
    N: int = 8
    steps: int = 100
    algo: str = "grpo"
    rule: str = "logprob"
    advantage: str = "grpo"
    gamma: float = 0.0
    optimizer: str = "sgd"
    lr: float = 0.1
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    inner_updates: int = 1
    clip_low: float | None = None
    clip_high: float | None = None
    dynamic_sampling: bool = False
    max_resamples: int = 16
    r_correct: float = 1.0
    r_incorrect: float = -1.0
    seeds: int = 1
    seed: int = 0
    log_every: int = 10
    log_steps: tuple[int, ...] | None = None
    pass_k: tuple[int, ...] = (1,)
    backend: str = "auto"
    sampler: str = "auto"
    renorm_every: int = 10_000
    name: str = ""
    thresholds: tuple[float, ...] = ()
    controls: tuple[str, ...] = ()
    dual_clip: float | None = None
    ds_range: tuple[float, float] | None = None
    precision: str = "float64"
    scheme: str = ""

    def __post_init__(self) -> None:
        s = object.__setattr__
        K = check_integer("K", self.K, 2, MAX_K)
        s(self, "K", K)
        _check_logits(self.logits, K)  # literal specs are validated without allocating K values
        if isinstance(self.correct, bool) or not isinstance(self.correct, str | int | np.integer):
            fail("correct", self.correct, "an index spec such as '0..9999' or a count")
        if isinstance(self.correct, str):
            _check_index_set(self.correct, K, "correct")
        else:
            s(self, "correct", check_integer("correct", self.correct, 1, K))
        if not isinstance(self.subsets, Mapping):
            fail("subsets", self.subsets, "a table of name = 'index spec'")
        subs = {}
        for k, v in dict(self.subsets).items():
            if not isinstance(k, str) or not k.isidentifier():
                fail("subsets", k, "names that are identifiers")
            _check_index_set(v, K, f"subsets.{k}")
            subs[k] = v
        s(self, "subsets", _FrozenDict(subs))
        s(self, "prompts", check_integer("prompts", self.prompts, 1, MAX_COUNT))
        s(self, "N", check_integer("N", self.N, 1, MAX_N))
        s(self, "steps", check_integer("steps", self.steps, 1, MAX_COUNT))
        s(self, "algo", _as_choice("algo", self.algo, ALGOS))
        s(self, "rule", _as_choice("rule", self.rule, RULES))
        from ..advantages import PRESETS

        if isinstance(self.advantage, str) and self.advantage.lower() in REMOVED_PRESETS:
            new = REMOVED_PRESETS[self.advantage.lower()]
            fail("advantage", self.advantage, f"a current preset (it is now {new!r})")
        presets = [p for p in PRESETS if p not in REMOVED_PRESETS]
        s(self, "advantage", _as_choice("advantage", self.advantage, presets))
        s(self, "gamma", check_scalar("gamma", self.gamma, lo=0.0))
        self._fold_scheme()
        s(self, "optimizer", _as_choice("optimizer", self.optimizer, OPTIMIZERS))
        s(self, "lr", check_scalar("lr", self.lr, lo=0.0, lo_open=True))
        s(self, "weight_decay", check_scalar("weight_decay", self.weight_decay, lo=0.0))
        s(self, "beta1", check_scalar("beta1", self.beta1, lo=0.0, hi=1.0, hi_open=True))
        s(self, "beta2", check_scalar("beta2", self.beta2, lo=0.0, hi=1.0, hi_open=True))
        s(self, "adam_eps", check_scalar("adam_eps", self.adam_eps, lo=0.0, lo_open=True))
        s(self, "inner_updates", check_integer("inner_updates", self.inner_updates, 1, 1000))
        if self.clip_low is not None:
            s(self, "clip_low", check_scalar("clip_low", self.clip_low, lo=0.0, hi=1.0))
        if self.clip_high is not None:
            s(self, "clip_high", check_scalar("clip_high", self.clip_high, lo=0.0))
        ds, _ = check_dynamic_sampling(self.dynamic_sampling, None)
        s(self, "dynamic_sampling", ds)
        s(self, "max_resamples", check_integer("max_resamples", self.max_resamples, 1, 1_000_000))
        rc = check_scalar("r_correct", self.r_correct)
        rw = check_scalar("r_incorrect", self.r_incorrect)
        if not rc > rw:
            fail("r_correct", rc, f"> r_incorrect = {format_value(rw)}")
        s(self, "r_correct", rc)
        s(self, "r_incorrect", rw)
        s(self, "seeds", check_integer("seeds", self.seeds, 1, MAX_COUNT))
        s(self, "seed", check_integer("seed", self.seed, 0, 2**63 - 1))
        s(self, "log_every", check_integer("log_every", self.log_every, 1, MAX_COUNT))
        if self.log_steps is not None:
            s(self, "log_steps", _tuple_of_ints("log_steps", self.log_steps, 0, self.steps))
        pk = self.pass_k
        if isinstance(pk, list | tuple | np.ndarray) and len(pk) > MAX_PASS_K:
            fail("pass_k", f"{len(pk)} values", f"at most {MAX_PASS_K} values")
        s(self, "pass_k", _tuple_of_ints("pass_k", pk, 1, MAX_COUNT))
        s(self, "backend", _as_choice("backend", self.backend, BACKENDS))
        s(self, "sampler", _as_choice("sampler", self.sampler, SAMPLERS))
        s(self, "renorm_every", check_integer("renorm_every", self.renorm_every, 1))
        if not isinstance(self.name, str):
            fail("name", self.name, "a string")
        s(self, "thresholds", _thresholds(self.thresholds))
        s(self, "controls", _controls(self.controls))
        if self.controls and self.scheme:
            fail(
                "controls",
                ",".join(self.controls),
                f"empty for scheme {self.scheme!r} (the matched controls are built for a focal "
                "weight on a convention; compare schemes with fair.progress instead)",
            )
        if self.controls and self.gamma == 0:
            fail(
                "controls",
                ",".join(self.controls),
                "empty when gamma = 0 (a vanilla config has no focal weight to match)",
            )
        if self.dual_clip is not None:
            s(self, "dual_clip", check_scalar("dual_clip", self.dual_clip, lo=1.0, lo_open=True))
            if self.algo == "cispo":
                fail("dual_clip", self.dual_clip, "None for algo = cispo (a PPO-clip option)")
        if self.ds_range is not None:
            s(self, "ds_range", _ds_range(self.ds_range))
            if self.dynamic_sampling != "openrlhf":
                fail("ds_range", list(self.ds_range), "None unless dynamic_sampling = 'openrlhf'")
        s(self, "precision", _as_choice("precision", self.precision, PRECISIONS))
        if self.scheme:
            from .records import dense_scheme

            sch = self.training_scheme()
            if dense_scheme(sch):
                if self.precision == "float32":
                    fail("precision", "float32", f"float64 for scheme {self.scheme!r}")
                if self.backend == "sumtree":
                    fail(
                        "backend",
                        "sumtree",
                        f"dense or auto for scheme {self.scheme!r} (it moves every logit or "
                        "needs each rollout's log-probability)",
                    )
        if self.precision == "float32" and self.backend == "sumtree":
            fail("backend", "sumtree", "dense or auto with precision = 'float32' (dense only)")
        if self.backend == "sumtree" and not self.sumtree_eligible():
            fail(
                "backend",
                "sumtree",
                "dense unless optimizer = sgd, rule = logprob, inner_updates = 1 and "
                "weight_decay = 0 (only then do unsampled logits stay put)",
            )

    def _fold_scheme(self) -> None:
        """Validate ``scheme`` and store it canonically (see the field's documentation)."""
        if self.scheme is None or self.scheme == "":
            object.__setattr__(self, "scheme", "")
            return
        from ..schemes import parse_scheme

        sch = parse_scheme(self.scheme)
        if self.advantage != "grpo" or self.gamma != 0.0:
            fail(
                "scheme",
                self.scheme,
                "the only scheme of a config: leave advantage and gamma at their defaults "
                f"(advantage = {self.advantage!r}, gamma = {format_value(self.gamma)}; write "
                "e.g. 'trl+focal:gamma=1')",
            )
        if sch.base.name in REMOVED_PRESETS:
            fail(
                "scheme",
                self.scheme,
                f"a current preset (it is now {REMOVED_PRESETS[sch.base.name]!r})",
            )
        check_sim_scheme(sch)
        if sch.is_convention:
            object.__setattr__(self, "advantage", sch.base.name)
            object.__setattr__(self, "gamma", float(sch.gamma))
            object.__setattr__(self, "scheme", "")
        else:
            object.__setattr__(self, "scheme", sch.spec)

    def training_scheme(self):
        """The effective :class:`~fgrpo_theory.schemes.Scheme` (``scheme``, else ``advantage``
        with focal ``gamma``)."""
        from ..schemes import scheme_from_fields

        return scheme_from_fields(self.scheme, self.advantage, self.gamma)

    # ----------------------------------------------------------------------------------------
    @classmethod
    def from_toml(cls, path: str | Path) -> SimConfig:
        """Load a single config from a TOML file (top-level keys are fields; ``[subsets]``)."""
        from .grid import load_config

        configs = load_config(path)
        if len(configs) != 1:
            fail("config", str(path), "a single config (it is a sweep; use load_config)")
        return configs[0]

    def replace(self, **changes: Any) -> SimConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON/TOML-friendly)."""
        d = dataclasses.asdict(self)
        d["subsets"] = dict(self.subsets)
        for k in ("log_steps", "pass_k", "thresholds", "controls", "ds_range"):
            if d[k] is not None:
                d[k] = list(d[k])
        return d

    def sumtree_eligible(self) -> bool:
        """Whether only sampled logits move (so the sum-tree path is exact)."""
        return (
            self.optimizer == "sgd"
            and self.rule == "logprob"
            and self.inner_updates == 1
            and self.weight_decay == 0.0
        )

    def clip_bounds(self) -> tuple[float, float]:
        """``(clip_low, clip_high)`` with the algorithm's defaults filled in."""
        lo_d, hi_d = CLIP_DEFAULTS[self.algo]
        return (
            lo_d if self.clip_low is None else self.clip_low,
            hi_d if self.clip_high is None else self.clip_high,
        )

    def ds_keep(self) -> np.ndarray:
        """``keep[X]`` for ``X = 0..N`` correct draws (:func:`ds_keep_table` of this config)."""
        return ds_keep_table(self.dynamic_sampling, self.N, self.ds_range)

    @property
    def n_runs(self) -> int:
        """Number of runs, prompts x seeds."""
        return self.prompts * self.seeds

    def log_schedule(self) -> np.ndarray:
        """Sorted steps at which metrics are logged (0 = before the first update)."""
        if self.log_steps is not None:
            return np.asarray(self.log_steps, dtype=np.int64)
        steps = set(range(0, self.steps + 1, self.log_every)) | {self.steps}
        return np.asarray(sorted(steps), dtype=np.int64)


class _FrozenDict(dict):
    """A hashable, read-only dict for the ``subsets`` field."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def _ro(self, *a: Any, **k: Any) -> None:
        raise TypeError("SimConfig.subsets is read-only")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _ro  # type: ignore

    def __reduce__(self):  # pickling for process pools / Dask
        return (_FrozenDict, (dict(self),))


def check_sim_scheme(sch: Any) -> None:
    """Refuse a scheme the simulators cannot run: one without a per-X table (a batch-scoped
    convention). Likelihood-aware schemes (``unlikeliness``, ``ds``) and the regularizers
    (``entropy``, ``kl``) run on the dense path in float64 (checked by the configs)."""
    if sch.needs_logprobs:
        return
    if not sch.has_table:
        fail("scheme", sch.spec, "a group-scoped scheme (a batch std has no per-X table)")
