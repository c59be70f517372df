"""A fleet of sharded operator replicas on the testbed, and what their runs recorded.

Used by the sharding tests (and bench/ scenarios): `Fleet` starts replicas of
the sharding test project (tests/sharding/project) as real processes with
short Lease timings; `runs()` reads the ConfigMaps the recorder playbook
leaves for every run (start, end, member); `overlaps()` finds two runs of one
CR whose time spans intersect.
"""

from __future__ import annotations

import itertools
import re
import signal
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.e2e.harness import OperatorProcess

PROJECT = Path(__file__).parent / "project"
GROUP, VERSION, PLURAL, KIND = "sharding.example.com", "v1alpha1", "shardees", "Shardee"
CLAIM = "sharding.ansible.sdk.operatorframework.io/claim"
RECONCILED_BY = "sharding.ansible.sdk.operatorframework.io/reconciled-by"
GROUP_LABEL = "sharding.ansible.sdk.operatorframework.io/group"

# Short Lease timings keep the tests fast: a dead member is dropped after 8 s.
# The renew deadline keeps 6 s of slack: on 2 busy shared cores an API request
# can take seconds, and a member that misses it stops (safely, but the test fails).
LEASE_DURATION = 8.0
TIMINGS = (
    f"--leader-elect-lease-duration={LEASE_DURATION:g}s",
    "--leader-elect-renew-deadline=6s",
    "--leader-elect-retry-period=1s",
)


@dataclass(frozen=True)
class Run:
    cr: str
    member: str
    replica: str
    start: float
    end: float | None
    value: str


class Fleet:
    """Replicas of one shard group (named after the namespace), watching one namespace."""

    def __init__(self, *, kubeconfig: Path, workdir: Path, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.namespace = namespace
        self.group = f"shards-{namespace}"
        self.replicas: dict[str, OperatorProcess] = {}

    def start(
        self,
        name: str,
        *,
        sharded: bool = True,
        extra: Sequence[str] = (),
        wait: bool = True,
        timings: Sequence[str] = TIMINGS,
    ) -> OperatorProcess:
        args = [f"--leader-election-namespace={self.namespace}", *timings, *extra]
        if sharded:
            args += ["--sharding", f"--leader-election-id={self.group}"]
        replica = OperatorProcess(
            kubeconfig=self.kubeconfig,
            workdir=self.workdir,
            args=args,
            env={"WATCH_NAMESPACE": self.namespace, "SHARD_REPLICA": name},
            name=name,
            cwd=PROJECT,
        ).start(wait_ready=wait)
        self.replicas[name] = replica
        return replica

    def kill(self, name: str) -> float:
        """SIGKILL one replica; the wall-clock time of the kill."""
        replica = self.replicas.pop(name)
        killed_at = time.time()
        replica.signal(signal.SIGKILL)
        replica.wait(10)
        return killed_at

    def stop_all(self) -> None:
        for replica in self.replicas.values():
            replica.stop()
        self.replicas.clear()

    def metric(self, name: str, metric: str) -> float | None:
        text = self.replicas[name].metrics()
        found = re.search(rf"^{re.escape(metric)}(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else None

    def members_seen(self, count: int) -> bool:
        """Every running replica sees exactly `count` live members."""
        return all(
            self.metric(name, "ansible_operator_shard_members") == count for name in self.replicas
        )


def create_shardees(api: Any, namespace: str, names: Iterable[str], spec: dict[str, Any]) -> None:
    custom = client.CustomObjectsApi(api)
    for name in names:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": name},
            "spec": spec,
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def shardees(api: Any, namespace: str) -> list[dict[str, Any]]:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL
    )
    return list(listed["items"])


def successful(obj: dict[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Successful":
            return bool(cond.get("status") == "True")
    return False


def all_successful(api: Any, namespace: str, count: int) -> bool:
    items = shardees(api, namespace)
    return len(items) == count and all(successful(obj) for obj in items)


def runs(api: Any, namespace: str) -> list[Run]:
    listed = client.CoreV1Api(api).list_namespaced_config_map(namespace, label_selector="run-of")
    found = []
    for cm in listed.items:
        data = cm.data or {}
        found.append(
            Run(
                cr=data["cr"],
                member=data.get("member", ""),
                replica=data.get("replica", ""),
                start=float(data["start"]),
                end=float(data["end"]) if data.get("end") else None,
                value=data.get("value", ""),
            )
        )
    return found


def overlaps(records: list[Run], *, cut_off: float | None = None) -> list[tuple[Run, Run]]:
    """Pairs of runs of one CR that were running at the same time.

    A run without an end is one a SIGKILL interrupted: it ran until `cut_off`
    (the kill; after it, its replica's API proxy is gone, so an orphaned
    Ansible process can change nothing), or forever if no cut-off is given.
    """
    by_cr: dict[str, list[Run]] = {}
    for run in records:
        by_cr.setdefault(run.cr, []).append(run)
    found = []
    for group in by_cr.values():
        group.sort(key=lambda run: run.start)
        for first, second in itertools.pairwise(group):
            end = first.end if first.end is not None else (cut_off or float("inf"))
            if second.start < end:
                found.append((first, second))
    return found


def per_replica(records: Iterable[Run]) -> Counter[str]:
    return Counter(run.replica for run in records)
