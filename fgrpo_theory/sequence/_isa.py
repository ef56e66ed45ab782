"""Torch's CPU kernels pinned to one instruction set, so that the sequence rung gives the same
numbers on every x86-64 machine with AVX2, whatever newer instructions it also has.

PyTorch picks its CPU kernels for the machine it runs on: ATen's vectorized kernels
(``ATEN_CPU_CAPABILITY``), MKL's (``MKL_ENABLE_INSTRUCTIONS``) and oneDNN's
(``ONEDNN_MAX_CPU_ISA``). On a machine with AVX-512 they round differently from an AVX2-only
machine, and training amplifies the rounding: the quick preset's SFT model reached train pass@1
0.8188 on an AVX-512 machine (AMD EPYC) against 0.8617 on the AVX2 machine that made the
README's example, from the same seed and thread count. With the three variables set to AVX2 the
AVX-512 machine printed the README's numbers bit for bit (measured 27 Nov 2026; with ATen and MKL
pinned but not oneDNN it did not).

:func:`pin` sets them (each only where the user has not set it) when
:mod:`fgrpo_theory.sequence` is imported before torch, which is the case in a ``fgrpo-theory``
process; where torch was imported first the process keeps torch's own choice, and
:func:`label` says which kernels ran (it is part of the SFT checkpoint's cache key, so a
checkpoint trained with one set is never reused with the other). ``FGRPO_THEORY_TORCH_ISA=native``
turns the pin off (torch's own choice; numbers then depend on the machine's instruction sets).
Only x86-64 CPUs with AVX2 and FMA are pinned; other CPUs keep torch's choice.
"""

from __future__ import annotations

import os
import platform
import sys

from .._validate import fail

__all__ = ["ENV", "PORTABLE", "host_has_avx2", "pin", "label", "pinned"]

#: The switch: ``avx2`` (the default) or ``native``.
ENV = "FGRPO_THEORY_TORCH_ISA"
#: The variables set by :func:`pin` and their values.
PORTABLE = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}

#: The three variables as they stood when :func:`pin` ran (what torch read at its import).
_seen: dict[str, str] = {}


def _mode() -> str:
    raw = os.environ.get(ENV, "")
    mode = raw.strip().lower() or "avx2"
    if mode not in ("avx2", "native"):
        fail(ENV, raw, "'avx2' or 'native'")
    return mode


def host_has_avx2() -> bool:
    """Whether this is an x86-64 CPU with AVX2 and FMA (LLVM's reading of the host, as Numba
    has it). Without them nothing is pinned: ``ATEN_CPU_CAPABILITY=avx2`` is taken by ATen
    without a check, and its AVX2 kernels would stop the process on an illegal instruction."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        import llvmlite.binding as llb

        features = llb.get_host_cpu_features()
        return bool(features.get("avx2", False) and features.get("fma", False))
    except Exception:  # no reading of the CPU: not pinned (torch's own choice)
        return False


def pin() -> None:
    """Set :data:`PORTABLE` (where unset) unless torch is already imported, the switch says
    ``native`` or the CPU is not x86-64 with AVX2 and FMA; note what torch will read."""
    mode = _mode()
    if mode == "avx2" and "torch" not in sys.modules and host_has_avx2():
        for k, v in PORTABLE.items():
            os.environ.setdefault(k, v)
    _seen.update({k: os.environ.get(k, "") for k in PORTABLE})


def label() -> str:
    """Which CPU kernels torch runs in this process: ATen's capability as torch reports it, and
    the MKL and oneDNN limits it started with (empty: torch's own choice)."""
    import torch

    seen = _seen or {k: os.environ.get(k, "") for k in PORTABLE}
    cap = torch.backends.cpu.get_cpu_capability()
    return f"aten={cap};mkl={seen['MKL_ENABLE_INSTRUCTIONS']};onednn={seen['ONEDNN_MAX_CPU_ISA']}"


def pinned() -> bool:
    """Whether torch runs the pinned kernels in this process (:func:`label` says which)."""
    mkl, onednn = PORTABLE["MKL_ENABLE_INSTRUCTIONS"], PORTABLE["ONEDNN_MAX_CPU_ISA"]
    return label() == f"aten=AVX2;mkl={mkl};onednn={onednn}"
