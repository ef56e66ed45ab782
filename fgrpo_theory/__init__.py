"""fgrpo-theory: the theory of F-GRPO (arXiv 2602.06717) as closed forms, a simulator and figures.

Importing this package is cheap: it never imports or compiles Numba code. The simulator lives in
:mod:`fgrpo_theory.sim` and is imported on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"
