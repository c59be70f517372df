"""The 2.18 behaviours a run relied on, as log warnings and a metric (docs/porting.md).

Where it sits: `build_run_request` (launch/request.py) calls `observing(...)` for
every run of a reconcile, a drift check or a plan: it chains a
`compat.notices.NoticeObserver` to the run's `on_event` hook (launch/tasklog.py's
logger; the planning engine, plan/engine.py, chains it after its journal). Each
notice is logged once per run and task as a warning naming the task, its file and
line and what the 2.18 compatibility mode did, and handed to `count` (the
`ansible_operator_compat_deprecations_total` metric, or a plan's list).
"""

from __future__ import annotations

from collections.abc import Callable

from ansible_operator.compat.notices import Notice, NoticeObserver, RunNotes
from ansible_operator.observability.logging import ObjectLogger
from ansible_operator.runner.jobevents import JobEvent

__all__ = ["NoticeCount", "observing"]

NoticeCount = Callable[[Notice], None]
"""Told every notice after it is logged (metrics, a plan's report)."""

_HELP = "docs/porting.md"


def _reporter(log: ObjectLogger, count: NoticeCount | None) -> Callable[[Notice], None]:
    def report(notice: Notice) -> None:
        log.warning(
            "2.18 behaviour (%s) in task %r at %s: %s [%s]",
            notice.what,
            notice.task,
            notice.task_path or "?",
            notice.message,
            _HELP,
            extra={"task": notice.task, "task_path": notice.task_path, "compat": notice.what},
        )
        if count is not None:
            count(notice)

    return report


def observing(
    on_event: Callable[[JobEvent], None] | None,
    *,
    notes: RunNotes,
    log: ObjectLogger,
    count: NoticeCount | None,
) -> Callable[[JobEvent], None]:
    """`on_event` followed by the run's notice observer."""
    observer = NoticeObserver(notes=notes, report=_reporter(log, count))

    def both(event: JobEvent) -> None:
        if on_event is not None:
            on_event(event)
        observer.observe(event.event, event.stdout, event.event_data)

    return both
