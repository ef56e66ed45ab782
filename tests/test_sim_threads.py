"""Default thread count of a run (``sim.threads.default_threads``): Numba's setting, at most the
process's cgroup CPU limit (fake cgroup files) while that setting is Numba's own default."""

from __future__ import annotations

import numba
import pytest

from fgrpo_theory.population import PopulationConfig, simulate_population
from fgrpo_theory.sim import SimConfig, cpus, simulate, threads
from fgrpo_theory.sim.threads import choose_threads, default_threads

CORES = numba.config.NUMBA_NUM_THREADS

needs_two = pytest.mark.skipif(CORES < 2, reason="Numba's default is one thread here")


@pytest.fixture
def cgroup(monkeypatch, tmp_path):
    """``limit(text)`` writes a cgroup v2 ``cpu.max`` this process reads as its own; Numba's
    count is its default meanwhile, and the count before is restored after."""
    (tmp_path / "self-cgroup").write_text("0::/\n")
    monkeypatch.setattr(cpus, "CGROUP", tmp_path)
    monkeypatch.setattr(cpus, "PROC_CGROUP", tmp_path / "self-cgroup")
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.delattr(threads._chosen, "count", raising=False)
    before = numba.get_num_threads()
    numba.set_num_threads(CORES)

    def limit(text: str) -> None:
        (tmp_path / "cpu.max").write_text(text)

    yield limit
    numba.set_num_threads(before)


@needs_two
@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [
        ("100000 100000\n", 1),  # docker --cpus=1
        ("50000 100000\n", 1),  # half a CPU: still one thread
        ("150000 100000\n", 2),  # 1.5 CPUs: rounded up
        ("max 100000\n", CORES),  # no limit
        ("100000000 100000\n", CORES),  # a limit above the CPUs
    ],
)
def test_default_threads_follow_the_cpu_limit(cgroup, cpu_max, expected):
    cgroup(cpu_max)
    assert default_threads() == min(expected, CORES)


@needs_two
def test_a_users_choice_is_kept_under_a_limit(cgroup, monkeypatch):
    cgroup("100000 100000\n")
    monkeypatch.setenv("NUMBA_NUM_THREADS", str(CORES))
    assert default_threads() == CORES
    monkeypatch.delenv("NUMBA_NUM_THREADS")
    assert default_threads() == 1
    numba.set_num_threads(CORES - 1)  # set in the process: below the default, kept
    cgroup("max 100000\n")
    assert default_threads() == CORES - 1


@needs_two
def test_a_count_chosen_in_numbas_config_or_for_a_dask_task_is_kept(cgroup, monkeypatch):
    cgroup("100000 100000\n")
    assert default_threads() == 1
    # NUMBA_NUM_THREADS from Numba's config file (no environment variable): not its default
    with monkeypatch.context() as m:
        m.setattr(numba.config, "NUMBA_DEFAULT_NUM_THREADS", CORES + 1)
        assert default_threads() == CORES
    assert default_threads() == 1
    assert choose_threads(CORES) == CORES  # a Dask sweep's threads per task
    assert default_threads() == CORES
    numba.set_num_threads(CORES)  # the same count, set without choose_threads: kept too
    assert default_threads() == CORES
    threads._chosen.count = None
    assert default_threads() == 1  # (Numba's default count, not chosen: capped)


@needs_two
def test_numbas_setting_is_restored_when_a_run_fails(cgroup):
    cgroup("100000 100000\n")
    numba.set_num_threads(CORES - 1 if CORES > 2 else 2)
    before = numba.get_num_threads()

    def stop(done: int, total: int) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        simulate(SimConfig(K=6, N=4, steps=20, seeds=2), progress=stop)
    assert numba.get_num_threads() == before
    with pytest.raises(ValueError, match=r"^threads must be an integer >= 1; got True$"):
        simulate(SimConfig(K=6, N=4, steps=20, seeds=2), threads=True)
    with pytest.raises(ValueError, match=r"^threads must be an integer >= 1; got 0$"):
        simulate(SimConfig(K=6, N=4, steps=20, seeds=2), threads=0)
    assert numba.get_num_threads() == before


@needs_two
def test_simulate_and_population_run_on_the_limit_and_restore_numbas_setting(cgroup):
    cgroup("100000 100000\n")
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(numba.get_num_threads())

    cfg = SimConfig(K=6, N=4, steps=20, seeds=4, log_every=10)
    simulate(cfg, progress=progress)
    simulate_population(
        PopulationConfig(P=4, P_test=0, B=2, K=8, steps=2, seeds=2), progress=progress
    )
    assert seen and set(seen) == {1}
    assert numba.get_num_threads() == CORES
    seen.clear()
    simulate(cfg, threads=2, progress=progress)  # a caller's count is not capped
    assert set(seen) == {2}
    assert numba.get_num_threads() == CORES
