"""The fgrpo estimator inside verl: through verl's compute_advantage on shuffled batches (equal
and unequal groups, groups of one, Dr.GRPO mode), loaded in a Ray actor by the documented
mechanisms, and verl's own rollout dump read by ``diagnose --from verl`` (issue 23)."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl.trainer.ppo.core_algos")
pytest.importorskip("ray")

torch.set_num_threads(1)


def _batch(sizes, seed, pair=(1.0, 0.0), length=3):
    """A DataProto of responses of groups of the given sizes, rows shuffled."""
    from verl import DataProto

    rng = np.random.default_rng(seed)
    uid = np.concatenate([[f"p{i}"] * n for i, n in enumerate(sizes)])
    score = np.where(rng.random(uid.size) < 0.45, pair[0], pair[1])
    perm = rng.permutation(uid.size)
    uid, score = uid[perm], score[perm]
    resp_len = rng.integers(1, length + 1, uid.size)
    mask = (np.arange(length)[None, :] < resp_len[:, None]).astype(np.float32)
    tlr = np.zeros((uid.size, length), dtype=np.float32)
    tlr[np.arange(uid.size), resp_len - 1] = score  # the outcome reward on the last token
    data = DataProto.from_dict(
        tensors={
            "token_level_rewards": torch.tensor(tlr),
            "response_mask": torch.tensor(mask),
        },
        non_tensors={"uid": uid.astype(object)},
    )
    return data, uid, score, mask


def _oracle(uid, score, gamma, norm, correct_value=1.0):
    """verl's GRPO advantage (Bessel std + 1e-6; a lone response: mean 0, std 1) times
    g = (1 - X/n)^gamma, in float64 from the scores."""
    out = np.zeros(score.size)
    for u in np.unique(uid):
        m = uid == u
        r = score[m]
        n = r.size
        mean, std = (r.mean(), r.std(ddof=1)) if n > 1 else (0.0, 1.0)
        a = (r - mean) / (std + 1e-6) if norm else r - mean
        g = (1.0 - np.mean(r == correct_value)) ** gamma
        out[m] = g * a
    return out


@pytest.mark.parametrize("sizes", [[4] * 6, [4, 1, 3, 8, 2, 1, 5]])
@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("gamma", [1.0, 0.5])
def test_compute_advantage_shuffled_batches(sizes, norm, gamma):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import compute_advantage

    import fgrpo_theory.integrations.verl  # noqa: F401  (registers "fgrpo")

    data, uid, score, mask = _batch(sizes, seed=len(sizes) + int(norm))
    cfg = OmegaConf.create(
        {"norm_adv_by_std_in_grpo": norm, "fgrpo_scheme": f"focal:gamma={gamma:g}"}
    )
    out = compute_advantage(
        data, adv_estimator="fgrpo", norm_adv_by_std_in_grpo=norm, num_repeat=4, config=cfg
    )
    adv = out.batch["advantages"].numpy()
    expected = _oracle(uid, score, gamma, norm)
    np.testing.assert_allclose(adv, expected[:, None] * mask, rtol=1e-5, atol=1e-6)
    assert np.abs(expected).max() > 0.3  # a test that can fail
    # gamma = 0 is verl's own GRPO, computed by verl on the same batch
    data0, *_ = _batch(sizes, seed=len(sizes) + int(norm))
    cfg0 = OmegaConf.create({"norm_adv_by_std_in_grpo": norm, "fgrpo_scheme": "focal:gamma=0"})
    mine = compute_advantage(data0, adv_estimator="fgrpo", config=cfg0).batch["advantages"]
    data1, *_ = _batch(sizes, seed=len(sizes) + int(norm))
    theirs = compute_advantage(
        data1, adv_estimator="grpo", norm_adv_by_std_in_grpo=norm, config=cfg0
    ).batch["advantages"]
    torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=1e-6)


def test_plus_minus_one_scores_threshold_and_refusal():
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    import fgrpo_theory.integrations.verl  # noqa: F401

    fn = get_adv_estimator_fn("fgrpo")
    data, uid, score, mask = _batch([4, 4, 4], seed=3, pair=(1.0, -1.0))
    adv, ret = fn(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        config={"fgrpo_scheme": "focal:gamma=1"},
    )
    np.testing.assert_allclose(adv.numpy(), _oracle(uid, score, 1.0, True)[:, None] * mask,
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    assert torch.equal(adv, ret)
    shaped = data.batch["token_level_rewards"] * 0.7 + 0.1  # non-binary scores
    with pytest.raises(ValueError) as e:
        fn(token_level_rewards=shaped, response_mask=data.batch["response_mask"],
           index=data.non_tensor_batch["uid"], config={})  # fmt: skip
    assert "\n" not in str(e.value) and "threshold" in str(e.value)
    adv_t, _ = fn(token_level_rewards=shaped, response_mask=data.batch["response_mask"],
                  index=data.non_tensor_batch["uid"], config={"fgrpo_threshold": 0.5})  # fmt: skip
    sc = shaped.sum(-1).numpy().astype(float)
    expected = _oracle(uid, sc, 1.0, True, correct_value=sc.max())
    np.testing.assert_allclose(adv_t.numpy(), expected[:, None] * mask, rtol=1e-5, atol=1e-6)
    # a table scheme of the registry, with its own advantage term
    adv_m, _ = fn(token_level_rewards=data.batch["token_level_rewards"],
                  response_mask=data.batch["response_mask"], index=data.non_tensor_batch["uid"],
                  config={"fgrpo_scheme": "maxrl"})  # fmt: skip
    assert torch.isfinite(adv_m).all() and adv_m.abs().max() > 0


def _actor_check():
    """Runs in a fresh Ray worker: verl's registry must know "fgrpo" without a user import."""
    import numpy as np
    import torch
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, get_adv_estimator_fn

    fn = get_adv_estimator_fn("fgrpo")
    r = torch.tensor([[1.0], [0.0], [0.0], [1.0]])
    adv, _ = fn(token_level_rewards=r, response_mask=torch.ones_like(r),
                index=np.array(["a", "a", "b", "b"], dtype=object),
                config={"fgrpo_scheme": "focal:gamma=1"})  # fmt: skip
    return sorted(ADV_ESTIMATOR_REGISTRY), adv.reshape(-1).tolist()


@pytest.mark.slow
def test_ray_actor_loads_the_estimator_by_env_and_by_entry_point():
    import sys

    import ray
    from ray import cloudpickle

    # the worker cannot import this test module: ship its functions by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=1, include_dashboard=False, address="local", _node_ip_address="127.0.0.1",
             log_to_driver=False)  # fmt: skip
    try:
        results = {}
        for how, env in [
            ("env", {"VERL_USE_EXTERNAL_MODULES": "fgrpo_theory.integrations.verl",
                     "VERL_USE_EXTERNAL_PLUGINS": "none"}),
            ("entry point", {"VERL_USE_EXTERNAL_PLUGINS": "auto"}),
            ("neither", {"VERL_USE_EXTERNAL_PLUGINS": "none"}),
        ]:  # fmt: skip

            @ray.remote(num_cpus=1, runtime_env={"env_vars": {**env, "OMP_NUM_THREADS": "1"}})
            class Worker:
                def check(self):
                    return _actor_check()

            w = Worker.remote()
            try:
                results[how] = ray.get(w.check.remote(), timeout=300)
            except Exception as e:  # the registry refuses an unknown name
                results[how] = repr(e)
            ray.kill(w)
    finally:
        ray.shutdown()
    # a group with X = 1 of 2: g = 1/2, verl's advantages +-0.7071 (Bessel std + 1e-6)
    for how in ("env", "entry point"):
        assert not isinstance(results[how], str), (how, results[how])
        names, adv = results[how]
        assert "fgrpo" in names
        np.testing.assert_allclose(adv, [0.5 * 0.7071064] + [-0.5 * 0.7071064] * 2 +
                                   [0.5 * 0.7071064], rtol=1e-5)  # fmt: skip
    assert "Unknown advantage estimator" in results["neither"]


def test_diagnose_reads_a_dump_written_by_verl(tmp_path, cli, capsys):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    rng = np.random.default_rng(0)
    mu = rng.beta(2, 5, 60)
    dump = tmp_path / "rollouts"
    for step in (1, 2, 3):
        inputs = [f"question {p}" for p in range(60) for _ in range(8)]
        scores = [float(rng.random() < mu[p]) for p in range(60) for _ in range(8)]
        RayPPOTrainer._write_generations(inputs, ["answer"] * len(inputs), [None] * len(inputs),
                                         scores, {"acc": scores}, str(dump), step)  # fmt: skip
    capsys.readouterr()  # verl prints "Dumped generations to ..."
    r = cli("diagnose", str(dump), "--from", "verl", "--bootstrap", "0", "--format", "csv")
    assert r.code == 0, r.err
    rep = pd.read_csv(io.StringIO(r.out))
    val = dict(zip(rep.quantity, rep.value, strict=False))
    assert val["groups"] == 180 and val["prompts"] == 60 and val["N"] == 8
    lines = [json.loads(x) for x in sorted(dump.glob("*.jsonl"))[0].read_text().splitlines()]
    assert len(lines) == 480
    # -1/+1 or shaped scores: refused with one line unless a threshold is given
    shaped = tmp_path / "shaped"
    shaped_scores = [0.2, 0.9, 1.0, 0.0, 0.7, 0.1, 0.3, 0.95]
    RayPPOTrainer._write_generations(["q1"] * 4 + ["q2"] * 4, ["a"] * 8, [None] * 8,
                                     shaped_scores, {}, str(shaped), 1)  # fmt: skip
    capsys.readouterr()
    bad = cli("diagnose", str(shaped), "--from", "verl")
    assert bad.code == 2 and "--threshold" in bad.err and "\n" not in bad.err.strip()
    ok = cli("diagnose", str(shaped), "--from", "verl", "--threshold", "0.5", "--bootstrap", "0")
    assert ok.code == 0, ok.err
    assert os.path.isdir(dump)
