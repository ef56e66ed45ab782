"""Sweeps of simulator configs: TOML loading, grid expansion and config hashes.

A *sweep* is a mapping of :class:`~fgrpo_theory.sim.config.SimConfig` fields in which any value
may be a list; :func:`expand_grid` turns it into the list of configs of the Cartesian product. A
TOML file holds either. :func:`config_hash` names a config's result files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import _spec
from .._validate import fail
from .config import SimConfig

__all__ = ["expand_grid", "grid_axes", "load_sweep", "load_config", "config_hash"]

_FIELDS = {f.name for f in dataclasses.fields(SimConfig)} | {"rewards"}
# a plain list is the value; a list of lists is a sweep
_LIST_FIELDS = {"log_steps", "pass_k", "thresholds", "controls", "ds_range"}


def _check_keys(d: Mapping[str, Any], where: str) -> None:
    for k in d:
        if k not in _FIELDS:
            fail(where, k, "a SimConfig field (" + ", ".join(sorted(_FIELDS)) + ")")


def grid_axes(
    cls: type, sweep: Mapping[str, Any], list_fields: Iterable[str], unswept: Iterable[str] = ()
) -> tuple[list[str], list[list[Any]]]:
    """The axes of a sweep over the fields of dataclass ``cls``, in declaration order.

    A list value of a field is an axis; a field whose value is itself a list (``list_fields``)
    is swept only when given a list of lists; ``unswept`` fields are never swept. Shared by the
    simulator's and the population's sweeps, so both read a sweep the same way.
    """
    list_fields, unswept = set(list_fields), set(unswept)
    names, axes = [], []
    for f in dataclasses.fields(cls):
        if f.name not in sweep:
            continue
        v = sweep[f.name]
        if f.name in list_fields:
            swept = isinstance(v, list) and len(v) > 0 and all(isinstance(x, list) for x in v)
        else:
            swept = isinstance(v, list | tuple) and f.name not in unswept
        if swept and len(v) == 0:
            fail(f.name, "[]", "a non-empty list")
        names.append(f.name)
        axes.append(list(v) if swept else [v])
    return names, axes


def expand_grid(sweep: Mapping[str, Any] | SimConfig | Iterable[SimConfig]) -> list[SimConfig]:
    """Expand a sweep (fields whose values may be lists) into configs of the Cartesian product.

    The order is that of ``itertools.product`` over the fields in declaration order, the last
    field varying fastest. A :class:`SimConfig` gives itself; an iterable of configs is returned
    as a list. ``subsets`` is never swept; ``log_steps``/``pass_k`` are swept when given a list of
    lists.
    """
    if isinstance(sweep, SimConfig):
        return [sweep]
    if not isinstance(sweep, Mapping):
        out = list(sweep)
        for c in out:
            if not isinstance(c, SimConfig):
                fail("sweep", c, "a SimConfig")
        return out
    _check_keys(sweep, "sweep field")
    sweep = _split_rewards(sweep)
    names, axes = grid_axes(SimConfig, sweep, _LIST_FIELDS, unswept=("subsets",))
    if "_rewards" in sweep:  # a list of reward pairs: one axis, unpacked per config
        names.append("_rewards")
        axes.append(list(sweep["_rewards"]))
    out = []
    for combo in itertools.product(*axes):
        kw = dict(zip(names, combo, strict=True))
        if "_rewards" in kw:
            kw["r_correct"], kw["r_incorrect"] = kw.pop("_rewards")
        out.append(SimConfig(**kw))
    return out


def _reward_pair(v: Any) -> tuple[Any, Any]:
    if not isinstance(v, list | tuple) or len(v) != 2:
        fail("rewards", v, "a pair [R_c, R_w] such as [1.0, -1.0]")
    return v[0], v[1]


def _split_rewards(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """Turn the ``rewards = [R_c, R_w]`` key (or a list of pairs, a sweep) into the two fields."""
    d = dict(sweep)
    if "rewards" not in d:
        return d
    v = d.pop("rewards")
    if "r_correct" in d or "r_incorrect" in d:
        fail("rewards", v, "given once (not together with r_correct / r_incorrect)")
    if isinstance(v, list | tuple) and v and all(isinstance(x, list | tuple) for x in v):
        d["_rewards"] = [_reward_pair(x) for x in v]
    else:
        d["r_correct"], d["r_incorrect"] = _reward_pair(v)
    return d


def load_sweep(path: str | Path) -> dict[str, Any]:
    """Read a TOML config/sweep file into a dict of fields (unknown keys are errors)."""
    p = Path(path)
    if not p.is_file():
        fail("config", str(path), "an existing TOML file")
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        fail("config", str(path), f"valid TOML ({' '.join(str(e).split())})")
    except UnicodeDecodeError as e:
        fail("config", str(path), f"a UTF-8 text file (byte {e.start} is not UTF-8)")
    _check_keys(data, f"config key in {p.name}")
    return data


def load_config(path: str | Path) -> list[SimConfig]:
    """Load a TOML file and expand it (list-valued fields form a grid): always a list."""
    return expand_grid(load_sweep(path))


#: Fields left out of :func:`config_hash` while empty (added after hashes were in use).
_HASH_OMIT_IF_EMPTY = ("thresholds", "controls", "scheme")
#: Fields left out of :func:`config_hash` while at their default (added after hashes were in use).
_HASH_OMIT_IF_DEFAULT = {"precision": "float64"}


def config_hash(cfg: SimConfig) -> str:
    """Stable 16-hex-digit hash of a config's fields and the package version.

    A logit file enters by the SHA-256 of its bytes, so editing the file changes the hash.
    """
    from .. import __version__

    d = cfg.to_dict()
    for k in _HASH_OMIT_IF_EMPTY:  # fields added later: an empty value keeps the older hashes
        if not d[k]:
            del d[k]
    for k, v in _HASH_OMIT_IF_DEFAULT.items():
        if d[k] == v:
            del d[k]
    if _spec.is_logit_file(cfg.logits):
        d["logits_file_sha256"] = hashlib.sha256(Path(cfg.logits.strip()).read_bytes()).hexdigest()
    payload = json.dumps({"version": __version__, "config": d}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
