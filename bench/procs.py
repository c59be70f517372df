"""Resident memory, CPU time and leftovers of an operator's process tree, read from /proc.

Used by `bench.operators` and the scenarios. An operator's "tree" is its main
process and every live descendant (ansible-runner, ansible-playbook, module
interpreters). Figures are the same for both operators:

* RSS: sum of `VmRSS` over the tree (pages shared between processes count once
  per process, as `ps` would add them up); PSS: sum of `Pss` from
  `/proc/<pid>/smaps_rollup`, which splits shared pages fairly;
* CPU: `utime + stime + cutime + cstime` summed over the tree, in seconds. The
  `c*` fields hold the time of children that already exited and were reaped,
  so short-lived ansible-playbook processes are counted too.

Leftover processes are found by an environment marker: every operator is
started with a unique `AO_BENCH_TOKEN`, which its descendants inherit even
after they were re-parented to init.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ansible_operator.warm.protocol import PRIMED_COMM

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
TOKEN_VAR = "AO_BENCH_TOKEN"


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (field 3 onwards)."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[-1].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or len(fields) < 2:
            continue
        children[int(fields[1])].append(int(entry.name))
    return children


def tree(root: int) -> list[int]:
    """`root` and its live descendants (zombies included: they still hold CPU totals)."""
    if _stat_fields(root) is None:
        return []
    children = _children_map()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            resident = int((PROC / str(pid) / "statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total += resident * PAGE_SIZE
    return total


def pss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            text = (PROC / str(pid) / "smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
                break
    return total


def cpu_seconds(pids: list[int]) -> float:
    ticks = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 15:
            continue
        # fields[0] is the state (stat field 3): utime..cstime are stat fields 14..17
        ticks += sum(int(v) for v in fields[11:15])
    return ticks / CLOCK_TICKS


@dataclass(frozen=True)
class PssSample:
    total: int  # the first sum taken over an unchanged tree, or 0
    unchecked: int  # the highest sum of any attempt
    consistent: bool


def consistent_pss(root: int, pids: list[int], *, attempts: int = 5) -> PssSample:
    """PSS of the tree summed over a sweep during which no process started or ended;
    up to `attempts` sweeps (see PeakSampler)."""
    unchecked = 0
    for _ in range(attempts):
        total = pss_bytes(pids)
        unchecked = max(unchecked, total)
        after = tree(root)
        if sorted(after) == sorted(pids):
            return PssSample(total=total, unchecked=unchecked, consistent=True)
        pids = after
    return PssSample(total=0, unchecked=unchecked, consistent=False)


@dataclass(frozen=True)
class TreeSample:
    processes: int
    rss: int
    pss: int
    cpu: float
    helpers: int = 0
    """Long-lived helpers among `processes`: our playbook helper's primed children."""

    @property
    def non_helpers(self) -> int:
        """The processes a leftover check counts (the operator, its servers, runs)."""
        return self.processes - self.helpers


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def sample(root: int) -> TreeSample:
    pids = tree(root)
    return TreeSample(
        processes=len(pids),
        rss=rss_bytes(pids),
        pss=pss_bytes(pids),
        cpu=cpu_seconds(pids),
        helpers=sum(1 for pid in pids if _comm(pid) == PRIMED_COMM),
    )


class PeakSampler:
    """Samples a tree's RSS and PSS in a thread; `peak_*` are the highest sums seen.

    PSS splits pages shared between processes (a fork server and its forked
    runs share most of theirs) among them, so it is the tree's real footprint;
    RSS counts a shared page once per process.

    A PSS sum is kept only when the tree had the same processes before and after
    reading them (`consistent_pss`): reading ~35 `smaps_rollup` files takes tens of
    milliseconds, and a sharer that exits meanwhile has its share counted while
    the processes read after it already count the pages among fewer sharers (a
    fork meanwhile undercounts the same way). With a fork server whose pages are
    shared by every run, such sums overstated the peak by up to 45 MiB (issue 11,
    docs/benchmarks.md run 8). `peak_pss_unchecked` is the old figure, every sum.
    """

    def __init__(self, root: int, interval: float = 0.5) -> None:
        self.root = root
        self.interval = interval
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_pss_unchecked = 0
        self.peak_processes = 0
        self.samples = 0
        self.inconsistent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="peak-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            pids = tree(self.root)
            self.peak_rss = max(self.peak_rss, rss_bytes(pids))
            self.peak_processes = max(self.peak_processes, len(pids))
            pss = consistent_pss(self.root, pids)
            self.samples += 1
            if pss.consistent:
                self.peak_pss = max(self.peak_pss, pss.total)
            else:
                self.inconsistent += 1
            self.peak_pss_unchecked = max(self.peak_pss_unchecked, pss.unchecked)
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = (PROC / "stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def kernel_thread_seconds() -> float:
    """CPU seconds of the kernel's own threads (kthreadd and its children: kworker, ...)."""
    ticks = 0
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or len(fields) < 13:
            continue
        if entry.name == "2" or fields[1] == "2":
            ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


class OtherLoad:
    """How much CPU everything else on the machine used while a scenario ran.

    Machine busy time minus the operator tree, the bench control plane, this
    benchmark process and the kernel's own threads, as a share of all CPUs
    (0.0 = nothing else ran, 1.0 = all CPUs busy with other work): other
    people's processes on the shared machine. The kernel threads (kworker, ...)
    are reported apart: they work for everybody, the benchmark included, so
    their time cannot be attributed (it is small: about 1 % of the CPUs).
    """

    def __init__(self, operator_pid: int, cluster_pids: list[int]) -> None:
        self.operator_pid = operator_pid
        self.cluster_pids = cluster_pids
        self._start = self._read()
        self._began = time.monotonic()

    def _read(self) -> tuple[float, float, float]:
        own = sum(os.times()[:4])
        ours = cpu_seconds(tree(self.operator_pid)) + cpu_seconds(self.cluster_pids) + own
        return machine_busy_seconds(), ours, kernel_thread_seconds()

    def shares(self) -> tuple[float, float]:
        """(other processes, kernel threads), each as a share of all CPUs."""
        busy, ours, kernel = self._read()
        capacity = (time.monotonic() - self._began) * (os.cpu_count() or 1)
        kernel_delta = kernel - self._start[2]
        other = (busy - self._start[0]) - (ours - self._start[1]) - kernel_delta
        return max(0.0, other / capacity), max(0.0, kernel_delta / capacity)


def processes_with_token(token: str) -> list[int]:
    """Live, non-zombie processes whose environment carries `AO_BENCH_TOKEN=token`."""
    marker = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker not in env.split(b"\0"):
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and fields[0] not in {"Z", "X"}:
            found.append(int(entry.name))
    return found


def command_line(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until none of `pids` is alive; return those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if (f := _stat_fields(p)) is not None and f[0] not in {"Z", "X"}]
        if alive:
            time.sleep(0.1)
    return alive


def count_entries(root: Path) -> tuple[int, int]:
    """(files, directories) below `root`, not counting `root` itself; symlinks count as files."""
    files = dirs = 0
    if not root.is_dir():
        return 0, 0
    for dirpath, dirnames, filenames in os.walk(root):
        links = sum(1 for d in dirnames if os.path.islink(os.path.join(dirpath, d)))
        dirs += len(dirnames) - links
        files += len(filenames) + links
    return files, dirs
