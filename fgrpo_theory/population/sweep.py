"""Population sweeps: one result file per config, resumable, locally or on Dask.

The layout, resume rule, locks and atomic writes are the simulator's
(:func:`fgrpo_theory.sim.sweep.run_configs`): each config's rows go to
``<out_dir>/<population_config_hash>.<fmt>``, reused only if the stored config hash, the digest of
the population code (:func:`population_digest`) and the rows digest all match. The scheduler is
the simulator's ``--scheduler`` (:func:`fgrpo_theory.distributed.sweep_executor`): one Dask task per
config; each run draws from its own seeded stream, so a Dask sweep equals a local one bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import PopulationConfig, expand_population_grid, population_config_hash

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["run_population_sweep", "run_population_one", "population_digest"]


def population_digest() -> str:
    """Digest of the code that produces population results: ``fgrpo_theory/population/*.py``,
    the simulator (``sim/*.py``: streams, advantage tables) and ``advantages/*.py``."""
    from ..sim.sweep import source_digest

    root = Path(__file__).resolve().parent.parent
    files = [*root.joinpath("population").glob("*.py"), *root.joinpath("sim").glob("*.py")]
    files += root.joinpath("advantages").glob("*.py")
    return source_digest(files)


def run_population_one(cfg: PopulationConfig) -> pd.DataFrame:
    """Top-level, picklable: ``simulate_population(cfg)`` with the caller's Numba threads."""
    from .runner import simulate_population

    return simulate_population(cfg)


def run_population_sweep(
    sweep_or_configs: Any,
    out_dir: str | Path | None = None,
    *,
    scheduler: str = "local",
    resume: bool = True,
    threads: int | None = None,
    progress: bool | None = None,
    fmt: str = "parquet",
    retries: int = 3,
    connect_timeout: float = 5.0,
) -> pd.DataFrame:
    """Run every config of a population sweep; the concatenated tidy DataFrame, in config order.

    Parameters
    ----------
    sweep_or_configs : mapping, PopulationConfig or iterable of PopulationConfig
        A sweep mapping (list-valued fields form a grid, :func:`expand_population_grid`) or
        configs; everything is validated before any work (and before any cluster starts).
    out_dir : path, optional
        Folder of per-config result files (see the module docstring); several sweeps may share it.
    scheduler : str
        ``"local"`` (this process, Numba threads over seeds), ``"local-cluster:N"`` or
        ``"tcp://host:port"`` (one Dask task per config); the results are identical.
    resume : bool
        Reuse finished, unchanged result files in ``out_dir`` (one stderr line says why not).
    threads : int, optional
        Numba threads: per config locally, per task on Dask (default 1 there).
    progress : bool, optional
        Progress bar over configs on stderr (default: when stderr is a terminal).
    fmt : {"parquet", "csv"}
    retries, connect_timeout
        As in :func:`fgrpo_theory.distributed.run_sweep_distributed`.
    """
    from ..distributed import SchedulerSpec, executor_for_configs, parse_scheduler
    from ..sim.sweep import run_configs
    from .runner import simulate_population

    spec = scheduler
    if not isinstance(spec, SchedulerSpec):
        spec = parse_scheduler(scheduler, "--scheduler")
    configs = expand_population_grid(sweep_or_configs)
    key = population_config_hash
    with executor_for_configs(
        spec,
        configs,
        out_dir,
        resume=resume,
        fmt=fmt,
        key=key,
        code=population_digest,
        threads_per_task=threads,
        retries=retries,
        connect_timeout=connect_timeout,
        progress=progress,
    ) as ex:
        return run_configs(
            configs,
            out_dir,
            run_one=run_population_one,
            run_local=lambda cfg: simulate_population(cfg, threads=threads),
            key=key,
            code=population_digest,
            resume=resume,
            progress=progress,
            executor=ex,
            fmt=fmt,
            label="training populations",
        )
