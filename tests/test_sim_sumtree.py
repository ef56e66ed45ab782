"""The sum-tree path (SGD + log-prob, only sampled logits move) against the dense path."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.runner import prepare

BASE = dict(
    K=40_000, logits="2.0x1,1.0x3999,0.0x36000", correct="0..3999",
    subsets={"rare": "1..3999", "head": "0..9"}, N=8, steps=300, seeds=3, log_every=50,
    pass_k=[1, 8],
)  # fmt: skip
METRICS = ["q_pos", "m_ret", "entropy", "mass_rare", "mass_head", "pass_at_1", "pass_at_8"]
COUNTS = ["groups", "active_frac", "tail_miss_rare", "tail_miss_head", "resamples"]


@pytest.mark.parametrize(
    "extra",
    [
        dict(lr=2.0),
        dict(lr=2.0, advantage="dr-grpo", gamma=1.0),
        dict(lr=1.0, dynamic_sampling="dapo", max_resamples=4, algo="dapo", renorm_every=7),
        dict(lr=60.0, N=5, advantage="rloo"),  # logits jump past the shift: tree rebuilds
        # small K that concentrates: descents switch between lanes and predicted branches, and
        # the all-correct groups' (zero-advantage) updates are skipped
        dict(
            K=6,
            logits="1.0x1,0.0x5",
            correct="0,1",
            subsets={"rare": "1", "head": "0"},
            lr=1.0,
            steps=400,
            seeds=4,
        ),
    ],
)
def test_sumtree_equals_dense(extra):
    """Same draws (the same inverse-CDF map of the same uniforms) and the same logit updates.

    Both paths add ``lr n_k A_k / N`` to sampled logits and nothing to the others (the dense path
    computes the normalizer term ``p_i C`` with ``C`` exactly 0 for zero-sum advantages), so the
    logits agree to the last bit up to the compiler's rounding of ``lr * (c / N)``; the metrics are
    then computed by the same function. Tolerance 1e-12 relative covers that rounding; a different
    draw or a moved unsampled logit changes the metrics at 1e-6 or more.
    """
    cfg = SimConfig(**{**BASE, **extra})
    tree = simulate(cfg.replace(backend="sumtree"))
    dense = simulate(cfg.replace(backend="dense", sampler="iid"))
    assert (tree.backend == "sumtree").all() and (dense.backend == "dense").all()
    for col in COUNTS:
        np.testing.assert_array_equal(tree[col].to_numpy(), dense[col].to_numpy(), err_msg=col)
    for col in METRICS:
        np.testing.assert_allclose(
            tree[col].to_numpy(), dense[col].to_numpy(), rtol=1e-12, atol=1e-15, err_msg=col
        )
    # the runs moved a lot, so the agreement is not trivial
    last = tree[tree.step == cfg.steps]
    assert (np.abs(last.q_pos.to_numpy() - tree[tree.step == 0].q_pos.to_numpy()) > 1e-3).all()


def test_auto_backend_selection():
    big = SimConfig(**BASE, lr=1.0)
    assert prepare(big)["backend"] == "sumtree"
    assert prepare(big.replace(optimizer="adam"))["backend"] == "dense"
    assert prepare(big.replace(rule="linear"))["backend"] == "dense"
    assert prepare(big.replace(inner_updates=2))["backend"] == "dense"
    small = big.replace(K=6, logits=None, correct=1, subsets={})
    assert prepare(small)["backend"] == "sumtree"  # cheaper than dense even at K = 6
    mid = small.replace(K=1000, N=100_000)
    assert prepare(mid)["backend"] == "dense"  # N log2 K = 1e6 > 4 (N + K)
    assert prepare(small.replace(sampler="sorted"))["backend"] == "dense"
    # verl gives a group of one A = r (not zero-sum): never the tree
    assert prepare(big.replace(advantage="verl", N=1))["backend"] == "dense"
    with pytest.raises(ValueError, match="backend must be dense for advantage 'verl'"):
        prepare(big.replace(advantage="verl", N=1, backend="sumtree"))


def test_tree_primitives_against_searchsorted():
    from fgrpo_theory.sim.sumtree import tree_build, tree_find, tree_set

    rng = np.random.default_rng(3)
    K = 1000
    z = rng.normal(size=K) * 3
    z[rng.choice(K, 50, replace=False)] = -1e4  # zero-weight leaves
    P = 1024
    tree = np.zeros(2 * P)
    m = tree_build(z, tree, P)
    w = np.exp(z - m)
    for _ in range(200):
        k = int(rng.integers(K))
        z[k] += rng.normal()
        w[k] = np.exp(z[k] - m)
        tree_set(tree, P, k, w[k])
    np.testing.assert_allclose(tree[1], w.sum(), rtol=1e-12)
    cum = np.cumsum(w)
    for u in np.concatenate([rng.random(2000), [0.0, 1 - 2**-53]]):
        t = u * tree[1]
        k = tree_find(tree, P, t)
        want = min(int(np.searchsorted(cum, t, side="right")), K - 1)
        while w[want] == 0:
            want -= 1
        assert w[k] > 0
        # the tree sums in a different order than cumsum: allow a neighbour at a rounding tie
        assert k == want or abs(cum[min(k, want)] - t) <= 1e-12 * tree[1]


def test_lane_descents_equal_the_branching_descent_leaf_for_leaf():
    """tree_find_lanes makes tree_find's comparisons and subtractions without branches: the same
    leaf for every target, also at prefix sums (exact ties), next to zero-weight leaves and at
    the top end; and both agree with the inverse CDF (searchsorted) away from rounding ties."""
    from fgrpo_theory.sim.sumtree import tree_build, tree_find, tree_find_lanes

    rng = np.random.default_rng(11)
    for K in (1, 2, 5, 6, 17, 300):
        P = 1
        while P < K:
            P *= 2
        z = rng.normal(size=K) * 4
        if K > 2:
            z[rng.choice(K, K // 3, replace=False)] = -1e4  # zero-weight leaves
        tree = np.zeros(2 * P)
        tree_build(z, tree, P)
        w = tree[P : P + K].copy()
        cum = np.cumsum(w)
        ties = np.concatenate([cum, np.nextafter(cum, 0), np.nextafter(cum, np.inf)])
        targets = np.concatenate([rng.random(500) * tree[1], ties, [0.0, tree[1] * (1 - 2**-53)]])
        targets = targets[(targets >= 0) & (targets < tree[1])]
        for lo in range(0, targets.size, 16):
            tb = targets[lo : lo + 16].copy()
            jb = np.zeros(16, np.int64)
            tree_find_lanes(tree, P, tb, jb, tb.size)
            want = [tree_find(tree, P, t) for t in targets[lo : lo + 16]]
            assert jb[: tb.size].tolist() == want
        for t in rng.random(200) * tree[1]:
            k = tree_find(tree, P, t)
            ref = min(int(np.searchsorted(cum, t, side="right")), K - 1)
            while w[ref] == 0:
                ref -= 1
            assert w[k] > 0
            assert k == ref or abs(cum[min(k, ref)] - t) <= 1e-12 * tree[1]


def test_leaf_ranges_hold_only_targets_that_descend_to_the_leaf():
    """tree_leaf_range(k) = [lo, hi]: every target in it descends to leaf k (checked at its
    ends, next to them and at random points inside), and for a leaf of non-negligible weight
    it covers all but ~1e-12 of the leaf's share of the targets."""
    from fgrpo_theory.sim.sumtree import tree_build, tree_find, tree_leaf_range, tree_set

    rng = np.random.default_rng(5)
    covered = 0
    for trial in range(200):
        K = int(rng.integers(1, 40))
        P = 1
        while P < K:
            P *= 2
        z = rng.normal(size=K) * rng.choice([0.5, 3.0, 20.0])
        if K > 2 and trial % 3 == 0:
            z[rng.choice(K, K // 3, replace=False)] = -1e4  # zero-weight leaves
        tree = np.zeros(2 * P)
        tree_build(z, tree, P)
        for _ in range(int(rng.integers(0, 20))):  # leaves moved as the kernel moves them
            k = int(rng.integers(K))
            tree_set(tree, P, k, tree[P + k] * float(np.exp(rng.normal() * 0.3)))
        for k in range(K):
            lo, hi = tree_leaf_range(tree, P, k)
            if lo > hi:
                assert tree[P + k] < 1e-9 * tree[1]  # only a negligible leaf has no range
                continue
            covered += 1
            assert hi - lo >= tree[P + k] * (1 - 1e-9) - 3e-12 * tree[1]
            for t in [lo, hi, *(lo + (hi - lo) * rng.random(30))]:
                assert tree_find(tree, P, t) == k
    assert covered > 1000
