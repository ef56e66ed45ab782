"""Generate a population reproducibly from its config (theory.md section 13).

The correctness relation: strategy ``k`` has breadth ``s_k ~ Beta(breadth)`` and solves each
prompt independently with probability ``s_k`` (or the relation is read from a file). The initial
policy of prompt ``p``: success ``mu_0 ~ Beta(mu0)`` (or a CSV of pass rates); a share
``rare_share`` of the correct mass sits on the prompt's rare strategies (its narrowest correct
ones, equal split), the rest on its other correct strategies in proportion to breadth; the
incorrect mass ``1 - mu_0`` is split over the incorrect strategies in proportion to breadth
(broad strategies are tried often, also where they fail). ``phi_p = log p_p``, ``theta = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._libm import log
from .._validate import fail
from .config import PopulationConfig

__all__ = ["Population", "generate_population", "MU_CLIP"]

#: mu_0 is clipped to [MU_CLIP, 1 - MU_CLIP] so every prompt has both outcomes (finite logits)
MU_CLIP = 1e-4


@dataclass(frozen=True)
class Population:
    """Arrays of a generated population (train prompts first, then test prompts)."""

    correct: np.ndarray  # (P_all, K) uint8
    rare: np.ndarray  # (P_all, K) uint8, rare correct strategies (subset of correct)
    phi0: np.ndarray  # (P_all, K) float64 initial per-prompt logits (log-probabilities)
    theta0: np.ndarray  # (K,) float64 shared logits (zeros)
    mu0: np.ndarray  # (P_all,) initial success (after clipping)
    breadth: np.ndarray  # (K,) solve probability of each strategy (NaN if read from a file)
    n_train: int
    dropped: int  # prompts dropped as unsolvable (or solved by every strategy)

    @property
    def n_test(self) -> int:
        return self.correct.shape[0] - self.n_train


def _npy_header(path: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a ``.npy`` file's header (nothing else is read)."""
    from numpy.lib import format as npy

    with open(path, "rb") as fh:
        version = npy.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = npy.read_array_header_1_0(fh)
        else:
            shape, _, dtype = npy.read_array_header_2_0(fh)
    return tuple(shape), dtype


def _read_correctness(path: str, P_all: int, K: int) -> np.ndarray:
    try:
        if path.endswith(".npy"):
            shape, dtype = _npy_header(path)  # checked before any data is read
            if shape != (P_all, K) or dtype.kind not in "biuf" or dtype.hasobject:
                fail("correctness", path, f"a matrix of shape ({P_all}, {K}) of 0/1 numbers; "
                     f"its header says shape {shape}, dtype {dtype}")  # fmt: skip
            arr = np.load(path, allow_pickle=False)
        else:
            arr = np.loadtxt(path, delimiter=",", ndmin=2)
    except (OSError, ValueError) as e:
        fail("correctness", path, f"a readable .npy or .csv 0/1 matrix ({e})")
    if arr.shape != (P_all, K):
        fail("correctness", path, f"a matrix of shape ({P_all}, {K}); it has shape {arr.shape}")
    if not np.isin(arr, (0, 1)).all():
        fail("correctness", path, "a matrix of 0 and 1 only")
    return arr.astype(np.uint8)


def _read_pass_rates(path: str, P_all: int) -> np.ndarray:
    """The ``pass_rate`` column of a CSV, one value in [0, 1] per prompt; one-line errors."""
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        fail("pass_rates", path, f"a readable CSV ({first})")
    if "pass_rate" not in df.columns:
        there = ", ".join(map(str, df.columns[:20]))
        fail("pass_rates", path, f"a CSV with a column 'pass_rate' (columns there: {there})")
    raw = df["pass_rate"]
    if len(raw) != P_all:
        fail("pass_rates", path, f"a CSV with P + P_test = {P_all} rows; it has {len(raw)}")
    v = pd.to_numeric(raw, errors="coerce").to_numpy(float)
    bad = ~((v >= 0.0) & (v <= 1.0))  # also NaN: an empty or non-numeric cell
    if bad.any():
        i = int(np.argmax(bad))
        fail(
            "pass_rates",
            path,
            f"a pass_rate in [0, 1] in every row (row {i + 1} of the data holds {raw.iloc[i]!r})",
        )
    return v


def generate_population(cfg: PopulationConfig) -> Population:
    """The population of ``cfg``, generated from ``cfg.population_seed`` (pure function)."""
    if not isinstance(cfg, PopulationConfig):
        fail("config", cfg, "a PopulationConfig")
    P_all, K = cfg.P + cfg.P_test, cfg.K
    rng = np.random.default_rng([cfg.population_seed, 0x706F70])
    rng_mu = np.random.default_rng([cfg.population_seed, 0x6D7530])
    if cfg.correctness is None:
        s = rng.beta(*cfg.breadth, size=K)
        correct = (rng.random((P_all, K)) < s).astype(np.uint8)
    else:
        correct = _read_correctness(cfg.correctness, P_all, K)
        s = correct.mean(axis=0)  # empirical breadth orders strategies for rarity and mass
    if cfg.pass_rates is None:
        mu = rng_mu.beta(*cfg.mu0, size=P_all)
    else:
        mu = _read_pass_rates(cfg.pass_rates, P_all)
    mu = np.clip(mu, MU_CLIP, 1.0 - MU_CLIP)
    n_c = correct.sum(axis=1)
    bad = (n_c == 0) | (n_c == K)
    is_train = np.arange(P_all) < cfg.P
    if bad.any():
        what = f"{int(bad.sum())} of {P_all} prompts have no correct (or no incorrect) strategy"
        if cfg.unsolvable == "refuse":
            fail("unsolvable", "refuse", f"'drop' or a population without them ({what})")
        keep = ~bad
        if not keep[is_train].any():
            fail("P", cfg.P, f"large enough that some train prompt is solvable ({what})")
        if keep[is_train].sum() < cfg.B:
            fail("B", cfg.B, f"<= {int(keep[is_train].sum())} solvable train prompts ({what})")
        correct, mu, is_train = correct[keep], mu[keep], is_train[keep]
        n_c = n_c[keep]
    n_train = int(is_train.sum())
    rare = np.zeros_like(correct)
    p0 = np.empty(correct.shape)
    w = np.where(np.isfinite(s), s, 1.0) + 1e-12  # breadth weights (never 0)
    for p in range(correct.shape[0]):
        c = np.flatnonzero(correct[p])
        inc = np.flatnonzero(correct[p] == 0)
        n_rare = 0
        if len(c) >= 2:
            n_rare = min(len(c) - 1, max(1, int(round(cfg.rare_fraction * len(c)))))
        order = c[np.argsort(s[c], kind="stable")]  # narrowest first
        r_idx, c_idx = order[:n_rare], order[n_rare:]
        rare[p, r_idx] = 1
        common = mu[p] * (1.0 - cfg.rare_share) if n_rare else mu[p]
        p0[p, c_idx] = common * w[c_idx] / w[c_idx].sum()
        if n_rare:
            p0[p, r_idx] = mu[p] * cfg.rare_share / n_rare
        p0[p, inc] = (1.0 - mu[p]) * w[inc] / w[inc].sum()
    phi0 = log(p0)  # the C library's log on every CPU (NumPy's AVX-512 log rounds differently)
    return Population(
        correct=np.ascontiguousarray(correct),
        rare=np.ascontiguousarray(rare),
        phi0=np.ascontiguousarray(phi0),
        theta0=np.zeros(K),
        mu0=mu,
        breadth=s if cfg.correctness is None else np.full(K, np.nan),
        n_train=n_train,
        dropped=int(bad.sum()),
    )
