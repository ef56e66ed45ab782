"""Experiments behind every figure of fgrpo-theory (see :mod:`experiments.registry`)."""
