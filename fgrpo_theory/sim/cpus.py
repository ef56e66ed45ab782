"""The CPU limit a process runs under: its cgroups' CPU quota (cgroup v2 or v1), which the
affinity mask does not show. Read by the default thread count of a run
(:func:`.threads.default_threads`) and by the decision to start a compile helper
(:mod:`.beside`)."""

from __future__ import annotations

from pathlib import Path

#: Where Linux mounts the cgroup file systems (v2: one tree; v1: a tree per controller).
CGROUP = Path("/sys/fs/cgroup")
#: The cgroups of this process, one line per hierarchy (``0::/path`` for v2, ``3:cpu,cpuacct:/path``
#: for a v1 hierarchy).
PROC_CGROUP = Path("/proc/self/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _ratio(quota: str | None, period: str | None) -> float | None:
    try:
        q, p = int(quota or ""), int(period or "")
    except ValueError:  # "max" (v2): no limit; or nothing readable
        return None
    return q / p if q > 0 and p > 0 else None  # v1 writes -1 for no limit


def _limit(folder: Path, v2: bool) -> float | None:
    """The CPU limit set in one cgroup folder, or None."""
    if v2:
        text = _read(folder / "cpu.max")
        quota, _, period = (text or "").partition(" ")
        return _ratio(quota, period)
    return _ratio(_read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us"))


def cpu_quota(root: Path | None = None, proc: Path | None = None) -> float | None:
    """The CPUs this process's cgroups let it use on average: the smallest CPU quota over its
    period (as ``docker --cpus``, a Kubernetes CPU limit or systemd's ``CPUQuota=`` set it) of
    its cgroup and every cgroup above it, in the v2 tree or the v1 ``cpu`` hierarchy; None for
    no limit, or none readable. A process limited to one CPU still sees every core of its host
    in its affinity mask. ``root``, ``proc``: :data:`CGROUP` and :data:`PROC_CGROUP` (tests)."""
    root = CGROUP if root is None else root
    text = _read(PROC_CGROUP if proc is None else proc)
    places = []  # (the hierarchy's folder, this process's path in it, v2)
    for line in (text or "").splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        parts = [p for p in path.strip().split("/") if p and p not in (".", "..")]
        if line.startswith("0::"):
            places.append((root, parts, True))
        elif "cpu" in controllers.split(","):
            for name in dict.fromkeys([controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"]):
                places.append((root / name, parts, False))
    if not places:  # no /proc (or nothing in it): the mount's top, as a container sees it
        places = [(root, [], True), (root / "cpu", [], False)]
    limits = []
    for top, parts, v2 in places:
        for depth in range(len(parts), -1, -1):
            limit = _limit(top.joinpath(*parts[:depth]), v2)
            if limit is not None:
                limits.append(limit)
    return min(limits) if limits else None
