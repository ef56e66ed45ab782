"""JAX implementation of the population model (theory.md section 13): the peer reference.

Written independently of the Numba kernel, the way a researcher who wants speed would write it in
JAX: the whole run is one ``jax.jit``-compiled function, the batches of every step are drawn up
front (one shuffle per epoch: ``argsort`` of counter-based uniforms), ``jax.lax.scan`` runs the
steps between two logged steps inside a ``scan`` over logged steps, ``jax.vmap`` runs the seeds,
and the rollouts come from a counter-based SplitMix64 stream (``reference_jax.uniforms``), so no
key splitting or state threading costs time. Every array is dense.

Model (the population simulator's, ``fgrpo_theory.population``): the logits of prompt ``p`` are
``theta + phi_p``; each step takes the next ``B`` train prompts of the epoch's order (a new
shuffle when fewer than ``B`` are left), draws ``N`` rollouts per prompt by inverse CDF from its
softmax, and follows the log-prob surrogate ``(1 / (B N)) sum_b sum_i A_bi log p_b(a_bi)`` with the
per-X advantage tables ``adv_c[X]`` / ``adv_w[X]`` (X = correct rollouts of the group); prompt p's
ascent direction is ``(c - p sum(c)) / (B N)`` with ``c_k = n_k A_k``, ``phi_p`` receives it and
theta the sum over the batch. SGD, or Adam (PyTorch's formulas) with one optimizer over theta and
every train prompt's phi (prompts outside the batch have zero gradient and move through their
moments). One update per batch (ratio 1), no weight decay. At every logged step (0, ``log_every``,
..., ``steps``): per prompt (train then test) the success ``mu = sum_k p_k correct_k``, the rare
correct mass ``tau``, the entropy and ``sum of -log p`` over the rare correct strategies.

``dtype`` is ``"float64"`` or ``"float32"`` (every float array in that type; the generator works
in 64-bit integers, so ``jax_enable_x64`` is on). Importing this module does not import JAX.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

__all__ = ["AVAILABLE", "run_population", "metrics", "first_step_mu"]

AVAILABLE = importlib.util.find_spec("jax") is not None

_ORDER_SALT = 0x5851F42D4C957F2D  # the batch-order stream's key is mix(key ^ salt)


@functools.cache
def _rj():
    """``reference_jax`` (the generator and dtype helpers), loaded by path."""
    name = "_fgrpo_bench_reference_jax"
    import sys

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).resolve().parent / "reference_jax.py"
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def metrics(theta, phi, correct, rare):
    """Per-prompt ``(mu, tau, entropy, nll_rare_sum)``, each of shape ``phi.shape[:-1]``."""
    jax = _rj()._jax()
    jnp = jax.numpy
    lp = jax.nn.log_softmax(theta + phi, axis=-1)
    p = jnp.exp(lp)
    zero = jnp.zeros((), p.dtype)
    mu = jnp.sum(jnp.where(correct, p, zero), axis=-1)
    tau = jnp.sum(jnp.where(rare, p, zero), axis=-1)
    ent = -jnp.sum(p * lp, axis=-1)
    nll = -jnp.sum(jnp.where(rare, lp, zero), axis=-1)
    return jnp.stack([mu, tau, ent, nll], axis=-1)


def _batches(okey, n_train: int, B: int, steps: int):
    """The train prompts of every step, ``(steps, B)``: epochs of ``n_train // B`` batches,
    each epoch a fresh permutation (argsort of uniforms of the order stream)."""
    rj = _rj()
    jnp = rj._jax().numpy
    spe = n_train // B
    n_ep = -(-steps // spe)
    c = jnp.arange(n_ep * n_train, dtype=jnp.uint64) + jnp.uint64(1)
    u = rj.uniforms(okey, c, jnp.float64).reshape(n_ep, n_train)
    perm = jnp.argsort(u, axis=1)[:, : spe * B]
    return perm.reshape(n_ep * spe, B)[:steps]


def _counts(z, u, K: int):
    """Rollout counts ``(B, K)`` of inverse-CDF draws at uniforms ``u (B, N)`` from softmax(z)."""
    jax = _rj()._jax()
    jnp = jax.numpy
    e = jnp.exp(z - jnp.max(z, axis=1, keepdims=True))
    cdf = jnp.cumsum(e, axis=1)
    t = u * cdf[:, -1:]
    idx = jax.vmap(lambda c, x: jnp.searchsorted(c, x, side="right"))(cdf, t)
    idx = jnp.minimum(idx, K - 1)
    rows = jnp.broadcast_to(jnp.arange(z.shape[0])[:, None], idx.shape)
    cnt = jnp.zeros(z.shape, z.dtype).at[rows, idx].add(1)
    return cnt, e / cdf[:, -1:]


@functools.cache
def _runner(P_all: int, K: int, n_train: int, B: int, N: int, steps: int, log_every: int,
            seeds: int, opt: str, dtype_name: str):  # fmt: skip
    """Compiled ``(keys, theta0, phi0, correct, rare, adv_c, adv_w, lr_s, lr_p) -> out`` with
    ``out[seeds, n_log, P_all, 4]``."""
    rj = _rj()
    jax = rj._jax()
    jnp = jax.numpy
    dt = rj._dtype(dtype_name)
    n_chunks = steps // log_every
    adam = opt == "adam"
    b1, b2, eps = 0.9, 0.999, 1e-8
    inv_bn = 1.0 / (B * N)

    def one_seed(key, theta0, phi0, correct, rare, adv_c, adv_w, lr_s, lr_p):
        okey = rj._mix(key ^ jnp.uint64(_ORDER_SALT))
        bps = _batches(okey, n_train, B, steps).reshape(n_chunks, log_every, B)
        corr_f = correct.astype(dt)

        def step(carry, xs):
            theta, phi, mth, vth, mph, vph = carry
            t, bp = xs
            c = t.astype(jnp.uint64) * jnp.uint64(B * N) + jnp.arange(
                1, B * N + 1, dtype=jnp.uint64
            )
            u = rj.uniforms(key, c, dt).reshape(B, N)
            z = theta + phi[bp]
            cnt, p = _counts(z, u, K)
            X = jnp.sum(cnt * corr_f[bp], axis=1).astype(jnp.int32)
            A = jnp.where(correct[bp], adv_c[X][:, None], adv_w[X][:, None])
            cA = cnt * A
            g = (cA - p * jnp.sum(cA, axis=1, keepdims=True)) * dt(inv_bn)  # ascent, (B, K)
            gth = jnp.sum(g, axis=0)
            if not adam:
                return (theta + lr_s * gth, phi.at[bp].add(lr_p * g), mth, vth, mph, vph), None
            tt = (t + 1).astype(dt)
            bc1 = 1 - dt(b1) ** tt
            bc2 = 1 - dt(b2) ** tt

            def adam_step(x, m, v, grad, lr):
                m = b1 * m + (1 - b1) * grad
                v = b2 * v + (1 - b2) * grad * grad
                return x - lr * (m / bc1) / (jnp.sqrt(v / bc2) + eps), m, v

            theta, mth, vth = adam_step(theta, mth, vth, -gth, lr_s)
            G = jnp.zeros((n_train, K), dt).at[bp].set(-g)
            ph, mph, vph = adam_step(phi[:n_train], mph, vph, G, lr_p)
            return (theta, phi.at[:n_train].set(ph), mth, vth, mph, vph), None

        def chunk(carry, xs):
            carry, _ = jax.lax.scan(step, carry, xs)
            return carry, metrics(carry[0], carry[1], correct, rare)

        ts = jnp.arange(steps, dtype=jnp.int64).reshape(n_chunks, log_every)
        shape_m = (n_train, K) if adam else (1, 1)
        zk = jnp.zeros(K if adam else 1, dt)
        carry = (theta0, phi0, zk, zk, jnp.zeros(shape_m, dt), jnp.zeros(shape_m, dt))
        _, logged = jax.lax.scan(chunk, carry, (ts, bps))
        first = metrics(theta0, phi0, correct, rare)
        return jnp.concatenate([first[None], logged], axis=0)

    run = jax.vmap(one_seed, in_axes=(0, None, None, None, None, None, None, None, None))
    return jax.jit(run)


def run_population(theta0, phi0, correct, rare, n_train, B, N, steps, log_every, adv_c, adv_w,
                   keys, opt="adam", lr_shared=0.01, lr_prompt=0.01, dtype="float64"):  # fmt: skip
    """Train one run per key (``keys``: uint64 array); returns ``out[seeds, n_log, P_all, 4]``
    (mu, tau, entropy, nll_rare_sum at steps 0, log_every, ..., steps) as a NumPy array (the
    conversion waits for the computation, so a timing of this call is a timing of the run)."""
    rj = _rj()
    jnp = rj._jax().numpy
    if opt not in ("sgd", "adam"):
        raise ValueError(f"opt must be 'sgd' or 'adam'; got {opt!r}")
    if steps % log_every:
        raise ValueError(f"steps ({steps}) must be a multiple of log_every ({log_every})")
    dt = rj._dtype(dtype)
    phi = jnp.asarray(np.asarray(phi0, np.float64), dtype=dt)
    th = jnp.asarray(np.asarray(theta0, np.float64), dtype=dt)
    corr = np.asarray(correct).astype(bool)
    rr = np.asarray(rare).astype(bool) & corr
    keys = np.asarray(keys, dtype=np.uint64)
    P_all, K = phi.shape
    fn = _runner(int(P_all), int(K), int(n_train), int(B), int(N), int(steps), int(log_every),
                 int(keys.shape[0]), opt, dtype)  # fmt: skip
    out = fn(jnp.asarray(keys), th, phi, jnp.asarray(corr), jnp.asarray(rr),
             jnp.asarray(adv_c, dtype=dt), jnp.asarray(adv_w, dtype=dt), dt(lr_shared),
             dt(lr_prompt))  # fmt: skip
    return np.asarray(out)


def first_step_mu(theta0, phi0, correct, rare, n_train, B, N, adv_c, adv_w, keys, opt, lr_shared,
                  lr_prompt):  # fmt: skip
    """Per-prompt success after one step, ``(seeds, P_all)`` (for the Monte Carlo check)."""
    out = run_population(theta0, phi0, correct, rare, n_train, B, N, 1, 1, adv_c, adv_w, keys,
                         opt, lr_shared, lr_prompt)  # fmt: skip
    return out[:, 1, :, 0]
