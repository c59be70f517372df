"""What kube.fakekube.FakeKube needs to serve lists and watches: selectors, an event log, streams.

Used only by kube.fakekube (the in-memory API server for tests):

* `selector_matches`: the API's string form of label selectors (`a=b`,
  `a==b`, `a!=b`, `a in (b,c)`, `a notin (b,c)`, `a`, `!a`, comma-separated),
  which `KubeApi.list_page` and `watch` take;
* `EventLog`: the events of one kind in order, each at the resourceVersion
  its write got, with etcd's compaction: a watch from a version older than
  the oldest kept is refused with 410 Gone (kube.kubeapi.is_gone);
* `FakeWatchStream`: one watch, reading the log from a position and waiting
  (on the fake's condition variable) for more, until stopped, ended by the
  test (`FakeKube.end_watches`) or past its timeout.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ansible_operator.errors import ApiError
from ansible_operator.kube.kubeapi import GONE, WatchEvent

_SET = re.compile(
    r"^\s*(!?)([^\s!=(),]+)\s*(?:(in|notin)\s*\(([^)]*)\)|(==|=|!=)\s*([^\s,]*))?\s*$"
)


def _requirements(selector: str) -> list[str]:
    """Split on the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Do `labels` satisfy `selector` (string form; "" matches everything)?
    ApiError 400 for a selector the API server would refuse to parse."""
    for requirement in _requirements(selector):
        found = _SET.match(requirement)
        if found is None:
            raise ApiError(
                400, f"unable to parse requirement: {requirement!r}", reason="BadRequest"
            )
        negated, key, set_op, values, op, value = found.groups()
        if negated and (set_op or op):
            raise ApiError(
                400, f"unable to parse requirement: {requirement!r}", reason="BadRequest"
            )
        present = key in labels
        if set_op:
            members = {v.strip() for v in values.split(",") if v.strip()}
            ok = (labels.get(key) in members) if set_op == "in" else labels.get(key) not in members
        elif op in ("=", "=="):
            ok = present and labels[key] == value
        elif op == "!=":
            ok = labels.get(key) != value
        else:
            ok = present != bool(negated)
        if not ok:
            return False
    return True


@dataclass(frozen=True, slots=True)
class _Entry:
    version: int
    namespace: str
    event: WatchEvent


class EventLog:
    """The events of one kind, oldest first; positions are absolute (never reused)."""

    def __init__(self, *, capacity: int) -> None:
        self.capacity = capacity
        self._entries: list[_Entry] = []
        self._dropped = 0  # entries forgotten from the front
        self.compacted = 0  # the highest version forgotten

    @property
    def end(self) -> int:
        """The position the next entry will get."""
        return self._dropped + len(self._entries)

    def append(self, version: int, namespace: str, event: WatchEvent) -> None:
        self._entries.append(_Entry(version, namespace, event))
        if len(self._entries) > self.capacity:
            self._forget(1)

    def compact(self) -> None:
        """Forget every entry, as etcd's compaction does: older versions get 410."""
        self._forget(len(self._entries))

    def _forget(self, count: int) -> None:
        for entry in self._entries[:count]:
            self.compacted = max(self.compacted, entry.version)
        del self._entries[:count]
        self._dropped += count

    def position_after(self, version: int) -> int:
        """The position of the first entry newer than `version`; 410 if some are forgotten."""
        if version < self.compacted:
            raise ApiError(
                GONE, f"too old resource version: {version} ({self.compacted})", reason="Expired"
            )
        for index, entry in enumerate(self._entries):
            if entry.version > version:
                return self._dropped + index
        return self.end

    def read(self, position: int) -> list[_Entry]:
        """The entries from `position` on; 410 if the first of them was forgotten."""
        if position < self._dropped:
            raise ApiError(GONE, "too old resource version", reason="Expired")
        return self._entries[position - self._dropped :]


class FakeWatchStream:
    """A WatchStream (kube.kubeapi) on an EventLog; see the module docstring.

    `lock` and `changed` are the fake's (its writes notify `changed`); `ended`
    says whether the test ended the watches opened before this one.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        position: int,
        keep: Callable[[str, WatchEvent], bool],
        changed: threading.Condition,
        ended: Callable[[], bool],
        timeout: float,
        first: list[WatchEvent],
    ) -> None:
        self._log = log
        self._position = position
        self._keep = keep
        self._changed = changed
        self._ended = ended
        self._deadline = time.monotonic() + timeout
        self._first = first
        self._stopped = False

    def __iter__(self) -> Iterator[WatchEvent]:
        yield from self._first
        while True:
            with self._changed:
                entries = self._log.read(self._position)
                while not entries and not self._done():
                    self._changed.wait(max(0.0, self._deadline - time.monotonic()))
                    entries = self._log.read(self._position)
                self._position += len(entries)
            if not entries:
                return
            for entry in entries:
                if self._stopped:
                    return
                if self._keep(entry.namespace, entry.event):
                    yield entry.event

    def _done(self) -> bool:
        return self._stopped or self._ended() or time.monotonic() >= self._deadline

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def close(self) -> None:
        self.stop()
