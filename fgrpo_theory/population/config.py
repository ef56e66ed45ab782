"""Population config: a frozen, validated dataclass and its TOML form (theory.md section 13).

A population is ``P`` train and ``P_test`` held-out prompts over ``K`` strategies. The logits of
prompt ``p`` are ``theta + phi_p``; ``lr_shared`` trains theta and ``lr_prompt`` the phi_p
(0 freezes), so the family runs from fully tabular (``lr_shared = 0``: independent prompts) to
fully shared (``lr_prompt = 0``: one policy whose correctness depends on the prompt).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._validate import check_integer, fail
from ..sim.config import OPTIMIZERS, PRECISIONS, RULES

__all__ = [
    "PopulationConfig",
    "load_population_config",
    "load_population_sweep",
    "expand_population_grid",
    "population_config_hash",
]

ADAM_STATES = ("global", "per-prompt")
UNSOLVABLE = ("refuse", "drop")
DS_FILLS = ("redraw", "next-prompt")
#: refuse anything larger than this many logits per run (phi is (P + P_test) x K float64)
MAX_PARAMS = 50_000_000


def _float(name: str, v: Any, lo: float | None = None, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        fail(name, v, "a number")
    x = float(v)
    if x != x or x in (float("inf"), float("-inf")):
        fail(name, v, "a finite number")
    if lo is not None and (x <= lo if lo_open else x < lo):
        fail(name, v, f"{'>' if lo_open else '>='} {lo:g}")
    return x


def _pair(name: str, v: Any, positive: bool) -> tuple[float, float]:
    if not isinstance(v, list | tuple) or len(v) != 2:
        fail(name, v, "a pair [a, b]")
    a, b = (_float(name, x) for x in v)
    if positive and not (a > 0 and b > 0):
        fail(name, list(v), "Beta parameters > 0")
    return a, b


@dataclass(frozen=True)
class PopulationConfig:
    """One population experiment (validated on construction).

    Parameters
    ----------
    P, P_test : int
        Train prompts (>= 1) and held-out test prompts (>= 0; never trained on).
    K : int
        Strategies (responses) shared by all prompts, >= 2.
    breadth : (a, b)
        Beta parameters of each strategy's solve probability s_k; strategy k solves prompt p
        with probability s_k, independently. Small a / b: most strategies solve few prompts, a few
        are broadly useful.
    mu0 : (a, b)
        Beta parameters of the initial per-prompt success mu_0 (ignored if ``pass_rates``).
    pass_rates : str or None
        CSV file with a column ``pass_rate`` (values in [0, 1]) of P + P_test base-model pass rates.
    correctness : str or None
        File (.npy or .csv of 0/1, shape (P + P_test) x K) replacing the generated relation.
    rare_share : float
        Share of each prompt's correct mass on its rare strategies, in (0, 1).
    rare_fraction : float
        Fraction of a prompt's correct strategies that are rare (the narrowest ones, lowest s_k;
        at least one when the prompt has >= 2 correct strategies, never all), in (0, 1).
    unsolvable : {"refuse", "drop"}
        What to do with prompts no strategy solves (or every strategy solves).
    population_seed : int
        Seed of the generated population (the runs' seeds are ``seed`` / ``seeds``).
    B, N, steps : int
        Prompts per batch (B <= P), rollouts per prompt, optimizer steps.
    compute_budget : int or None
        Compute-matched mode: B = compute_budget // N (so B x N is fixed across N).
    algo, rule, advantage, gamma, rewards, scheme
        As in the single-prompt simulator (``scheme``: a spec of :mod:`fgrpo_theory.schemes`,
        folded and validated as :class:`~fgrpo_theory.sim.SimConfig` does it): ``algo`` in
        {"grpo", "dapo", "cispo"} (GRPO and DAPO: PPO clipped surrogate, clip-higher for DAPO;
        CISPO: clipped importance weights under a stop-gradient, P-15, P-16).
    inner_updates : int
        Optimizer steps per sampled batch (PPO epochs), 1 .. 1000 as in the simulator. The batch
        (B prompts, N rollouts each) is drawn under the current policy; each of the
        ``inner_updates`` steps recomputes every batch prompt's softmax under the current
        ``theta + phi_p`` and weights the sampled actions by the ratio ``p / p_old`` as the
        simulator does. With 1 (the default) every ratio is 1, so GRPO, DAPO and CISPO coincide
        and the clip options change nothing. Adam / AdamW make one optimizer step per inner
        update (the step counter, the idle prompts' momentum steps and the per-prompt counters
        advance per inner update); the group counters count sampled groups, once per step.
    clip_low, clip_high : float or None
        Clip range ``[1 - clip_low, 1 + clip_high]`` of the ratio; ``None`` = the algorithm's
        default (GRPO 0.2 / 0.2, DAPO 0.2 / 0.28, CISPO 1.0 / 5.0;
        :data:`fgrpo_theory.sim.config.CLIP_DEFAULTS`). ``clip_low`` in [0, 1], ``clip_high`` >= 0.
    dual_clip : float or None
        Dual-clip PPO (verl's ``clip_ratio_c``): no gradient for a sampled action with a negative
        advantage whose ratio exceeds ``dual_clip`` (> 1); ``None`` (default) = off; grpo / dapo
        only. These five fields are validated by :class:`fgrpo_theory.sim.SimConfig` (same
        names, bounds and messages).
    dynamic_sampling, ds_range, max_resamples
        A trainer's dynamic-sampling filter as the single-prompt simulator has it (same names:
        ``"off"`` (default), ``"dapo"``, ``"verl"``, ``"openrlhf"`` with ``ds_range``; ``True`` /
        ``False`` mean ``"dapo"`` / ``"off"``): a group the filter drops is redrawn (same
        prompt) up to ``max_resamples`` times (>= 1); the redraws are reported in
        ``resamples``.
    ds_fill : {"redraw", "next-prompt"}
        How dynamic sampling replaces a dropped group. ``"redraw"`` (default): redraw the same
        prompt's group, as above. ``"next-prompt"``: as a trainer does (DAPO keeps generating
        until the batch holds B kept groups), the group of the next prompt of the epoch order
        (never one already drawn in this step; a new epoch starts when the order is used up)
        takes its place; at most ``min(max_resamples, P - B)`` groups are dropped per step, later
        groups are kept whatever the filter says. ``groups`` / ``active_frac`` /
        ``tail_miss_rate`` then count every drawn group (B plus the dropped ones per step) and
        ``resamples`` the dropped ones; a dropped prompt is not trained in that step. Only with
        ``dynamic_sampling`` on.
    optimizer, lr_shared, lr_prompt, weight_decay, beta1, beta2, adam_eps, adam_state
        One optimizer over all parameters (``adam_state = "global"``), or per-prompt Adam state.
    seeds, seed : int
        Runs and their base seed (keys as in :func:`fgrpo_theory.sim.keys.run_keys`).
    log_every : int
        Metrics every this many steps (and at 0 and the last step).
    pass_k : tuple of int
        k values of pass@k and rare coverage@k (<= 1,024 by default list).
    buckets : tuple of float
        Inner edges of the mu_0 difficulty buckets.
    precision : {"float64", "float32"}
        Arithmetic of the logits, the softmax, the sampler and the optimizer (as the single-prompt
        simulator's ``precision``; docs/precision.md): float32 logits ``theta`` and ``phi_p``,
        float32 weights with float64 block sums, float32 Adam moments of the prompts (theta's
        update is computed in float64 and rounded to float32); the logged metrics are computed
        in float64 from the float32 logits. Configs float32 cannot run faithfully are refused
        in one line (likelihood-aware schemes and regularizers, logits or step sizes beyond
        float32's resolution). Enters the config hash only when not float64.
    """

    name: str = "population"
    P: int = 256
    P_test: int = 256
    K: int = 64
    breadth: tuple[float, float] = (0.3, 3.0)
    mu0: tuple[float, float] = (0.6, 0.9)
    pass_rates: str | None = None
    correctness: str | None = None
    rare_share: float = 0.1
    rare_fraction: float = 0.5
    unsolvable: str = "drop"
    population_seed: int = 0
    B: int = 32
    N: int = 8
    steps: int = 300
    compute_budget: int | None = None
    algo: str = "grpo"
    inner_updates: int = 1
    clip_low: float | None = None
    clip_high: float | None = None
    dual_clip: float | None = None
    rule: str = "logprob"
    advantage: str = "grpo"
    gamma: float = 0.0
    rewards: tuple[float, float] = (1.0, -1.0)
    dynamic_sampling: str = "off"
    max_resamples: int = 16
    ds_range: tuple[float, float] | None = None
    ds_fill: str = "redraw"
    optimizer: str = "adam"
    lr_shared: float = 0.01
    lr_prompt: float = 0.01
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    adam_state: str = "global"
    seeds: int = 8
    seed: int = 0
    log_every: int = 50
    pass_k: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
    buckets: tuple[float, ...] = (0.2, 0.5, 0.8)
    scheme: str = ""
    precision: str = "float64"

    def __post_init__(self) -> None:
        s = object.__setattr__
        if not isinstance(self.name, str) or not self.name:
            fail("name", self.name, "a non-empty string")
        s(self, "P", check_integer("P", self.P, 1))
        s(self, "P_test", check_integer("P_test", self.P_test, 0))
        s(self, "K", check_integer("K", self.K, 2))
        if (self.P + self.P_test) * self.K > MAX_PARAMS:
            fail("K", self.K, f"such that (P + P_test) x K <= {MAX_PARAMS}")
        s(self, "breadth", _pair("breadth", self.breadth, True))
        s(self, "mu0", _pair("mu0", self.mu0, True))
        for nm in ("pass_rates", "correctness"):
            v = getattr(self, nm)
            if v is not None and (not isinstance(v, str) or not v):
                fail(nm, v, "a file path")
        for nm in ("rare_share", "rare_fraction"):
            x = _float(nm, getattr(self, nm))
            if not 0.0 < x < 1.0:
                fail(nm, x, "in (0, 1)")
            s(self, nm, x)
        if self.unsolvable not in UNSOLVABLE:
            fail("unsolvable", self.unsolvable, "one of " + ", ".join(UNSOLVABLE))
        s(self, "population_seed", check_integer("population_seed", self.population_seed, 0))
        s(self, "N", check_integer("N", self.N, 1, 1_000_000))
        if self.compute_budget is not None:
            s(self, "compute_budget", check_integer("compute_budget", self.compute_budget, 1))
            if self.compute_budget < self.N:
                fail("compute_budget", self.compute_budget, f">= N = {self.N}")
            s(self, "B", self.compute_budget // self.N)
        s(self, "B", check_integer("B", self.B, 1))
        if self.B > self.P:
            fail("B", self.B, f"<= P = {self.P} (prompts are drawn without replacement)")
        s(self, "steps", check_integer("steps", self.steps, 1, 10_000_000))
        alg = self._algorithm()
        for nm in ("algo", "inner_updates", "clip_low", "clip_high", "dual_clip"):
            s(self, nm, getattr(alg, nm))
        if self.rule not in RULES:
            fail("rule", self.rule, "one of " + ", ".join(RULES))
        if not isinstance(self.advantage, str):
            fail("advantage", self.advantage, "an advantage preset name")
        s(self, "gamma", _float("gamma", self.gamma, 0.0))
        rc, rw = _pair("rewards", self.rewards, False)
        if not rc > rw:
            fail("rewards", [rc, rw], "a pair R_c,R_w with R_c > R_w")
        s(self, "rewards", (rc, rw))
        from ..sim.config import check_dynamic_sampling

        ds, rng = check_dynamic_sampling(self.dynamic_sampling, self.ds_range)
        s(self, "dynamic_sampling", ds)
        s(self, "ds_range", rng)
        s(self, "max_resamples", check_integer("max_resamples", self.max_resamples, 1, 1_000_000))
        if self.ds_fill not in DS_FILLS:
            fail("ds_fill", self.ds_fill, "one of " + ", ".join(DS_FILLS))
        if self.ds_fill != "redraw" and ds == "off":
            fail("ds_fill", self.ds_fill, "'redraw' unless dynamic_sampling is on")
        if self.optimizer not in OPTIMIZERS:
            fail("optimizer", self.optimizer, "one of " + ", ".join(OPTIMIZERS))
        s(self, "lr_shared", _float("lr_shared", self.lr_shared, 0.0))
        s(self, "lr_prompt", _float("lr_prompt", self.lr_prompt, 0.0))
        if self.lr_shared == 0.0 and self.lr_prompt == 0.0:
            fail("lr_prompt", 0.0, "> 0 when lr_shared = 0 (nothing would train)")
        s(self, "weight_decay", _float("weight_decay", self.weight_decay, 0.0))
        for nm in ("beta1", "beta2"):
            x = _float(nm, getattr(self, nm))
            if not 0.0 <= x < 1.0:
                fail(nm, x, "in [0, 1)")
            s(self, nm, x)
        s(self, "adam_eps", _float("adam_eps", self.adam_eps, 0.0, lo_open=True))
        if self.adam_state not in ADAM_STATES:
            fail("adam_state", self.adam_state, "one of " + ", ".join(ADAM_STATES))
        s(self, "seeds", check_integer("seeds", self.seeds, 1, 100_000))
        s(self, "seed", check_integer("seed", self.seed, 0, 2**63 - 1))
        s(self, "log_every", check_integer("log_every", self.log_every, 1))
        pk = self.pass_k
        if isinstance(pk, int):
            pk = (pk,)
        if not isinstance(pk, list | tuple) or not pk:
            fail("pass_k", pk, "a non-empty list of integers")
        s(self, "pass_k", tuple(sorted({check_integer("pass_k", k, 1, 1_000_000) for k in pk})))
        if not isinstance(self.buckets, list | tuple):
            fail("buckets", self.buckets, "a list of increasing edges in (0, 1)")
        bk = tuple(_float("buckets", x) for x in self.buckets)
        if any(not 0.0 < x < 1.0 for x in bk) or list(bk) != sorted(set(bk)):
            fail("buckets", list(bk), "increasing edges in (0, 1)")
        s(self, "buckets", bk)
        from ..advantages import get_convention

        get_convention(self.advantage)  # its one-line error names advantage and the value
        # the training scheme: folded and checked by the simulator's rule (one rule, one message)
        if self.precision not in PRECISIONS:
            fail("precision", self.precision, "one of " + ", ".join(PRECISIONS))
        folded = self._algorithm_scheme()  # refuses a float32 scheme the kernel runs in float64
        s(self, "advantage", folded.advantage)
        s(self, "gamma", folded.gamma)
        s(self, "scheme", folded.scheme)

    def _algorithm_scheme(self):
        """A :class:`~fgrpo_theory.sim.SimConfig` holding this config's scheme fields, folded
        (a convention spec becomes ``advantage`` + ``gamma``) and validated by the simulator."""
        from ..sim.config import SimConfig

        rc, rw = self.rewards
        return SimConfig(
            advantage=self.advantage,
            gamma=self.gamma,
            scheme=self.scheme,
            r_correct=rc,
            r_incorrect=rw,
            precision=self.precision,
        )

    def training_scheme(self):
        """The effective :class:`~fgrpo_theory.schemes.Scheme` of this config."""
        from ..schemes import scheme_from_fields

        return scheme_from_fields(self.scheme, self.advantage, self.gamma)

    def to_dict(self) -> dict[str, Any]:
        """Fields as plain Python values (tuples become lists), for TOML, JSON and hashing."""
        d = dataclasses.asdict(self)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}

    def replace(self, **changes: Any) -> PopulationConfig:
        """A copy with ``changes`` (validated; with a compute budget, B follows N)."""
        return dataclasses.replace(self, **changes)

    def _algorithm(self):
        """A :class:`~fgrpo_theory.sim.SimConfig` holding this config's algorithm fields
        (``algo``, ``inner_updates``, ``clip_low``, ``clip_high``, ``dual_clip``): the
        simulator validates them (one rule, one message) and fills in the clip defaults."""
        from ..sim.config import SimConfig

        return SimConfig(
            algo=self.algo,
            inner_updates=self.inner_updates,
            clip_low=self.clip_low,
            clip_high=self.clip_high,
            dual_clip=self.dual_clip,
        )

    def clip_bounds(self) -> tuple[float, float]:
        """``(clip_low, clip_high)`` with the algorithm's defaults filled in
        (:meth:`fgrpo_theory.sim.SimConfig.clip_bounds`)."""
        return self._algorithm().clip_bounds()

    def ds_keep(self):
        """``keep[X]`` of the dynamic-sampling filter
        (:func:`fgrpo_theory.sim.config.ds_keep_table`)."""
        from ..sim.config import ds_keep_table

        return ds_keep_table(self.dynamic_sampling, self.N, self.ds_range)

    def log_schedule(self):
        """Sorted logged steps (0 = before the first update, and always the last step)."""
        import numpy as np

        steps = np.arange(0, self.steps + 1, self.log_every, dtype=np.int64)
        return steps if steps[-1] == self.steps else np.append(steps, np.int64(self.steps))


_FIELDS = {f.name for f in dataclasses.fields(PopulationConfig)}


def population_config_from_dict(d: dict[str, Any], where: str = "config") -> PopulationConfig:
    """Build a config from a mapping; unknown keys are refused."""
    unknown = sorted(set(d) - _FIELDS)
    if unknown:
        fail(f"{where} key", unknown[0], "one of " + ", ".join(sorted(_FIELDS)))
    return PopulationConfig(**d)


#: fields whose value is itself a list: swept only when given a list of lists
_LIST_FIELDS = ("breadth", "mu0", "rewards", "pass_k", "buckets", "ds_range")


def expand_population_grid(sweep: Any) -> list[PopulationConfig]:
    """Expand a population sweep into the configs of the Cartesian product of its list fields.

    A mapping whose values may be lists (``N = [2, 4, 8]``; pair and tuple fields such as
    ``mu0`` or ``pass_k`` are swept only when given a list of lists); the order is that of
    ``itertools.product`` over the fields in declaration order, the last varying fastest (as
    :func:`fgrpo_theory.sim.expand_grid`). A :class:`PopulationConfig` gives itself; an
    iterable of configs is returned as a list. Every config is validated before any work.
    """
    import itertools
    from collections.abc import Mapping

    if isinstance(sweep, PopulationConfig):
        return [sweep]
    if not isinstance(sweep, Mapping):
        out = list(sweep)
        for c in out:
            if not isinstance(c, PopulationConfig):
                fail("sweep", c, "a PopulationConfig")
        return out
    from ..sim.grid import grid_axes

    unknown = sorted(set(sweep) - _FIELDS)
    if unknown:
        fail("sweep key", unknown[0], "one of " + ", ".join(sorted(_FIELDS)))
    names, axes = grid_axes(PopulationConfig, sweep, _LIST_FIELDS)
    return [
        PopulationConfig(**dict(zip(names, combo, strict=True)))
        for combo in itertools.product(*axes)
    ]


def load_population_sweep(path: str | Path) -> dict[str, Any]:
    """Read a population TOML file (keys = :class:`PopulationConfig` fields, lists allowed).

    Relative ``pass_rates`` / ``correctness`` paths are made relative to the TOML file.
    """
    from ..sim.grid import read_toml

    p = Path(path)
    d = read_toml(p, "--config")  # bounded size and depth, one-line errors
    unknown = sorted(set(d) - _FIELDS)
    if unknown:
        fail("config key", unknown[0], "one of " + ", ".join(sorted(_FIELDS)))
    for nm in ("pass_rates", "correctness"):
        v = d.get(nm)
        vals = v if isinstance(v, list) else [v]
        fixed = [
            str(p.parent / x) if isinstance(x, str) and x and not Path(x).is_absolute() else x
            for x in vals
        ]
        if v is not None:
            d[nm] = fixed if isinstance(v, list) else fixed[0]
    return d


def load_population_config(path: str | Path) -> PopulationConfig:
    """Load a TOML file of ONE config (keys = :class:`PopulationConfig` fields)."""
    cfgs = expand_population_grid(load_population_sweep(path))
    if len(cfgs) != 1:
        fail("--config", str(path), f"one config (it is a sweep of {len(cfgs)})")
    return cfgs[0]


def population_config_hash(cfg: PopulationConfig) -> str:
    """Stable 16-hex-digit hash of a config's fields and the package version.

    A ``pass_rates`` / ``correctness`` file enters by the SHA-256 of its bytes, so editing the
    file changes the hash (and resume recomputes).
    """
    from .. import __version__

    d = cfg.to_dict()
    if not d["scheme"]:  # added after hashes were in use: an empty value keeps the older hashes
        del d["scheme"]
    if d["precision"] == "float64":  # likewise
        del d["precision"]
    for nm in ("pass_rates", "correctness"):
        v = getattr(cfg, nm)
        if v is not None and Path(v).is_file():
            d[f"{nm}_sha256"] = hashlib.sha256(Path(v).read_bytes()).hexdigest()
    payload = json.dumps({"version": __version__, "config": d}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
