"""FGRPOTrainer inside TRL's GRPOTrainer: the advantages the loss receives are the vanilla
advantages times the scheme's weight, recomputed here from the completions (issue 23).

Runs tests/trl_worker.py (a random Qwen2 model of hidden size 16, a local word-level
tokenizer, CPU) on 1 process (scale_rewards group / batch / none, a scheme with its own
advantage term) and on 2 processes with torchrun (gloo), where groups of 4 straddle the
processes and evaluation groups of num_generations_eval = 2 do too. Two reward functions
(correctness 0/1 and a format bonus weighted 0.5); X counts the correctness reward >= 0.5.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

WORKER = Path(__file__).with_name("trl_worker.py")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_DISABLED="true",
               ACCELERATE_USE_CPU="true", CUDA_VISIBLE_DEVICES="")  # fmt: skip
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(out: Path, configs: list[str], nproc: int) -> None:
    if nproc == 1:
        cmd = [sys.executable, str(WORKER), str(out), *configs]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
               str(WORKER), str(out), *configs]  # fmt: skip
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=900, cwd=out)
    assert r.returncode == 0, r.stderr[-4000:]


def _load(run: Path) -> list[dict]:
    ranks = sorted(run.glob("rank*.json"))
    data = [json.loads(p.read_text()) for p in ranks]
    assert data and len(data) == data[0]["world"]
    return data


def _expected(data: list[dict], scale: str, gamma: float, n_of_k) -> tuple[dict, dict, bool]:
    """(k, prompt, ids) -> expected advantage; (k, prompt) -> X; whether a group straddled."""
    calls: dict[int, list] = defaultdict(list)
    for rank, d in enumerate(data):
        for rec in d["rewards"]:
            calls[rec["k"]].append((rank, rec))
    exp, xs, straddle = {}, {}, False
    for k, recs in calls.items():
        recs.sort(key=lambda t: t[0])  # processes in order: the gathered batch
        prompts = [p for _, r in recs for p in r["prompts"]]
        ids = [tuple(c) for _, r in recs for c in r["ids"]]
        owner = [rank for rank, r in recs for _ in r["ids"]]
        r1 = np.array([1.0 if sum(c) % 2 == 0 else 0.0 for c in ids])
        r2 = np.array([0.1 * (len(c) % 4) for c in ids])
        reward = r1 + 0.5 * r2
        members: dict[str, list[int]] = defaultdict(list)
        for i, p in enumerate(prompts):
            members[p].append(i)
        n = n_of_k(k)
        assert all(len(m) == n for m in members.values()), (k, members)
        batch_std = reward.std(ddof=1)
        for p, m in members.items():
            m = np.array(m)
            straddle |= len({owner[i] for i in m}) > 1
            r = reward[m]
            a = r - r.mean()
            if scale == "group":
                a = a / (r.std(ddof=1) + 1e-4)
            elif scale == "batch":
                a = a / (batch_std + 1e-4)
            x = int(r1[m].sum())
            g = (1.0 - x / n) ** gamma
            xs[(k, p)] = x
            for i, ai in zip(m, a, strict=True):
                exp[(k, p, ids[i])] = g * ai
    return exp, xs, straddle


def _check(run: Path, scale: str, gamma: float, *, nproc: int) -> dict:
    data = _load(run)
    eval_ks = {rec["k"] for d in data for rec in d["loss"] if rec["mode"] == "eval"}
    exp, xs, straddle = _expected(data, scale, gamma, lambda k: 2 if k in eval_ks else 4)
    got = [rec for d in data for rec in d["loss"]]
    assert len(got) > 20 and {r["mode"] for r in got} == {"train", "eval"}
    seen = set()
    for rec in got:
        key = (rec["k"], rec["prompt"], tuple(rec["ids"]))
        assert key in exp, key
        seen.add(key)
        # float32 in TRL against float64 here
        assert rec["adv"] == pytest.approx(exp[key], rel=2e-5, abs=2e-5), (key, rec["adv"])
    assert seen == set(exp)  # every completion reached the loss
    # some groups are down-weighted and some advantages are non-zero: the test can fail
    assert any(abs(v) > 0.1 for v in exp.values())
    assert nproc == 1 or straddle
    metrics = [h for d in data for h in d["metrics"]]
    assert any("fgrpo/weight_mean" in h for h in metrics)
    assert any("eval_fgrpo/frac_downweighted" in h for h in metrics)
    return xs


@pytest.mark.slow
def test_trl_one_process_every_scale_rewards_mode(tmp_path):
    configs = ["group:focal:gamma=1", "batch:focal:gamma=0.5", "none:focal:gamma=2",
               "group:trl+focal:gamma=1"]  # fmt: skip
    _run(tmp_path, configs, 1)
    xs = [
        _check(tmp_path / str(i), scale, gamma, nproc=1)
        for i, (scale, gamma) in enumerate(
            [("group", 1.0), ("batch", 0.5), ("none", 2.0), ("group", 1.0)]
        )  # fmt: skip
    ]
    # the callback's log: one row per training group with its X
    rows = [json.loads(line) for line in (tmp_path / "0" / "groups.jsonl").read_text().splitlines()]
    assert rows and all(r["mode"] == "train" and r["n"] == 4 for r in rows)
    x_of_prompt = {p: x for (_k, p), x in xs[0].items()}
    assert all(x_of_prompt[r["prompt"]] == r["n_correct"] for r in rows)
    assert len(rows) == sum(1 for (_k, p) in xs[0] if not p.endswith("w38 w39"))


@pytest.mark.slow
def test_trl_two_processes_groups_straddle(tmp_path):
    _run(tmp_path, ["group:focal:gamma=1"], 2)
    _check(tmp_path / "0", "group", 1.0, nproc=2)


def test_group_log_callback_read_by_diagnose_from_trl(tmp_path, cli):
    from fgrpo_theory.integrations.trl import GroupLogCallback

    rng = np.random.default_rng(5)
    mu = rng.beta(2, 5, 50)
    log = tmp_path / "groups.jsonl"
    cb = GroupLogCallback(log)
    for step in range(4):
        rows = [dict(prompt=f"q{p}", step=step, n=8, n_correct=int(rng.binomial(8, mu[p])),
                     weight=1.0, mode="train", scheme="grpo+focal:gamma=1")
                for p in range(50)]  # fmt: skip
        rows.append(dict(rows[0], mode="eval"))  # evaluation groups are left out by default
        cb.add_rows(rows, is_main_process=True)
        cb.flush()
    cb.add_rows(rows, is_main_process=False)  # other processes write nothing
    cb.flush()
    assert len(log.read_text().splitlines()) == 200
    r = cli("diagnose", str(log), "--from", "trl", "--bootstrap", "0", "--format", "csv")
    assert r.code == 0, r.err
    rep = pd.read_csv(io.StringIO(r.out))
    val = dict(zip(rep.quantity, rep.value, strict=False))
    assert val["groups"] == 200 and val["prompts"] == 50 and val["N"] == 8
