"""Typed ansible-runner job events and what they mean for one run.

Where this sits: runner/ansible.py receives every job event ansible-runner decodes
(through its `event_handler` hook), wraps it in a `JobEvent`, feeds it to the run's
`RunObserver` and passes it on to the caller's `on_event` hook (logging, metrics).
After the run it asks the observer for the failures, the recap and the requested
requeue. Everything here is pure: no I/O, no Ansible import, unit-testable with dicts.

Failure semantics (the Go operator's rules, with its bugs fixed):

* a task fails the run when `runner_on_failed` (or `runner_on_async_failed`) is not
  marked `ignore_errors`; a failed loop emits one `runner_item_on_failed` per item plus
  one aggregate `runner_on_failed`, and only the aggregate counts;
* an unreachable host fails the run (the Go operator counts it as success), unless the
  task said `ignore_unreachable` - Ansible then leaves the recap's `dark` count at 0;
* a failure handled by a block's `rescue` does not fail the run (the Go operator gets
  this wrong, AOP issue #88). ansible-runner does not flag rescued failures, but the
  recap (`playbook_on_stats`) counts per host the failures that were NOT rescued; an
  unrescued failure ends the host's play, so those are the host's last failed events.
  The observer therefore keeps the last few candidates per host and, at the recap,
  reports the last `failures[host]` failed and the last `dark[host]` unreachable ones.

Memory stays bounded: only a handful of candidates per host are kept, never the events.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from ansible_operator.config.durations import DurationError, parse_go_duration
from ansible_operator.runner.base import FailedTask, Stats

__all__ = [
    "FAILED",
    "STATS",
    "UNKNOWN_FAILURE",
    "UNREACHABLE",
    "JobEvent",
    "RunObserver",
    "RunSummary",
    "failed_task",
    "failure_message",
    "format_completion",
    "host_stats",
    "is_counted_failure",
    "parse_created",
    "requeue_period",
]

FAILED = "runner_on_failed"
ASYNC_FAILED = "runner_on_async_failed"
UNREACHABLE = "runner_on_unreachable"
STATS = "playbook_on_stats"
_REQUEUE_EVENTS = frozenset({"runner_on_ok", "runner_item_on_ok"})
_REQUEUE_ACTIONS = frozenset({"requeue_after", "operator_sdk.util.requeue_after"})

UNKNOWN_FAILURE = "unknown playbook failure"
MAX_MESSAGE_CHARS = 4096
"""Failure messages end up in a status condition; a module dumping megabytes must not."""
MAX_CANDIDATES_PER_HOST = 16
"""Failed events kept per host until the recap says how many of them counted."""
_FALLBACK_KEYS = ("stderr", "module_stderr", "module_stdout")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    # Recap counters are ints; anything else (a broken plugin) counts as 0, never crashes.
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One ansible-runner job event. `event_data` is read-only and already censored by
    Ansible for `no_log` tasks (`res` becomes `{"censored": ...}`)."""

    event: str
    uuid: str = ""
    counter: int = 0
    created: str = ""
    stdout: str = ""
    pid: int | None = None
    event_data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_runner(cls, raw: Mapping[str, Any]) -> JobEvent:
        """Wrap the dict ansible-runner hands to `event_handler`; tolerant of missing keys."""
        data = raw.get("event_data")
        pid = raw.get("pid")
        return cls(
            event=_text(raw.get("event")) or "",
            uuid=_text(raw.get("uuid")) or "",
            counter=_count(raw.get("counter")),
            created=_text(raw.get("created")) or "",
            stdout=_text(raw.get("stdout")) or "",
            pid=pid if isinstance(pid, int) else None,
            event_data=MappingProxyType(dict(data) if isinstance(data, Mapping) else {}),
        )

    def _field(self, key: str) -> str | None:
        return _text(self.event_data.get(key))

    @property
    def host(self) -> str | None:
        return self._field("host")

    @property
    def task(self) -> str | None:
        return self._field("task")

    @property
    def task_action(self) -> str | None:
        return self._field("task_action")

    @property
    def resolved_action(self) -> str | None:
        return self._field("resolved_action")

    @property
    def role(self) -> str | None:
        return self._field("role")

    @property
    def task_args(self) -> str | None:
        return self._field("task_args")

    @property
    def task_path(self) -> str | None:
        return self._field("task_path")

    @property
    def ignore_errors(self) -> bool:
        return self.event_data.get("ignore_errors") is True

    @property
    def res(self) -> Mapping[str, Any] | None:
        res = self.event_data.get("res")
        return res if isinstance(res, Mapping) else None


def is_counted_failure(event: JobEvent) -> bool:
    """A failed task whose error was not ignored (it may still turn out to be rescued)."""
    return event.event in (FAILED, ASYNC_FAILED) and not event.ignore_errors


def _clip(text: str, *, keep_end: bool = False) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    if keep_end:  # stderr: the interesting part is at the end
        return "…" + text[-(MAX_MESSAGE_CHARS - 1) :]
    return text[: MAX_MESSAGE_CHARS - 1] + "…"


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if value is None:
        return ""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except ValueError:  # circular structures cannot come from JSON, but stay safe
        return str(value)


def _first_failed_item(results: object) -> str:
    """`item <label>: <msg>` for the first failed item of a loop result, or ""."""
    if not isinstance(results, list):
        return ""
    for index, item in enumerate(results):
        if not isinstance(item, Mapping) or item.get("failed") is not True:
            continue
        label = item.get("_ansible_item_label", item.get("item"))
        # Structured items (k8s definitions ...) would swamp the message: use the index.
        shown = repr(label) if isinstance(label, str | int | float) else f"#{index}"
        return f"item {shown}: {failure_message(item, loops=False)}"
    return ""


def failure_message(res: object, *, loops: bool = True) -> str:
    """The message of a failed result: `msg`, the first failed loop item, stderr, or the
    Go operator's "unknown playbook failure". Censored (no_log) results stay censored."""
    if not isinstance(res, Mapping):
        return UNKNOWN_FAILURE
    censored = res.get("censored")
    if isinstance(censored, str) and censored:
        return _clip(censored)
    text = _as_text(res.get("msg"))
    item = _first_failed_item(res.get("results")) if loops else ""
    if item:
        text = f"{text} ({item})" if text else item
    if text:
        return _clip(text)
    for key in _FALLBACK_KEYS:
        fallback = _as_text(res.get(key))
        if fallback:
            return _clip(fallback, keep_end=True)
    return UNKNOWN_FAILURE


def failed_task(event: JobEvent) -> FailedTask:
    """The `FailedTask` a failed or unreachable event stands for."""
    return FailedTask(
        task=event.task or "",
        action=event.task_action or "",
        host=event.host or "",
        message=failure_message(event.res),
        role=event.role or "",
        unreachable=event.event == UNREACHABLE,
    )


def requeue_period(event: JobEvent) -> str | None:
    """The `period` a successful `requeue_after` task returned, else None.

    Only successful results count: a failed requeue_after (bad input) is an ordinary
    failed task, where the Go operator crashed the reconcile on a nil assertion.
    """
    if event.event not in _REQUEUE_EVENTS:
        return None
    if not ({event.task_action, event.resolved_action} & _REQUEUE_ACTIONS):
        return None
    res = event.res
    return _text(res.get("period")) if res is not None else None


def parse_created(text: str) -> datetime | None:
    """The `created` timestamp of an event as an aware datetime (naive means UTC)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def format_completion(moment: datetime) -> str:
    """Go layout `2006-01-02T15:04:05.99999999+00:00`: UTC, fraction trimmed, literal offset."""
    utc = moment.astimezone(UTC)
    fraction = f"{utc.microsecond:06d}".rstrip("0")
    stamp = utc.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{fraction}+00:00" if fraction else f"{stamp}+00:00"


def host_stats(event: JobEvent, *, host: str = "localhost") -> Stats:
    """The recap counters of one host from a `playbook_on_stats` event."""
    data = event.event_data

    def count(key: str) -> int:
        per_host = data.get(key)
        return _count(per_host.get(host)) if isinstance(per_host, Mapping) else 0

    created = parse_created(event.created) or datetime.now(UTC)
    return Stats(
        ok=count("ok"),
        changed=count("changed"),
        skipped=count("skipped"),
        failures=count("failures"),
        completion=format_completion(created),
        unreachable=count("dark"),
        rescued=count("rescued"),
        ignored=count("ignored"),
    )


@dataclass(frozen=True)
class RunSummary:
    """What the observer concluded once the run is over."""

    failures: tuple[FailedTask, ...]
    stats: Stats | None
    requeue_after: float | None
    saw_stats: bool


@dataclass
class _Candidate:
    counter: int
    task: FailedTask


class RunObserver:
    """Consumes the events of one run, keeping only what the verdict needs."""

    def __init__(self, *, host: str = "localhost") -> None:
        self._host = host
        self._failed: dict[str, deque[_Candidate]] = {}
        self._unreachable: dict[str, deque[_Candidate]] = {}
        self._stats_event: JobEvent | None = None
        self._requeue_after: float | None = None
        self._requeue_errors: list[_Candidate] = []
        self.events_seen = 0

    def observe(self, event: JobEvent) -> None:
        self.events_seen += 1
        if event.event == STATS:
            self._stats_event = event  # the last recap wins, as in the Go operator
        elif is_counted_failure(event):
            self._remember(self._failed, event)
        elif event.event == UNREACHABLE:
            self._remember(self._unreachable, event)
        elif self._requeue_after is None and not self._requeue_errors:
            self._note_requeue(event)

    @staticmethod
    def _remember(store: dict[str, deque[_Candidate]], event: JobEvent) -> None:
        queue = store.setdefault(event.host or "", deque(maxlen=MAX_CANDIDATES_PER_HOST))
        queue.append(_Candidate(event.counter, failed_task(event)))

    def _note_requeue(self, event: JobEvent) -> None:
        # The first requeue_after of a run wins, as the Go operator stops reading there.
        period = requeue_period(event)
        if period is None:
            return
        try:
            self._requeue_after = parse_go_duration(period)
        except DurationError as error:
            broken = failed_task(event)
            message = f"Unable to parse time input: {error}"
            task = FailedTask(
                task=broken.task, action=broken.action, host=broken.host, message=message
            )
            self._requeue_errors.append(_Candidate(event.counter, task))

    @property
    def saw_stats(self) -> bool:
        return self._stats_event is not None

    def summary(self) -> RunSummary:
        stats_event = self._stats_event
        if stats_event is None:
            # Without a recap nobody can tell rescued from fatal failures: report none.
            return RunSummary((), None, self._requeue_after, saw_stats=False)
        counted = [
            *self._pick(stats_event, "failures", self._failed),
            *self._pick(stats_event, "dark", self._unreachable),
            *self._requeue_errors,
        ]
        counted.sort(key=lambda candidate: candidate.counter)
        return RunSummary(
            tuple(candidate.task for candidate in counted),
            host_stats(stats_event, host=self._host),
            self._requeue_after,
            saw_stats=True,
        )

    @staticmethod
    def _pick(
        stats_event: JobEvent, key: str, store: dict[str, deque[_Candidate]]
    ) -> list[_Candidate]:
        """The last `stats[key][host]` candidates of every host the recap blames."""
        per_host = stats_event.event_data.get(key)
        if not isinstance(per_host, Mapping):
            return []
        picked: list[_Candidate] = []
        for host, value in per_host.items():
            wanted = _count(value)
            if wanted <= 0:
                continue
            known = list(store.get(str(host), ()))[-wanted:]
            picked.extend(known)
            if len(known) < wanted:
                # The recap blames more than the events showed: say so rather than hide it.
                task = FailedTask(task="", action="", host=str(host), message=UNKNOWN_FAILURE)
                picked.append(_Candidate(stats_event.counter, task))
        return picked
