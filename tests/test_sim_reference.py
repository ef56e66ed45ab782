"""The simulator against an independent NumPy re-implementation of whole runs.

The reference follows the definitions, not the kernel's algebra: the random words come from the
documented SplitMix64 counter scheme (re-implemented here), draws are the inverse CDF of those
uniforms, the advantages come from ``group_advantages`` on the group's reward vector times
``(1 - X/N)**gamma`` (P-12, P-13), and the logit gradient of the surrogate (PPO clipped
``min(r A, clip(r) A)``, bounded below by ``c A`` for ``A < 0`` under verl's dual clip, or
CISPO's ``sg(clip(r)) A f(p)``, with ``f = log p`` or ``p``) is taken by complex-step
differentiation (exact to rounding, no formula shared with the kernel). The optimizers follow
PyTorch's SGD / Adam / AdamW update equations. Dynamic-sampling filters are applied to the
group's reward vector as the trainers write them (DAPO: not all equal; verl: std > 0 or one
member; OpenRLHF: mean 0/1 reward strictly inside the range). Gradient components below 1e-13 of
the largest are flushed to zero (rounding residues of exact zeros, see the comment).

Agreement is to ~1e-9 relative: the two sides sum in different orders, so they differ by
rounding; a wrong term (sign, missing p_old, wrong clip side, bias correction) gives O(lr) errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.advantages import group_advantages
from fgrpo_theory.sim import SimConfig, simulate

MASK = (1 << 64) - 1
GOLD = 0x9E3779B97F4A7C15


def _mix(x: int) -> int:
    x &= MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


class Stream:
    def __init__(self, key: int) -> None:
        self.key = int(key)
        self.ctr = 0

    def word(self) -> int:
        self.ctr += 1
        return _mix(self.key + self.ctr * GOLD)

    def uniform(self) -> float:
        return (self.word() >> 11) * 2.0**-53

    def exp(self) -> float:
        return -np.log(((self.word() >> 11) + 1) * 2.0**-53)


def _key(seed: int, r: int) -> int:
    return _mix(_mix(seed) ^ _mix(r + GOLD))


def _draw(z, N, st: Stream, sampler: str) -> np.ndarray:
    e = np.exp(z - z.max())
    cum = np.cumsum(e)
    if sampler == "iid":
        t = np.array([st.uniform() for _ in range(N)]) * cum[-1]
    else:
        g = np.cumsum([st.exp() for _ in range(N + 1)])
        t = g[:N] * (e.sum() / g[N])
    return np.minimum(np.searchsorted(cum, t, side="right"), len(z) - 1)


def _softmax(z):
    e = np.exp(z - z.max().real)
    return e / e.sum()


def _kept(cfg: SimConfig, rewards: np.ndarray, is_correct: np.ndarray) -> bool:
    """Whether the trainer's dynamic-sampling filter keeps a group, from its reward vector."""
    f = cfg.dynamic_sampling
    if f == "off":
        return True
    if f == "dapo":  # DAPO: the rewards are not all equal
        return len(set(rewards.tolist())) > 1
    if f == "verl":  # verl's filter_groups: population std > 0, or a group of one
        return bool(np.std(rewards) > 0) or len(rewards) == 1
    lo, hi = cfg.ds_range or (0.0, 1.0)  # OpenRLHF: lo < mean of the 0/1 rewards < hi
    scores = is_correct.astype(float)
    return lo < sum(scores) / len(scores) < hi


def reference_run(cfg: SimConfig, z0, correct, run: int, sampler: str):
    """Logged (q_pos, m_ret, entropy) of one run, computed from the definitions."""
    st = Stream(_key(cfg.seed, run))
    z = z0.astype(float).copy()
    p0 = _softmax(z)
    K, N = len(z), cfg.N
    lo, hi = cfg.clip_bounds()
    m = np.zeros(K)
    v = np.zeros(K)
    t_opt = 0
    rows = []

    def metrics(z):
        p = _softmax(z)
        mret = 1 - np.maximum(0, p0 - p)[correct].sum() / p0[correct].sum()
        return p[correct].sum(), mret, -(p * np.log(p)).sum()

    rows.append(metrics(z))
    for _ in range(cfg.steps):
        a = _draw(z, N, st, sampler)
        X = int(correct[a].sum())
        tries = 0
        rw = np.where(correct[a], cfg.r_correct, cfg.r_incorrect)
        while not _kept(cfg, rw, correct[a]) and tries < cfg.max_resamples:
            a = _draw(z, N, st, sampler)
            rw = np.where(correct[a], cfg.r_correct, cfg.r_incorrect)
            X = int(correct[a].sum())
            tries += 1
        rewards = np.where(correct[a], cfg.r_correct, cfg.r_incorrect)
        A = group_advantages(rewards, cfg.advantage) * (1 - X / N) ** cfg.gamma
        p_old = _softmax(z)[a]
        for u in range(cfg.inner_updates):
            r_real = _softmax(z)[a] / p_old if u > 0 else np.ones(N)

            def J(zc, r_real=r_real, a=a, A=A, p_old=p_old):
                pc = _softmax(zc)[a]
                tot = 0.0
                for j in range(N):
                    if cfg.algo == "cispo":
                        w = min(max(r_real[j], 1 - lo), 1 + hi)
                        f = np.log(pc[j]) if cfg.rule == "logprob" else pc[j]
                        tot = tot + w * A[j] * f
                    else:
                        clipped = (A[j] > 0 and r_real[j] > 1 + hi) or (
                            A[j] < 0 and r_real[j] < 1 - lo
                        )
                        if clipped:
                            continue
                        # verl's dual clip: loss min(-A c, -A r) for A < 0 (constant when smaller)
                        loss = -A[j] * (pc[j] / p_old[j])
                        if cfg.dual_clip is not None and A[j] < 0:
                            if -A[j] * cfg.dual_clip < loss.real:
                                continue
                        base = 1.0 if cfg.rule == "logprob" else p_old[j]
                        tot = tot - loss * base
                return tot / N

            h = 1e-30
            grad_J = np.array([J(z + 1j * h * np.eye(K)[k]).imag / h for k in range(K)])
            # components that are exactly 0 in exact arithmetic (unsampled logits under the
            # log-prob rule at r = 1, where sum_j A_j = 0) come out of the complex step as ~1e-17
            # rounding residues, which Adam would normalize into lr-sized steps: flush them
            grad_J[np.abs(grad_J) < 1e-13 * np.abs(grad_J).max()] = 0.0
            g = -grad_J  # gradient of the loss
            t_opt += 1
            if cfg.optimizer == "sgd":
                z = z - cfg.lr * (g + cfg.weight_decay * z)
            else:
                if cfg.optimizer == "adamw":
                    z = z * (1 - cfg.lr * cfg.weight_decay)
                else:
                    g = g + cfg.weight_decay * z
                m = cfg.beta1 * m + (1 - cfg.beta1) * g
                v = cfg.beta2 * v + (1 - cfg.beta2) * g * g
                bc1 = 1 - cfg.beta1**t_opt
                bc2 = 1 - cfg.beta2**t_opt
                z = z - (cfg.lr / bc1) * m / (np.sqrt(v) / np.sqrt(bc2) + cfg.adam_eps)
        rows.append(metrics(z))
    return np.array(rows)


Z0 = np.array([1.0, 0.5, 0.5, 0.0, -0.5])
CORRECT = np.array([True, True, False, False, False])
BASE = dict(K=5, logits="1.0x1,0.5x2,0.0x1,-0.5x1", correct="0,1", steps=6, log_every=1, seeds=3)

CASES = {
    "sgd-logprob-grpo-iid": dict(N=6, lr=0.5, sampler="iid"),
    "sgd-logprob-grpo-sorted": dict(N=6, lr=0.5, sampler="sorted", advantage="grpo-bessel"),
    "adam-linear-papersim": dict(
        N=8, rule="linear", optimizer="adam", lr=0.05, advantage="dr-grpo", sampler="sorted"
    ),
    "adamw-linear-wd": dict(
        N=3, rule="linear", optimizer="adamw", lr=0.05, weight_decay=0.3, sampler="iid"
    ),
    "adam-l2-logprob-papersim": dict(
        N=4, optimizer="adam", lr=0.1, weight_decay=0.2, advantage="dr-grpo", sampler="iid"
    ),
    "ppo-inner3-clip": dict(
        N=6, lr=2.0, inner_updates=3, clip_low=0.05, clip_high=0.05, sampler="iid"
    ),
    "dapo-inner3-linear": dict(
        N=5, algo="dapo", rule="linear", lr=5.0, inner_updates=3, clip_low=0.01,
        clip_high=0.02, sampler="iid",
    ),
    "cispo-inner3-adam": dict(
        N=4, algo="cispo", optimizer="adam", lr=0.3, inner_updates=3, clip_low=0.1,
        clip_high=0.1, advantage="dr-grpo", sampler="iid",
    ),
    "cispo-inner2-linear-sgd": dict(
        N=4, algo="cispo", rule="linear", lr=20.0, inner_updates=2, clip_low=0.02,
        clip_high=0.02, sampler="sorted",
    ),
    "focal-dynamic-rloo": dict(
        N=3, gamma=1.0, advantage="rloo", dynamic_sampling="dapo", max_resamples=2, lr=0.7,
        sampler="iid",
    ),
    "focal-half-drgrpo": dict(N=7, gamma=0.5, advantage="dr-grpo", lr=0.7, sampler="sorted"),
    "verl-filter": dict(N=3, dynamic_sampling="verl", max_resamples=3, lr=0.7, sampler="iid"),
    "verl-filter-N1": dict(
        N=1, dynamic_sampling="verl", advantage="verl-dr-grpo", lr=0.7, sampler="iid"
    ),
    "dapo-filter-N1": dict(
        N=1, dynamic_sampling="dapo", max_resamples=2, advantage="verl-dr-grpo", lr=0.7,
        sampler="iid",
    ),
    "openrlhf-narrow": dict(
        N=4, dynamic_sampling="openrlhf", ds_range=[0.3, 0.6], max_resamples=5, lr=0.7,
        advantage="dr-grpo", sampler="sorted",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_simulator_matches_reference(case):
    cfg = SimConfig(**BASE, **CASES[case])
    df = simulate(cfg)
    for run in range(cfg.n_runs):
        ref = reference_run(cfg, Z0, CORRECT, run, cfg.sampler)
        got = df[df.run == run][["q_pos", "m_ret", "entropy"]].to_numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
    # the case must actually move the policy, or agreement would prove nothing
    assert np.abs(np.diff(df.q_pos.to_numpy())).max() > 1e-3


@pytest.mark.parametrize(
    "extra",
    [
        dict(optimizer="sgd", lr=20.0, sampler="iid"),
        dict(optimizer="adam", lr=1.0, algo="dapo", sampler="iid"),
    ],
)
def test_dual_clip_matches_reference(extra):
    """verl's dual clip, where it binds: under the linear rule a sampled wrong action rises when a
    dominant wrong action (logit 3) is pushed down, so its ratio exceeds c at inner updates 2, 3."""
    z0 = np.array([0.0, 3.0, 0.0, 0.0, 0.0])
    correct = np.arange(5) == 0
    cfg = SimConfig(
        K=5, logits="0.0x1,3.0x1,0.0x3", correct="0", N=6, steps=6, log_every=1, seeds=3,
        rule="linear", inner_updates=3, clip_low=0.9, clip_high=3.0, dual_clip=1.5,
        advantage="dr-grpo", **extra,
    )  # fmt: skip
    df = simulate(cfg)
    off = simulate(cfg.replace(dual_clip=None))
    for run in range(cfg.n_runs):
        ref = reference_run(cfg, z0, correct, run, cfg.sampler)
        got = df[df.run == run][["q_pos", "m_ret", "entropy"]].to_numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
    # the dual clip must bind in this case, or agreement would prove nothing
    assert np.abs(df.q_pos.to_numpy() - off.q_pos.to_numpy()).max() > 1e-3


def test_reference_detects_a_wrong_rule():
    """Self-check of the oracle: the linear rule is not the log-prob rule on the same draws."""
    cfg = SimConfig(**BASE, N=6, lr=0.5, sampler="iid")
    ref_lin = reference_run(cfg.replace(rule="linear"), Z0, CORRECT, 0, "iid")
    got = simulate(cfg)
    assert np.abs(got[got.run == 0].q_pos.to_numpy() - ref_lin[:, 0]).max() > 1e-3


@pytest.mark.parametrize("K", [17, 64, 300])
def test_two_level_iid_sampler_matches_reference(K):
    """K > 16 takes the blocked two-level CDF (64-action blocks, a partial last block): its
    draws must be the reference's inverse-CDF draws, so whole dense runs agree."""
    rng = np.random.default_rng(K)
    z0 = np.round(rng.normal(size=K), 3)
    correct = np.zeros(K, bool)
    correct[: K // 3] = True
    logits = ",".join(f"{v}x1" for v in z0)
    cfg = SimConfig(
        K=K, logits=logits, correct=f"0..{K // 3 - 1}", steps=5, log_every=1, seeds=2, N=40,
        lr=0.5, optimizer="adam", sampler="iid", backend="dense",
    )  # fmt: skip
    df = simulate(cfg)
    for run in range(cfg.n_runs):
        ref = reference_run(cfg, z0, correct, run, "iid")
        got = df[df.run == run][["q_pos", "m_ret", "entropy"]].to_numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
    assert np.abs(np.diff(df.q_pos.to_numpy())).max() > 1e-3
