"""Reading training logs: CSV, Parquet, JSON Lines or standard input, two layouts.

- per group: one row per group, columns ``prompt, step, n, n_correct``;
- per rollout: one row per rollout, columns ``prompt, step, reward``; correctness from the declared
  reward pair (every reward must be R_c or R_w) or from a threshold (reward >= threshold).

``columns`` maps the names this module expects to the file's names (``{"n_correct": "solved"}``,
the CLI's ``--columns n_correct=solved``). Every problem raises the package's one-line ValueError:
missing columns (named, with what is there), non-numeric cells (first bad row and value),
negative counts, n_correct > n, an empty file.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .._validate import check_scalar, fail

__all__ = [
    "read_stdin",
    "read_table",
    "read_log",
    "to_groups",
    "parse_columns",
    "numeric_column",
    "GROUP_COLUMNS",
    "ROLLOUT_COLUMNS",
    "LOG_SOURCES",
    "read_verl_dump",
    "read_trl_log",
]

#: Where a log comes from (``--from``): a table in one of the two layouts, verl's rollout dump
#: (``trainer.rollout_data_dir``), the per-group log of ``fgrpo_theory.integrations.trl``.
LOG_SOURCES = ("table", "verl", "trl")

GROUP_COLUMNS = ("prompt", "step", "n", "n_correct")
ROLLOUT_COLUMNS = ("prompt", "step", "reward")
#: Largest number of rows read (refused beyond, before parsing numbers).
MAX_ROWS = 50_000_000


#: Largest standard input read (bytes); rows are counted while reading too (:data:`MAX_ROWS`).
MAX_STDIN_BYTES = 4 << 30


def read_stdin(name: str = "LOG", max_rows: int | None = None) -> str:
    """Standard input as text, refused (one line naming ``name``) as soon as it exceeds
    ``max_rows`` lines (default :data:`MAX_ROWS` plus a header) or :data:`MAX_STDIN_BYTES`: an
    endless stream is never read to exhaustion. A closed standard input is refused too."""
    stream = sys.stdin
    if stream is None or getattr(stream, "closed", False):
        fail(name, "-", "used with an open standard input (or give a file)")
    buf = getattr(stream, "buffer", None)  # bytes when there are (a real stdin), else text
    limit = (MAX_ROWS if max_rows is None else max_rows) + 1
    chunks: list = []
    lines = size = 0
    try:
        while True:
            if buf is None:
                chunk = stream.read(1 << 20)
            else:
                chunk = buf.read1(1 << 20) if hasattr(buf, "read1") else buf.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            lines += chunk.count("\n" if isinstance(chunk, str) else b"\n")
            if lines > limit:
                fail(name, "-", f"standard input of at most {limit - 1} rows (more arrived)")
            if size > MAX_STDIN_BYTES:
                fail(name, "-", f"standard input of at most {MAX_STDIN_BYTES} bytes")
    except (OSError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith(f"{name} must be"):
            raise
        fail(name, "-", f"a readable standard input ({type(e).__name__})")
    if buf is None:
        return "".join(chunks)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        fail(name, "-", f"UTF-8 text (byte {e.start} is not UTF-8)")


#: CSV cells stay text, and "NA", "null" or an empty cell is never turned into a missing value
#: (a prompt may be called "NA"; an empty number cell is named as bad by numeric_column).
_CSV = dict(dtype=str, skipinitialspace=True, keep_default_na=False, na_filter=False)


def read_table(source: str | Path, name: str = "LOG") -> pd.DataFrame:
    """Read a CSV, Parquet or JSON Lines file, or standard input for ``"-"``.

    The format follows the extension (.csv, .parquet/.pq, .jsonl/.json/.ndjson); standard input
    and unknown extensions are sniffed: JSON Lines when the first non-blank character is ``{``,
    CSV otherwise. Cells are read as text, so that :func:`numeric_column` can name bad ones.
    """
    if str(source) == "-":
        return _from_text(read_stdin(name), name, "standard input")
    path = Path(source)
    if not path.is_file():
        fail(name, str(path), "an existing file (or - for standard input)")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        elif suffix in (".jsonl", ".json", ".ndjson"):
            df = pd.read_json(path, lines=True, dtype=False)
        elif suffix == ".csv":
            df = pd.read_csv(path, **_CSV)
        else:
            return _from_text(path.read_text(encoding="utf-8"), name, str(path))
    except pd.errors.EmptyDataError:
        fail(name, str(path), "a non-empty file")
    except (ValueError, OSError, UnicodeDecodeError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        fail(name, str(path), f"a readable {suffix.lstrip('.') or 'data'} file ({msg})")
    return df


def _from_text(text: str, name: str, where: str) -> pd.DataFrame:
    stripped = text.lstrip()
    if not stripped:
        fail(name, where, "non-empty")
    try:
        if stripped.startswith("{"):
            return pd.read_json(io.StringIO(text), lines=True, dtype=False)
        return pd.read_csv(io.StringIO(text), **_CSV)
    except (ValueError, pd.errors.ParserError) as e:
        fail(name, where, f"CSV or JSON Lines ({str(e).splitlines()[0]})")


def _rename(df: pd.DataFrame, columns: dict[str, str] | None) -> pd.DataFrame:
    if not columns:
        return df
    if not isinstance(columns, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in columns.items()
    ):
        fail("--columns", columns, "a mapping {new: old} of column names")
    olds = list(columns.values())
    for new, old in columns.items():
        if old not in df.columns:
            fail(
                "--columns", f"{new}={old}", f"a mapping from a column of the file ({_listing(df)})"
            )
        if olds.count(old) > 1:
            fail("--columns", f"{new}={old}", f"each column of the file mapped once ({old} twice)")
        if new != old and new in df.columns and new not in olds:
            fail(
                "--columns",
                f"{new}={old}",
                f"a new name that is not already a column of the file ({new} is one; map it "
                f"away too, e.g. {new}_orig={new})",
            )
    return df.rename(columns={old: new for new, old in columns.items()})


def _listing(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    return "columns there: " + (", ".join(cols[:20]) + (" ..." if len(cols) > 20 else ""))


def id_column(df: pd.DataFrame, col: str = "prompt") -> np.ndarray:
    """An id column (prompt, problem) as text; a missing or blank id is refused naming its row
    (never dropped, never merged with another blank)."""
    raw = df[col]
    text = raw.astype(str).str.strip()
    bad = raw.isna().to_numpy() | (text == "").to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        fail(col, raw.iloc[i], f"an id in every row (row {i + 1} of the data is blank)")
    return raw.astype(str).to_numpy()


def numeric_column(df: pd.DataFrame, col: str, *, integer: bool) -> np.ndarray:
    """Column ``col`` as float (or int64) values; names the first non-numeric cell's row."""
    raw = df[col]
    is_bool = raw.map(lambda v: isinstance(v, bool | np.bool_)) if raw.dtype == object else None
    if raw.dtype == bool or (is_bool is not None and is_bool.any()):
        i = 0 if raw.dtype == bool else int(np.argmax(is_bool.to_numpy()))
        fail(col, raw.iloc[i], f"a number, not true/false (row {i + 1} of the data)")
    vals = pd.to_numeric(raw, errors="coerce")
    bad = vals.isna() | ~np.isfinite(vals.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        fail(col, raw.iloc[i], f"a finite number (row {i + 1} of the data, header excluded)")
    arr = vals.to_numpy(dtype=float)
    if integer:
        frac = arr != np.round(arr)
        if frac.any():
            i = int(np.argmax(frac))
            fail(col, raw.iloc[i], f"an integer (row {i + 1} of the data)")
        if (arr < 0).any():
            i = int(np.argmax(arr < 0))
            fail(col, raw.iloc[i], f">= 0 (row {i + 1} of the data)")
        if (arr > 2**53).any():
            i = int(np.argmax(arr > 2**53))
            fail(col, raw.iloc[i], f"<= 2**53 (row {i + 1} of the data)")
        return arr.astype(np.int64)
    return arr


def to_groups(
    df: pd.DataFrame,
    *,
    columns: dict[str, str] | None = None,
    rewards: tuple[float, float] | None = None,
    threshold: float | None = None,
) -> pd.DataFrame:
    """Normalise a log table to one row per group: ``prompt, step, n, n_correct``.

    The layout is per rollout when (after ``columns``) the table has a ``reward`` column and no
    ``n`` column; per group otherwise. ``step`` is optional (0 when absent). For per-rollout logs
    pass ``rewards=(R_c, R_w)`` (default (1.0, -1.0): every reward must be one of the two) or
    ``threshold`` (reward >= threshold is correct), not both.
    """
    if len(df) == 0:
        fail("LOG", "no rows", "a log with at least one data row")
    if len(df) > MAX_ROWS:
        fail("LOG", f"{len(df)} rows", f"at most {MAX_ROWS} rows")
    df = _rename(df, columns)
    per_rollout = "reward" in df.columns and "n" not in df.columns
    need = ROLLOUT_COLUMNS if per_rollout else GROUP_COLUMNS
    missing = [c for c in need if c not in df.columns and c != "step"]
    if missing:
        layout = "per-rollout" if per_rollout else "per-group"
        fail(
            "LOG",
            ", ".join(missing),
            f"a {layout} log with columns {', '.join(need)} (missing; {_listing(df)}; "
            "map names with --columns new=old)",
        )
    step = numeric_column(df, "step", integer=True) if "step" in df.columns else np.zeros(len(df))
    prompt = id_column(df, "prompt")
    if not per_rollout:
        if threshold is not None:
            fail("--threshold", threshold, "given only for a per-rollout log (a reward column)")
        if rewards is not None:
            fail("--rewards", rewards, "given only for a per-rollout log (a reward column)")
        n = numeric_column(df, "n", integer=True)
        x = numeric_column(df, "n_correct", integer=True)
        if (n == 0).any():
            i = int(np.argmax(n == 0))
            fail("n", 0, f">= 1 (row {i + 1} of the data)")
        if (x > n).any():
            i = int(np.argmax(x > n))
            fail("n_correct", int(x[i]), f"<= n = {int(n[i])} (row {i + 1} of the data)")
        return pd.DataFrame(
            {"prompt": prompt, "step": step.astype(np.int64), "n": n, "n_correct": x}
        )
    r = numeric_column(df, "reward", integer=False)
    if threshold is not None and rewards is not None:
        fail("--threshold", threshold, "not given together with --rewards")
    if threshold is not None:
        correct = r >= check_scalar("--threshold", threshold)
    else:
        if rewards is not None and (
            isinstance(rewards, str | bytes) or not hasattr(rewards, "__len__") or len(rewards) != 2
        ):
            fail("--rewards", rewards, "a pair R_c,R_w")
        rc, rw = rewards if rewards is not None else (1.0, -1.0)
        rc, rw = check_scalar("--rewards", rc), check_scalar("--rewards", rw)
        if not rc > rw:
            fail("--rewards", f"{rc},{rw}", "R_c,R_w with R_c > R_w")
        outside = (r != rc) & (r != rw)
        if outside.any():
            i = int(np.argmax(outside))
            fail(
                "reward",
                df["reward"].iloc[i],
                f"R_c = {rc:g} or R_w = {rw:g} (row {i + 1} of the data; declare the pair with "
                "--rewards R_c,R_w or use --threshold)",
            )
        correct = r == rc
    tab = pd.DataFrame({"prompt": prompt, "step": step.astype(np.int64), "c": correct})
    g = tab.groupby(["prompt", "step"], sort=True)["c"].agg(["size", "sum"]).reset_index()
    return pd.DataFrame(
        {
            "prompt": g["prompt"].to_numpy(),
            "step": g["step"].to_numpy(np.int64),
            "n": g["size"].to_numpy(np.int64),
            "n_correct": g["sum"].to_numpy(np.int64),
        }
    )


def read_verl_dump(source: str | Path) -> pd.DataFrame:
    """verl's rollout dump as a per-rollout table ``prompt, step, reward``.

    verl (``trainer.rollout_data_dir``) writes one JSON Lines file per step, ``<step>.jsonl``,
    one line per response with its prompt text (``input``), ``score`` (the summed
    ``token_level_scores``) and ``step``. ``source`` is that directory or one of its files. A
    group is a prompt at a step: the responses of one prompt share its text (two copies of the
    same prompt in one batch are merged).
    """
    path = Path(source)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            fail("LOG", str(path), "a verl rollout_data_dir with <step>.jsonl files")
    elif path.is_file():
        files = [path]
    else:
        fail("LOG", str(path), "an existing verl rollout_data_dir or one of its .jsonl files")
    frames = [read_table(f) for f in files]
    df = pd.concat(frames, ignore_index=True)
    missing = [c for c in ("input", "score", "step") if c not in df.columns]
    if missing:
        fail("LOG", ", ".join(missing), f"fields of a verl rollout dump (missing; {_listing(df)})")
    return pd.DataFrame({"prompt": df["input"], "step": df["step"], "reward": df["score"]})


def read_trl_log(source: str | Path) -> pd.DataFrame:
    """The per-group log of ``fgrpo_theory.integrations.trl.GroupLogCallback`` (JSON Lines, one
    row per group: prompt, step, n, n_correct, weight, mode, scheme); training groups only."""
    df = read_table(source)
    if "mode" in df.columns:
        df = df[df["mode"].astype(str) == "train"].reset_index(drop=True)
        if len(df) == 0:
            fail("LOG", str(source), "a log with training groups (mode train)")
    return df


def _binary_pair(df: pd.DataFrame) -> tuple[float, float]:
    """The reward pair of a verl dump whose scores are 0/1 or -1/+1."""
    r = numeric_column(df, "reward", integer=False)
    values = set(np.unique(r).tolist())
    for pair in ((1.0, 0.0), (1.0, -1.0)):
        if values <= set(pair):
            return pair
    bad = next(v for v in sorted(values) if v not in (0.0, 1.0))
    fail("score", bad, "0/1 or -1/+1 in a verl dump (give --threshold T or --rewards R_c,R_w)")


def read_log(
    source: str | Path,
    *,
    columns: dict[str, str] | None = None,
    rewards: tuple[float, float] | None = None,
    threshold: float | None = None,
    source_format: str = "table",
) -> pd.DataFrame:
    """One row per group (prompt, step, n, n_correct) from a log.

    ``source_format`` (``--from``): ``"table"`` (:func:`read_table` then :func:`to_groups`),
    ``"verl"`` (:func:`read_verl_dump`; scores 0/1 or -1/+1, or ``threshold`` / ``rewards``) or
    ``"trl"`` (:func:`read_trl_log`).
    """
    if source_format not in LOG_SOURCES:
        fail("--from", source_format, "one of " + ", ".join(LOG_SOURCES))
    if source_format == "verl":
        df = read_verl_dump(source)
        if threshold is None and rewards is None:
            rewards = _binary_pair(df)
        return to_groups(df, columns=columns, rewards=rewards, threshold=threshold)
    if source_format == "trl":
        return to_groups(
            read_trl_log(source), columns=columns, rewards=rewards, threshold=threshold
        )
    return to_groups(read_table(source), columns=columns, rewards=rewards, threshold=threshold)


def parse_columns(text: str | None, name: str = "--columns") -> dict[str, str] | None:
    """``"new=old,new2=old2"`` -> ``{"new": "old", ...}``."""
    if not text:
        return None
    out: dict[str, str] = {}
    for item in text.split(","):
        new, sep, old = item.partition("=")
        if not sep or not new.strip() or not old.strip():
            fail(name, item, "items of the form new=old (e.g. n_correct=solved)")
        out[new.strip()] = old.strip()
    return out
