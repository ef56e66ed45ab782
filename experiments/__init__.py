"""Experiments behind every figure of fgrpo-theory, installed as ``fgrpo_theory_experiments``.

One module per figure (see ``README.md`` in this folder and :mod:`.registry`).
"""
