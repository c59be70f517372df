"""Takeover: claim all of a dead member's CRs at once, then let the workers run them.

Called by controller.sharding.shard: each membership round (`Shard.tick`)
submits the CRs this replica owns whose claim names a member that is no
longer live; this module's thread claims them one after another, with the
same conditional write as the reconcile gate (controller.sharding.claims,
carrying the resourceVersion the claim was seen at), and queues each one for
a run. So ownership of a dead member's CRs moves within one membership round
of its death, however long the workers take to run them all; without it
each CR would be claimed only when a worker became free for it.

Why this keeps "never two runs of one CR at once" (docs/sharding.md): a write
is made only if, just before it, this replica's own Lease is valid, the CR is
still owned here and the claim, as last seen by the watch, still names the
same member and that member is still judged dead; the write is conditional
on the resourceVersion that claim was seen at. No worker of this replica runs the CR at that
moment (it runs a CR only while the claim names this replica); a worker's
gate racing for the same claim makes the same conditional write, so one of
the two gets a conflict. A conflict or any error leaves the CR to the gate,
which re-reads it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ansible_operator.controller.contract import Key
from ansible_operator.controller.sharding import claims
from ansible_operator.errors import Conflict, NotFound, OperatorError
from ansible_operator.kube.client import JSON, KubeApi, ResourceInfo

log = logging.getLogger("ansible_operator.sharding")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A CR to take over, as the directory saw it."""

    key: Key
    holder: str  # the dead member its claim names
    api_version: str
    kind: str


class Takeover:
    """A thread that claims submitted candidates; see the module docstring."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        member: str,
        current: Callable[[Candidate], int | None],
        claimed: Callable[[Candidate, JSON], None],
        fallback: Callable[[Key], None],
    ) -> None:
        self.kube = kube
        self.member = member
        self.current = current
        self.claimed = claimed
        self.fallback = fallback
        self._lock = threading.Lock()
        self._pending: dict[Key, Candidate] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._resources: dict[tuple[str, str], ResourceInfo] = {}
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="shard-takeover", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10.0)

    def submit(self, candidates: Iterable[Candidate]) -> None:
        with self._lock:
            for candidate in candidates:
                self._pending.setdefault(candidate.key, candidate)
            if self._pending:
                self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self.drain()

    def drain(self) -> None:
        """Claim every pending candidate (the thread's loop; tests call it directly)."""
        with self._lock:
            batch, self._pending = list(self._pending.values()), {}
            self._wake.clear()
        for candidate in batch:
            if self._stop.is_set():
                return
            self._claim(candidate)

    def _resource(self, candidate: Candidate) -> ResourceInfo:
        found = self._resources.get((candidate.api_version, candidate.kind))
        if found is None:
            group, _, version = candidate.api_version.rpartition("/")
            found = self.kube.resource(group=group, version=version, kind=candidate.kind)
            self._resources[(candidate.api_version, candidate.kind)] = found
        return found

    def _claim(self, candidate: Candidate) -> None:
        version = self.current(candidate)
        if version is None:
            return  # no longer due: claimed, moved, deleted, or the member is back
        key = candidate.key
        seen = {
            "metadata": {
                "namespace": key.namespace,
                "name": key.name,
                "resourceVersion": str(version),
            }
        }
        try:
            result = claims.claim(self.kube, self._resource(candidate), seen, member=self.member)
        except NotFound:
            return  # deleted meanwhile
        except Conflict:
            self.fallback(key)  # changed since seen: the gate re-reads it
            return
        except OperatorError as err:  # ApiError included
            log.warning("taking over %s failed: %s", key, err)
            self.fallback(key)
            return
        self.claimed(candidate, result)
