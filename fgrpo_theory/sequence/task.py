"""The grid-route task family of the sequence rung: prompts, answers and a verifier.

A prompt is a small grid puzzle: walk from a start cell to a goal cell that lies ``a`` steps
away horizontally (direction ``h``, left or right) and ``b = L - a`` steps vertically (direction
``v``, up or down), around the blocked cells (walls) it lists. An answer is a sequence of exactly
``L`` moves from {U, D, L, R}; the answer space of every prompt is all ``4**L`` such sequences
(16,384 at the default ``L = 7``). The verifier accepts an answer iff it reaches the goal without
entering a wall. The goal is ``L`` steps away (Manhattan), so a correct answer is a shortest route:
it uses only the moves ``h`` and ``v``, exactly ``a`` of them ``h``, and it stays inside the
(a+1) x (b+1) box between start and goal, where the walls lie.

What "rare" means. A route's number of *turns* is the number of adjacent moves that differ. A
correct answer is **rare** when it has at least ``rare_turns`` turns (default 3), **common**
otherwise (the one- and two-turn routes that go straight for as long as the walls allow). The
biased SFT teacher (:func:`teacher_probabilities`) gives a correct answer a weight
``exp(-beta * turns)``, so the routes that need many turns are the ones it rarely shows.

Variants. ``multi``: every prompt has at least ``min_correct`` correct answers, at least one rare
and at least one common one. ``single``: walls leave exactly one correct route (the setting of the
paper's Maze task); such prompts have no rare set. Prompts are distinct within a task and the
held-out split shares none with the train split.

Prompt tokens (fixed length ``max_walls + 5``): ``BOS h v A_a W... PAD... SEP`` where
``A_a`` is the count token of ``a`` and each wall is one token naming its cell (x, y) of the box
(x horizontal steps and y vertical steps from the start), sorted, padded with PAD.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

import numpy as np

from .._validate import fail

__all__ = [
    "MOVES",
    "MAX_ANSWERS",
    "GridTask",
    "Prompts",
    "make_prompts",
    "answer_index",
    "answer_tokens",
    "turns",
    "route_is_correct",
    "teacher_probabilities",
]

#: Move tokens: 0 U (y+1), 1 D (y-1), 2 L (x-1), 3 R (x+1). They are the first four token ids and
#: the policy's output alphabet.
MOVES = ("U", "D", "L", "R")
U, D, LEFT, RIGHT = 0, 1, 2, 3
BOS, SEP, PAD = 4, 5, 6
_COUNT0 = 7  # count token of a = 0; a = 0..L use _COUNT0 .. _COUNT0 + L
#: Largest answer space a prompt may have (answers are enumerated exactly).
MAX_ANSWERS = 20_000
#: Largest number of prompts x answers held as a dense correctness mask.
MAX_MASK = 200_000_000
#: Draws in a row without a new prompt after which the task is refused (too few prompts exist).
_MAX_MISSES = 20_000


@dataclass(frozen=True)
class GridTask:
    """A task family of grid routes (see the module docstring). Validated on construction.

    Parameters
    ----------
    L : int
        Answer length in moves; the answer space has ``4**L`` answers (L <= 7: <= 20,000).
    variant : {"multi", "single"}
        Several correct answers per prompt (with rare and common ones) or exactly one.
    n_train, n_test : int
        Train and held-out prompts (distinct).
    max_walls : int
        Most walls a prompt lists (its prompt has ``max_walls + 5`` tokens).
    min_correct : int
        ``multi``: fewest correct answers a prompt has.
    rare_turns : int
        A correct answer with at least this many turns is rare.
    seed : int
        Seed of the prompt draw.
    """

    L: int = 7
    variant: str = "multi"
    n_train: int = 64
    n_test: int = 64
    max_walls: int = 6
    min_correct: int = 4
    rare_turns: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("L", "n_train", "n_test", "max_walls", "min_correct", "rare_turns", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                fail(name, v, "an integer")
        if not 2 <= self.L or 4**self.L > MAX_ANSWERS:
            fail("L", self.L, f"in [2, 7] (4**L answers, at most {MAX_ANSWERS:,})")
        if self.variant not in ("multi", "single"):
            fail("variant", self.variant, "'multi' or 'single'")
        if self.n_train < 1:
            fail("n_train", self.n_train, ">= 1")
        if self.n_test < 0:
            fail("n_test", self.n_test, ">= 0")
        if not 0 <= self.max_walls <= 24:
            fail("max_walls", self.max_walls, "in [0, 24]")
        if self.min_correct < 2:
            fail("min_correct", self.min_correct, ">= 2")
        if not 1 <= self.rare_turns <= self.L - 1:
            fail("rare_turns", self.rare_turns, f"in [1, L - 1 = {self.L - 1}]")
        if self.seed < 0:
            fail("seed", self.seed, ">= 0")
        n = (self.n_train + self.n_test) * 4**self.L
        if n > MAX_MASK:
            fail("n_train", self.n_train, f"such that (n_train + n_test) x 4**L <= {MAX_MASK:,}")

    @property
    def n_answers(self) -> int:
        return 4**self.L

    @property
    def prompt_len(self) -> int:
        return self.max_walls + 5

    @property
    def vocab(self) -> int:
        """Token ids: 4 moves, BOS, SEP, PAD, L + 1 count tokens, (L + 1)**2 cell tokens."""
        return _COUNT0 + (self.L + 1) + (self.L + 1) ** 2

    def to_dict(self) -> dict:
        return asdict(self)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def cell_token(task: GridTask, x: int, y: int) -> int:
    return _COUNT0 + task.L + 1 + x * (task.L + 1) + y


def answer_index(moves: np.ndarray) -> np.ndarray:
    """Index in [0, 4**L) of answers given as move tokens [..., L] (first move most significant)."""
    m = np.asarray(moves, dtype=np.int64)
    L = m.shape[-1]
    return (m * (4 ** np.arange(L - 1, -1, -1, dtype=np.int64))).sum(axis=-1)


def answer_tokens(index: np.ndarray, L: int) -> np.ndarray:
    """Move tokens [..., L] of answer indices (inverse of :func:`answer_index`)."""
    i = np.asarray(index, dtype=np.int64)[..., None]
    return (i // (4 ** np.arange(L - 1, -1, -1, dtype=np.int64))) % 4


def turns(moves: np.ndarray) -> np.ndarray:
    """Number of adjacent moves that differ, over the last axis."""
    m = np.asarray(moves)
    return (m[..., 1:] != m[..., :-1]).sum(axis=-1)


_STEP = {U: (0, 1), D: (0, -1), LEFT: (-1, 0), RIGHT: (1, 0)}


def route_is_correct(h: int, v: int, a: int, L: int, walls, moves) -> bool:
    """The verifier, by walking the route on the grid (independent of the enumeration).

    Start at (0, 0); a move ``h`` adds one to the box's x (the goal's direction), a move ``v`` one
    to y; the opposite moves subtract one. Correct iff every visited cell is free and the walk
    ends at the goal (a, L - a).
    """
    blocked = set(map(tuple, walls))
    x = y = 0
    sx = 1 if h == RIGHT else -1
    sy = 1 if v == U else -1
    for m in moves:
        dx, dy = _STEP[int(m)]
        x += dx * sx
        y += dy * sy
        if (x, y) in blocked:
            return False
    return (x, y) == (a, L - a)


def _routes(a: int, b: int, walls: frozenset) -> list[tuple[int, ...]]:
    """Every monotone route (0 horizontal, 1 vertical step) from (0, 0) to (a, b) around walls."""
    out: list[tuple[int, ...]] = []

    def walk(x: int, y: int, path: list[int]) -> None:
        if (x, y) == (a, b):
            out.append(tuple(path))
            return
        if x < a and (x + 1, y) not in walls:
            walk(x + 1, y, [*path, 0])
        if y < b and (x, y + 1) not in walls:
            walk(x, y + 1, [*path, 1])

    walk(0, 0, [])
    return out


@dataclass(frozen=True)
class Prompts:
    """The prompts of a task: tokens, puzzles and correctness, train first then held-out.

    ``tokens`` [P, prompt_len] int64; ``h``, ``v``, ``a`` [P]; ``walls`` a list of tuples of
    (x, y); ``correct`` [P, 4**L] bool; ``rare`` [P, 4**L] bool (subset of ``correct``);
    ``n_train`` prompts of the train split come first.
    """

    task: GridTask
    tokens: np.ndarray
    h: np.ndarray
    v: np.ndarray
    a: np.ndarray
    walls: tuple
    correct: np.ndarray
    rare: np.ndarray
    n_train: int

    @property
    def n(self) -> int:
        return len(self.tokens)

    def split(self, name: str) -> np.ndarray:
        """Prompt ids of ``train`` or ``test``."""
        if name == "train":
            return np.arange(self.n_train)
        if name == "test":
            return np.arange(self.n_train, self.n)
        fail("split", name, "'train' or 'test'")

    def rewards(self, prompt_ids: np.ndarray, moves: np.ndarray) -> np.ndarray:
        """0/1 rewards of answers ``moves`` [G, ..., L] to the prompts ``prompt_ids`` [G]."""
        idx = answer_index(moves)
        pid = np.asarray(prompt_ids).reshape(idx.shape[:1] + (1,) * (idx.ndim - 1))
        return self.correct[pid, idx].astype(np.float64)


def _one_prompt(task: GridTask, rng: np.random.Generator):
    """Draw one puzzle (h, v, a, walls, routes) of the task's variant, or None if rejected."""
    L = task.L
    h = int(rng.choice([LEFT, RIGHT]))
    v = int(rng.choice([U, D]))
    a = int(rng.integers(1, L))  # 1..L-1: both directions are used
    b = L - a
    inner = [(x, y) for x in range(a + 1) for y in range(b + 1) if (x, y) not in ((0, 0), (a, b))]
    if task.variant == "multi":
        k = int(rng.integers(0, min(task.max_walls, len(inner)) + 1))
        pick = rng.choice(len(inner), size=k, replace=False)
        walls = frozenset(inner[i] for i in pick)
        routes = _routes(a, b, walls)
        nt = [sum(r[i] != r[i + 1] for i in range(L - 1)) for r in routes]
        if len(routes) < task.min_correct:
            return None
        if not any(t >= task.rare_turns for t in nt) or not any(t < task.rare_turns for t in nt):
            return None
        return h, v, a, walls, routes
    # single: keep one random route, wall everything else, then open walls (random order) while
    # the route stays the only one: a minimal wall set around a unique route
    all_routes = _routes(a, b, frozenset())
    route = all_routes[int(rng.integers(len(all_routes)))]
    on = {(0, 0)}
    x = y = 0
    for s in route:
        x, y = (x + 1, y) if s == 0 else (x, y + 1)
        on.add((x, y))
    walls = {c for c in inner if c not in on}
    for i in rng.permutation(len(inner)):
        c = inner[i]
        if c in walls and len(_routes(a, b, frozenset(walls - {c}))) == 1:
            walls.discard(c)
    if len(walls) > task.max_walls:
        return None
    return h, v, a, frozenset(walls), [route]


def make_prompts(task: GridTask) -> Prompts:
    """The task's ``n_train + n_test`` distinct prompts, drawn from ``task.seed``."""
    if not isinstance(task, GridTask):
        fail("task", task, "a GridTask")
    rng = np.random.default_rng([task.seed, 24])
    L = task.L
    n = task.n_train + task.n_test
    seen: set = set()
    puzzles = []
    misses = 0
    while len(puzzles) < n:
        misses += 1
        if misses > _MAX_MISSES:
            fail(
                "n_train",
                task.n_train,
                f"small enough that {n} distinct prompts exist (found {len(puzzles)}; raise "
                "max_walls or L, or lower min_correct)",
            )
        p = _one_prompt(task, rng)
        if p is None:
            continue
        key = (p[0], p[1], p[2], tuple(sorted(p[3])))
        if key in seen:
            continue
        seen.add(key)
        puzzles.append(p)
        misses = 0
    tokens = np.full((n, task.prompt_len), PAD, dtype=np.int64)
    correct = np.zeros((n, 4**L), dtype=bool)
    rare = np.zeros((n, 4**L), dtype=bool)
    for i, (h, v, a, walls, routes) in enumerate(puzzles):
        wt = sorted(cell_token(task, x, y) for x, y in walls)
        tokens[i, :4] = (BOS, h, v, _COUNT0 + a)
        tokens[i, 4 : 4 + len(wt)] = wt
        tokens[i, -1] = SEP
        mv = np.where(np.asarray(routes) == 0, h, v)
        idx = answer_index(mv)
        correct[i, idx] = True
        if task.variant == "multi":
            rare[i, idx[turns(mv) >= task.rare_turns]] = True
    return Prompts(
        task=task,
        tokens=tokens,
        h=np.array([p[0] for p in puzzles]),
        v=np.array([p[1] for p in puzzles]),
        a=np.array([p[2] for p in puzzles]),
        walls=tuple(tuple(sorted(p[3])) for p in puzzles),
        correct=correct,
        rare=rare,
        n_train=task.n_train,
    )


def teacher_probabilities(prompts: Prompts, beta: float) -> np.ndarray:
    """The biased SFT teacher [P, 4**L]: correct answer c has weight exp(-beta * turns(c)),
    normalized over the prompt's correct answers; incorrect answers have probability 0."""
    if not (isinstance(beta, int | float) and np.isfinite(beta) and beta >= 0):
        fail("teacher_beta", beta, "a finite number >= 0")
    t = turns(answer_tokens(np.arange(prompts.task.n_answers), prompts.task.L))
    w = np.where(prompts.correct, np.exp(-float(beta) * t)[None, :], 0.0)
    return w / w.sum(axis=1, keepdims=True)
