"""What one planned run did, in the order it did it.

Where it sits: `plan.command` hands `Journal.record` to the API proxy as its
`on_dry_run` hook (called from proxy handler threads, once per write of the
read-only run, before the answer reaches Ansible) and `Journal.observe` to the
runner as the run's `on_event` hook (called on the runner's thread, once per
Ansible job event). `plan.changes` reads the entries afterwards.

For each write the journal also reads the object as it is live (`before`).
Every write of the run was a dry run, so nothing the run sent changed it: the
live object is what the write would have changed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.errors import OperatorError
from ansible_operator.kube import deepjson
from ansible_operator.kube.client import Kube
from ansible_operator.proxy import DryRunWrite, Owner
from ansible_operator.runner.jobevents import JobEvent

# Task results that tell what a check-mode run would have done.
_SKIPPED = frozenset({"runner_on_skipped"})
_OK = frozenset({"runner_on_ok"})


@dataclass(frozen=True, slots=True)
class WriteEntry:
    """One dry-run write (or refused request) of the run."""

    write: DryRunWrite
    before: dict[str, Any] | None  # the live object the write addressed; None if missing
    after: Any  # the API server's answer, decoded (None if not JSON)


@dataclass(frozen=True, slots=True)
class TaskEntry:
    """One task result of interest: a skipped task or an operator_sdk.util result."""

    event: str
    task: str
    action: str
    result: Mapping[str, Any]


Entry = WriteEntry | TaskEntry


def _action(event: JobEvent) -> str:
    return event.resolved_action or event.task_action or ""


class Journal:
    """Thread-safe, append-only list of what the run did."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._entries: list[Entry] = []
        self._lock = threading.Lock()

    @property
    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries)

    def _append(self, entry: Entry) -> None:
        with self._lock:
            self._entries.append(entry)

    # -- the proxy's hook ------------------------------------------------------

    def record(self, owner: Owner, write: DryRunWrite) -> None:
        after = _decode(write.response)
        before = None if write.refused else self._live(write, after)
        self._append(WriteEntry(write=write, before=before, after=after))

    def _live(self, write: DryRunWrite, after: Any) -> dict[str, Any] | None:
        info = write.info
        name = info.name
        namespace = info.namespace
        if isinstance(after, dict) and isinstance(after.get("metadata"), dict):
            name = name or str(after["metadata"].get("name") or "")
            namespace = namespace or str(after["metadata"].get("namespace") or "")
        if not info.is_resource or not name:
            return None
        try:
            res = self.kube.resource_for_plural(
                group=info.group, version=info.version, plural=info.resource
            )
            path = res.path(namespace=namespace, name=name, subresource=info.subresource)
            live = self.kube.request("GET", path)
        except OperatorError:
            return None  # missing (404), or not readable: shown as a creation
        return live if isinstance(live, dict) else None

    # -- the runner's hook -----------------------------------------------------

    def observe(self, event: JobEvent) -> None:
        if event.event not in _SKIPPED | _OK:
            return
        result = event.event_data.get("res")
        if not isinstance(result, Mapping):
            return
        action = _action(event)
        util = action.rpartition(".")[2] in _UTIL_MODULES
        if event.event in _OK and not util and not mentions_check_mode(result):
            return
        self._append(
            TaskEntry(event=event.event, task=event.task or "", action=action, result=result)
        )


# The operator_sdk.util modules whose check-mode results a plan shows.
_UTIL_MODULES = frozenset({"k8s_status", "k8s_event", "requeue_after", "osdk_metric"})


def mentions_check_mode(result: Mapping[str, Any]) -> bool:
    """A result saying the module did not do its work because of check mode
    ("remote module (x) does not support check mode", "Command would have run
    if not in check mode")."""
    message = result.get("msg")
    return isinstance(message, str) and ("check mode" in message or "check_mode" in message)


def _decode(data: bytes) -> Any:
    if not data:
        return None
    try:
        return deepjson.loads(data)
    except ValueError:
        return None
