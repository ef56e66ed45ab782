"""Torch's CPU kernels pinned to AVX2 by the sequence rung (fgrpo_theory/sequence/_isa.py).

Each case runs in a fresh interpreter (the pin acts only before torch is imported). The oracle
for "same numbers on every machine" is the README's quick-preset example, made on an AVX2-only
machine and checked bit for bit by tests/test_docs.py on whatever machine runs the suite; here:
which kernels torch reports, the switch, the user's own setting, the refusal, the cache key.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytest.importorskip("torch")


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


X86_AVX2 = platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= _cpu_flags()
needs_avx2 = pytest.mark.skipif(not X86_AVX2, reason="pinning applies to x86-64 with AVX2")

CAPABILITY = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY",
         "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "FGRPO_THEORY_TORCH_ISA")}  # fmt: skip
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120
    )


@needs_avx2
def test_the_sequence_rung_pins_avx2_before_torch_loads():
    r = _run("import fgrpo_theory.sequence.model; " + CAPABILITY)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "AVX2"
    r = _run(
        "import os, fgrpo_theory.sequence.sft as s; "
        "print(s.label(), os.environ['MKL_ENABLE_INSTRUCTIONS'], os.environ['ONEDNN_MAX_CPU_ISA'])"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["aten=AVX2;mkl=AVX2;onednn=AVX2", "AVX2", "AVX2"]


@needs_avx2
def test_native_keeps_torchs_own_choice_and_another_key():
    own = _run(CAPABILITY)
    native = _run(
        "import fgrpo_theory.sequence.model; " + CAPABILITY, FGRPO_THEORY_TORCH_ISA="native"
    )
    assert own.returncode == native.returncode == 0, native.stderr
    assert native.stdout == own.stdout  # exactly what torch picks without the package
    key = (
        "from fgrpo_theory.sequence.sft import sft_key, SFTConfig; "
        "from fgrpo_theory.sequence.model import ModelConfig; "
        "from fgrpo_theory.sequence.task import GridTask; "
        "print(sft_key(GridTask(L=4, n_train=4, n_test=2), ModelConfig(), SFTConfig(), 1))"
    )
    pinned, mine = _run(key), _run(key, FGRPO_THEORY_TORCH_ISA="native")
    assert pinned.returncode == mine.returncode == 0, mine.stderr
    if own.stdout.strip() != "AVX2":  # on an AVX-512 machine the two runs differ in kernels
        assert pinned.stdout != mine.stdout


@needs_avx2
def test_the_users_own_setting_wins_and_torch_imported_first_is_left_alone():
    r = _run("import fgrpo_theory.sequence.model; " + CAPABILITY, ATEN_CPU_CAPABILITY="default")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "DEFAULT"
    r = _run(
        "import torch, os, fgrpo_theory.sequence.model; "
        "print(os.environ.get('ATEN_CPU_CAPABILITY', '-'))"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "-"


def test_a_bad_switch_is_one_line_exit_2():
    exe = os.path.join(os.path.dirname(sys.executable), "fgrpo-theory")
    env = dict(os.environ, FGRPO_THEORY_TORCH_ISA="avx512")
    r = subprocess.run(
        [exe, "sequence", "--preset", "smoke"], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        "Error: FGRPO_THEORY_TORCH_ISA must be 'avx2' or 'native'; got 'avx512'\n"
    ), r.stderr
    with pytest.raises(ValueError, match="FGRPO_THEORY_TORCH_ISA must be 'avx2' or 'native'"):
        import fgrpo_theory.sequence._isa as isa

        old = os.environ.get(isa.ENV)
        os.environ[isa.ENV] = "avx512"
        try:
            isa.pin()
        finally:
            os.environ.pop(isa.ENV)
            if old is not None:
                os.environ[isa.ENV] = old


def test_a_cpu_without_avx2_or_fma_is_not_pinned(monkeypatch):
    """``ATEN_CPU_CAPABILITY=avx2`` is taken by ATen without a check: on a CPU without AVX2 the
    pin would end every run on an illegal instruction, so such a CPU keeps torch's choice."""
    import llvmlite.binding as llb

    from fgrpo_theory.sequence import _isa

    monkeypatch.setattr(_isa.platform, "machine", lambda: "aarch64")
    assert not _isa.host_has_avx2()
    monkeypatch.setattr(_isa.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(llb, "get_host_cpu_features", lambda: {"avx": True, "fma": True})
    assert not _isa.host_has_avx2()
    monkeypatch.setattr(llb, "get_host_cpu_features", lambda: {"avx2": True, "fma": True})
    assert _isa.host_has_avx2()
    monkeypatch.setattr(llb, "get_host_cpu_features", lambda: {"avx2": True})
    assert not _isa.host_has_avx2()
    for k in _isa.PORTABLE:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.delitem(sys.modules, "torch")  # as if torch were not loaded yet
    _isa.pin()
    assert not any(k in os.environ for k in _isa.PORTABLE)


@needs_avx2
def test_the_experiments_refuse_other_kernels(tmp_path):
    """The sequence experiments' full settings run only with the pinned kernels, so a table
    computed, cached or stored is the one an AVX2 machine computes."""
    exe = os.path.join(os.path.dirname(sys.executable), "fgrpo-theory")
    env = dict(os.environ, FGRPO_THEORY_TORCH_ISA="native",
               FGRPO_THEORY_CACHE_DIR=str(tmp_path / "cache"))  # fmt: skip
    r = subprocess.run(
        [exe, "figures", "sequence_group_size", "--recompute", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("Error: FGRPO_THEORY_TORCH_ISA must be unset or 'avx2'"), r.stderr
    assert r.stderr.count("\n") == 1 and "got 'native'" in r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
