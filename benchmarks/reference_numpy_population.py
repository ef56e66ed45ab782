"""Vectorized NumPy reference of the population simulator (same algorithm, same random words).

Log-prob GRPO-family surrogate with a zero-sum advantage table, one inner update, SGD or Adam
(one optimizer over all parameters, global step counter), logits ``theta + phi_p``. Vectorized
over the batch and the strategies; the random words are the kernel's (SplitMix64 counter stream
of the run key for rollouts, the salted stream for batch order), so both sample the same
rollouts except where a uniform falls within rounding distance of a CDF boundary (the two compute
the CDF with different summation orders). Not part of the package; used by
``bench_population.py``.
"""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
SALT = np.uint64(0x5851F42D4C957F2D)


def _mix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * M1
        x = (x ^ (x >> np.uint64(27))) * M2
    return x ^ (x >> np.uint64(31))


class _Stream:
    def __init__(self, key: np.uint64) -> None:
        self.key = np.uint64(key)
        self.c = 0

    def uniforms(self, n: int) -> np.ndarray:
        idx = np.arange(self.c + 1, self.c + n + 1, dtype=np.uint64)
        self.c += n
        with np.errstate(over="ignore"):
            w = _mix(self.key + idx * GOLDEN)
        return (w >> np.uint64(11)).astype(np.float64) * 2.0**-53


def run_reference(
    theta0, phi0, correct, n_train, B, N, steps, log_steps, adv_c, adv_w, key, opt, lr_shared,
    lr_prompt, b1=0.9, b2=0.999, eps=1e-8,
) -> np.ndarray:  # fmt: skip
    """Per-prompt success mu at ``log_steps``: array (n_log, P_all)."""
    theta = theta0.copy()
    phi = phi0.copy()
    P_all, K = phi.shape
    adam = opt != "sgd"
    m_phi = np.zeros_like(phi[:n_train])
    v_phi = np.zeros_like(phi[:n_train])
    m_th = np.zeros(K)
    v_th = np.zeros(K)
    rs = _Stream(key)
    with np.errstate(over="ignore"):
        os_ = _Stream(_mix(np.array([np.uint64(key) ^ SALT]))[0])
    perm = np.arange(n_train)
    pos = n_train
    corr = correct.astype(bool)
    out = []

    def mu_all() -> np.ndarray:
        z = theta + phi
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        return (p * corr).sum(axis=1)

    if log_steps[0] == 0:
        out.append(mu_all())
    rows = np.arange(B)[:, None]
    for step in range(1, steps + 1):
        if pos + B > n_train:
            for i in range(n_train - 1, 0, -1):  # Fisher-Yates, the kernel's order of draws
                j = int(os_.uniforms(1)[0] * (i + 1))
                perm[i], perm[j] = perm[j], perm[i]
            pos = 0
        bp = perm[pos : pos + B]
        pos += B
        z = theta + phi[bp]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        cum = np.cumsum(e, axis=1)
        t = rs.uniforms(B * N).reshape(B, N) * cum[:, -1:]
        k = np.minimum((cum[:, None, :] <= t[:, :, None]).sum(axis=2), K - 1)  # (B, N)
        cnt = np.zeros((B, K))
        np.add.at(cnt, (np.repeat(rows, N, axis=1), k), 1.0)
        X = (cnt * corr[bp]).sum(axis=1).astype(int)
        A = np.where(corr[bp], adv_c[X][:, None], adv_w[X][:, None])
        g = cnt * A / (B * N)  # ascent direction on each prompt's logits (zero-sum: C = 0)
        g_th = g.sum(axis=0)
        if lr_prompt > 0:
            if adam:
                gl = np.zeros_like(m_phi)
                gl[bp] = -g
                m_phi[:] = b1 * m_phi + (1 - b1) * gl
                v_phi[:] = b2 * v_phi + (1 - b2) * gl * gl
                mh = m_phi / (1 - b1**step)
                vh = v_phi / (1 - b2**step)
                phi[:n_train] -= lr_prompt * mh / (np.sqrt(vh) + eps)
            else:
                phi[bp] += lr_prompt * g
        if lr_shared > 0:
            if adam:
                m_th[:] = b1 * m_th + (1 - b1) * (-g_th)
                v_th[:] = b2 * v_th + (1 - b2) * g_th * g_th
                theta -= (
                    lr_shared * (m_th / (1 - b1**step)) / (np.sqrt(v_th / (1 - b2**step)) + eps)
                )
            else:
                theta += lr_shared * g_th
        if step in log_steps:
            out.append(mu_all())
    return np.array(out)
