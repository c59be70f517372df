"""Measure the operator's memory and CPU while it reconciles the example samples.

The numbers behind the Deployment's requests and limits (docs/deploy.md,
"Resources"). Not a test: run it by hand against a cluster, from the
repository root:

    KUBECONFIG=.testbed/kubeconfig .venv/bin/python -m tests.deploy.measure_resources \
        [--burst 6] [--max-concurrent-reconciles-total 4] [--json out.json]

It creates a namespace of its own, pre-binds volumes for the SampleDB claims
(the testbed has no provisioner), starts `ansible-operator run` from the
repository root with WATCH_NAMESPACE set to that namespace, and samples the
operator's whole process tree (the operator, ansible-runner's
ansible-playbook children, their forked workers and the modules they run)
every 0.2 s from /proc:

* RSS: the sum of VmRSS over the tree. It counts pages shared between
  processes (forked Ansible workers share most of their memory) once per
  process, so it overstates what the container is charged;
* PSS: the sum of Pss over the tree (smaps_rollup), which splits shared pages
  between their sharers: close to what a memory cgroup charges for the
  processes' own memory (the cgroup also counts page cache);
* anonymous + file: the sum of Pss_Anon (every anonymous page of the tree
  once, COW-shared ones included, as a cgroup charges them) plus the largest
  RssFile of one process (the file pages one interpreter maps; a floor for
  the tree's file pages, most of which all its Pythons share). This is the
  estimate the limits are based on: RSS counts shared pages many times, and
  PSS splits file pages with unrelated processes on this machine that map
  the same .venv files;
* CPU: user + system time of the tree (including children already reaped),
  as cores averaged over 5-second windows.

Phases: idle after start-up; the samples (`config/samples`) until all are
Successful; idle; a burst of N Memcacheds and N WebServers at once (so the
concurrency cap is reached); deleting everything (the SampleDB finalizer
runs). Then the operator is stopped and everything it made is deleted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.deploy import support
from tests.e2e.harness import OperatorProcess

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PEAK_WINDOW = 5.0  # seconds


@dataclass
class Sample:
    t: float
    rss_kib: int
    pss_kib: int
    anon_kib: int  # sum of Pss_Anon: the tree's distinct anonymous pages
    file_kib: int  # largest RssFile of one process: a floor for the file pages mapped
    cpu_s: float
    procs: int

    @property
    def estimate_kib(self) -> int:
        return self.anon_kib + self.file_kib


@dataclass
class Phase:
    name: str
    start: float
    wall_start: float
    end: float = 0.0
    wall_end: float = 0.0
    runs: int = 0
    failed_runs: int = 0
    cpu_seconds_per_run: float = 0.0
    seconds: float = 0.0
    peak_rss_mib: float = 0.0
    peak_pss_mib: float = 0.0
    peak_estimate_mib: float = 0.0
    mean_pss_mib: float = 0.0
    peak_procs: int = 0
    cpu_seconds: float = 0.0
    mean_cores: float = 0.0
    peak_cores: float = 0.0  # highest average over PEAK_WINDOW seconds
    runner_dir_mib: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, user+system ticks including reaped children) of a process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    # after the command: state ppid ... utime(11) stime(12) cutime(13) cstime(14)
    return int(fields[1]), sum(int(v) for v in fields[11:15])


def _fields(path: str) -> dict[str, int]:
    """The `Name:   123 kB` lines of a /proc file, in KiB."""
    found = {}
    try:
        for line in Path(path).read_text().splitlines():
            name, _, rest = line.partition(":")
            words = rest.split()
            if len(words) == 2 and words[1] == "kB":
                found[name] = int(words[0])
    except OSError:
        pass
    return found


def sample_tree(root: int) -> Sample:
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _stat(int(entry))
            if info is not None:
                parents[int(entry)], ticks[int(entry)] = info
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in parents:
            tree.append(pid)
            todo.extend(children.get(pid, []))
    rollups = [_fields(f"/proc/{p}/smaps_rollup") for p in tree]
    statuses = [_fields(f"/proc/{p}/status") for p in tree]
    return Sample(
        t=time.monotonic(),
        rss_kib=sum(s.get("VmRSS", 0) for s in statuses),
        pss_kib=sum(r.get("Pss", 0) for r in rollups),
        anon_kib=sum(r.get("Pss_Anon", 0) for r in rollups),
        file_kib=max((s.get("RssFile", 0) for s in statuses), default=0),
        cpu_s=sum(ticks[p] for p in tree) / CLOCK_TICKS,
        procs=len(tree),
    )


class Sampler(threading.Thread):
    def __init__(self, root: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.samples: list[Sample] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.samples.append(sample_tree(self.root))
            self.halt.wait(self.interval)


def _du_mib(path: Path) -> float:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total / 2**20


def summarize(phase: Phase, samples: list[Sample]) -> Phase:
    inside = [s for s in samples if phase.start <= s.t <= phase.end]
    if len(inside) < 2:
        return phase
    phase.seconds = inside[-1].t - inside[0].t
    phase.peak_rss_mib = max(s.rss_kib for s in inside) / 1024
    phase.peak_pss_mib = max(s.pss_kib for s in inside) / 1024
    phase.peak_estimate_mib = max(s.estimate_kib for s in inside) / 1024
    phase.mean_pss_mib = sum(s.pss_kib for s in inside) / len(inside) / 1024
    phase.peak_procs = max(s.procs for s in inside)
    # Reading /proc is not atomic: a child reaped between the reads of its
    # parent and itself is missed once (a dip), or counted twice (a spike).
    # Each value is replaced by the median of the five samples around it.
    cpu = [
        statistics.median(s.cpu_s for s in inside[max(0, i - 2) : i + 3])
        for i in range(len(inside))
    ]
    phase.cpu_seconds = max(0.0, cpu[-1] - cpu[0])
    phase.mean_cores = phase.cpu_seconds / phase.seconds if phase.seconds else 0.0
    peak, j = 0.0, 0
    for i in range(len(inside)):
        while j + 1 < i and inside[i].t - inside[j + 1].t >= PEAK_WINDOW:
            j += 1
        window = inside[i].t - inside[j].t
        if window >= PEAK_WINDOW:
            peak = max(peak, (cpu[i] - cpu[j]) / window)
    phase.peak_cores = peak
    if phase.runs:
        phase.cpu_seconds_per_run = phase.cpu_seconds / phase.runs
    return phase


def count_runs(phases: list[Phase], log: Path) -> None:
    """Finished Ansible runs per phase, from the operator's JSON log lines."""
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        msg = str(entry.get("msg", ""))
        ok = msg == "Ansible-runner exited successfully"
        if not ok and not msg.startswith("Ansible run "):
            continue
        stamp = datetime.datetime.fromisoformat(str(entry["ts"]).replace("Z", "+00:00"))
        for phase in phases:
            if phase.wall_start <= stamp.timestamp() < phase.wall_end + 1:
                phase.runs += 1
                phase.failed_runs += 0 if ok else 1
                break


def _burst_objects(count: int) -> list[dict[str, Any]]:
    api_version = f"{support.GROUP}/{support.VERSION}"
    objects = []
    for i in range(count):
        objects.append(
            {
                "apiVersion": api_version,
                "kind": "Memcached",
                "metadata": {"name": f"burst-mc-{i}"},
                "spec": {"size": 1},
            }
        )
        objects.append(
            {
                "apiVersion": api_version,
                "kind": "WebServer",
                "metadata": {"name": f"burst-ws-{i}"},
                "spec": {"replicas": 1},
            }
        )
    return objects


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
    parser.add_argument("--burst", type=int, default=6, help="Memcacheds and WebServers each")
    parser.add_argument("--idle", type=float, default=15.0, help="seconds of each idle phase")
    parser.add_argument("--max-concurrent-reconciles", type=int, default=0)
    parser.add_argument("--max-concurrent-reconciles-total", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    kubeconfig = Path(args.kubeconfig or support.REPO / ".testbed" / "kubeconfig")
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    core: Any = client.CoreV1Api(api)
    support.ensure_crds(api)

    namespace = support.unique("measure")
    core.create_namespace({"metadata": {"name": namespace}})
    workdir = Path(tempfile.mkdtemp(prefix="ao-measure-"))
    samples = support.samples()
    volumes = support.create_volumes(api, namespace, support.sample_claims(samples))
    extra = ["--proxy-port=0", "--user-metrics-bind-address=0"]
    if args.max_concurrent_reconciles:
        extra.append(f"--max-concurrent-reconciles={args.max_concurrent_reconciles}")
    if args.max_concurrent_reconciles_total:
        extra.append(f"--max-concurrent-reconciles-total={args.max_concurrent_reconciles_total}")
    operator = OperatorProcess(
        kubeconfig=kubeconfig,
        workdir=workdir,
        cwd=support.REPO,
        env={"WATCH_NAMESPACE": namespace},
        args=extra,
    )
    phases: list[Phase] = []
    burst = _burst_objects(args.burst)

    def phase(name: str) -> Phase:
        now, wall = time.monotonic(), time.time()
        if phases:
            phases[-1].end, phases[-1].wall_end = now, wall
            phases[-1].runner_dir_mib = round(_du_mib(operator.runner_dir), 2)
        phases.append(Phase(name=name, start=now, wall_start=wall))
        print(f"[{time.strftime('%H:%M:%S')}] {name}", file=sys.stderr, flush=True)
        return phases[-1]

    started = time.monotonic()
    operator.start()
    assert operator.proc is not None
    sampler = Sampler(operator.proc.pid)
    sampler.start()
    try:
        phase("start-up").notes["ready_seconds"] = round(time.monotonic() - started, 1)
        time.sleep(1)
        phase("idle after start-up")
        time.sleep(args.idle)
        current = phase("samples until all Successful")
        support.kubectl(
            kubeconfig, "apply", "-n", namespace, "-k", str(support.REPO / "config" / "samples")
        )
        current.notes["seconds_to_successful"] = round(
            support.wait_successful(api, namespace, samples, timeout=600), 1
        )
        phase("idle after the samples")
        time.sleep(args.idle)
        current = phase(f"burst: {args.burst} Memcacheds + {args.burst} WebServers")
        support.kubectl(
            kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=support.to_yaml(burst)
        )
        current.notes["seconds_to_successful"] = round(
            support.wait_successful(api, namespace, burst, timeout=900), 1
        )
        phase("idle after the burst")
        time.sleep(args.idle)
        current = phase("deleting every CR (SampleDB finalizer runs)")
        support.kubectl(
            kubeconfig,
            "delete",
            "-n",
            namespace,
            "--wait=true",
            "--timeout=600s",
            "-f",
            "-",
            stdin=support.to_yaml(samples + burst),
        )
        phase("end")
    finally:
        sampler.halt.set()
        sampler.join()
        operator.stop()
        core.delete_namespace(namespace, propagation_policy="Background")
        support.delete_volumes(api, volumes)

    phases[-1].end, phases[-1].wall_end = time.monotonic(), time.time()
    count_runs(phases, operator.log_path)
    for item in phases[:-1]:
        summarize(item, sampler.samples)
    report = {
        "settings": {"burst": args.burst, "args": extra, "cpus": os.cpu_count()},
        "overall_peak_pss_mib": max(s.pss_kib for s in sampler.samples) / 1024,
        "overall_peak_estimate_mib": max(s.estimate_kib for s in sampler.samples) / 1024,
        "overall_peak_rss_mib": max(s.rss_kib for s in sampler.samples) / 1024,
        "phases": [asdict(p) for p in phases[:-1]],
        "samples": [asdict(s) for s in sampler.samples],
        "log": str(operator.log_path),
    }
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
