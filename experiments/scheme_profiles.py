"""Section 15: difficulty profile H(mu; N) and pass@k weights c_1..c_N of every registered
binary group scheme at N = 8 (rewards 1/0), plus focal gamma = 0.5 and 1 on GRPO.

Registry entries whose tables coincide at N = 8 share one curve (e.g. verl = verl-vectorized).
H from :func:`fgrpo_theory.schemes.theory.difficulty_profile`, the weights from
:func:`~fgrpo_theory.schemes.theory.passk_weights` (exact rational arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import footnote

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Sec. 15: difficulty profile H(mu) and pass@k weights of every scheme, N = 8"
IN_PAPER = False
COST_SECONDS = 2.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    N: int = 8
    r_correct: float = 1.0
    r_incorrect: float = 0.0
    focal_gammas: tuple[float, ...] = (0.5, 1.0)
    points: int = 201


PARAMS = Params()


def _schemes(params: Params) -> list[tuple[str, str]]:
    """(label, spec): every registry entry with per-X tables, identical tables merged, then
    focal on GRPO."""
    from fgrpo_theory.schemes import SCHEMES, parse_scheme

    groups: dict[bytes, list[str]] = {}
    for name, d in SCHEMES.items():
        if d.role != "advantage" or d.table is None or d.needs_logprobs:
            continue
        a_c, a_w = parse_scheme(name).tables(params.N, params.r_correct, params.r_incorrect)
        groups.setdefault(np.concatenate([a_c, a_w]).tobytes(), []).append(name)
    out = [(" = ".join(names), names[0]) for names in groups.values()]
    out += [(f"grpo+focal:gamma={g:g}", f"grpo+focal:gamma={g:g}") for g in params.focal_gammas]
    return out


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Long table: ``panel`` (profile / weights), ``scheme`` (label), ``spec``, ``x`` (mu or k),
    ``value`` (H or c_k). Closed forms: fast gives the same table."""
    from fgrpo_theory.schemes import parse_scheme
    from fgrpo_theory.schemes.theory import difficulty_profile, passk_weights

    mu = np.linspace(0.0, 1.0, params.points)
    k = np.arange(1, params.N + 1, dtype=float)
    frames = []
    for label, spec in _schemes(params):
        s = parse_scheme(spec)
        H = difficulty_profile(s, params.N, mu, params.r_correct, params.r_incorrect)
        c = passk_weights(s, params.N, params.r_correct, params.r_incorrect)
        frames.append(
            pd.DataFrame({"panel": "profile", "scheme": label, "spec": s.spec, "x": mu, "value": H})
        )
        frames.append(
            pd.DataFrame({"panel": "weights", "scheme": label, "spec": s.spec, "x": k, "value": c})
        )
    df = pd.concat(frames, ignore_index=True)
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Left: H(mu); right: c_k against k (markers joined by thin lines); one color and line
    style per scheme (Okabe-Ito palette times four line styles)."""
    from fgrpo_theory.plotting import LINESTYLES, PALETTE, new_figure

    fig = new_figure(7.0, 3.3)
    ax_h, ax_c = fig.subplots(1, 2)
    labels = list(dict.fromkeys(df["scheme"]))
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    for i, label in enumerate(labels):
        color = PALETTE[i % len(PALETTE)]
        style = LINESTYLES[(i // len(PALETTE)) % len(LINESTYLES)]
        d = df[df["scheme"] == label]
        h = d[d["panel"] == "profile"]
        c = d[d["panel"] == "weights"]
        ax_h.plot(h["x"], h["value"], linestyle=style, color=color, lw=1.1, label=label)
        ax_c.plot(
            c["x"],
            c["value"],
            linestyle=style,
            color=color,
            lw=0.7,
            marker=markers[i % len(markers)],
            ms=3,
        )
    ax_h.set_xlim(0, 1)
    ax_h.set_xlabel(r"success probability $\mu$")
    ax_h.set_ylabel(r"difficulty profile $H(\mu; N)$")
    ax_h.set_title(r"expected update $= H(\mu; N)\,\nabla\mu$")
    ax_c.axhline(0.0, color="#999999", lw=0.5)
    ax_c.set_xlabel("k")
    ax_c.set_ylabel(r"pass@k weight $c_k$")
    ax_c.set_xticks(range(1, params.N + 1))
    ax_c.set_title(r"objective $\sum_k c_k\,$pass@k")
    fig.legend(loc="center left", bbox_to_anchor=(1.0, 0.55), fontsize=6, frameon=False)
    footnote(
        fig,
        f"docs/theory.md section 15: N = {params.N}, rewards {params.r_correct:g}/"
        f"{params.r_incorrect:g}, registry defaults (w-reinforce lambda = 0.1, pkpo k = 4, "
        "loo-1); H(mu; N) = E[a_c(1+Y)] - E[a_w(Y)], Y ~ Binomial(N-1, mu); "
        "H = sum_k c_k k (1-mu)^(k-1), c_k in exact rational arithmetic.",
        width=120,
    )
    return fig
