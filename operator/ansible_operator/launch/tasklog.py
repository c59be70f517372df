"""`--ansible-log-events`: Ansible task results as the operator's own log lines.

The reconciler passes `task_logger(...)` as the run's `on_event` callback; the
runner calls it, in the run's thread, for every job event. `tasks` (the
default) writes one JSON line per task result with the CR's namespace and name
(from the object logger); `everything` writes one line per event; `nothing`
writes none. Only the task's name, action, host, role, changed/failed flags,
duration and, for failures, Ansible's own message are logged: never the task's
arguments or module results, which may hold secrets (Ansible already hides the
message of `no_log` tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_operator.observability.logging import ObjectLogger
from ansible_operator.runner.jobevents import JobEvent

RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
    "runner_on_async_failed": "failed",
}


def _fields(event: JobEvent) -> dict[str, Any]:
    data = event.event_data
    fields: dict[str, Any] = {"event_type": event.event}
    for key in ("task", "task_action", "host", "role", "duration"):
        value = data.get(key)
        if isinstance(value, str | int | float) and value != "":
            fields[key] = value
    res = event.res
    if res is not None:
        fields["changed"] = bool(res.get("changed", False))
    return fields


def task_logger(level: str, logger: ObjectLogger) -> Callable[[JobEvent], None] | None:
    if level == "nothing":
        return None
    everything = level == "everything"

    def on_event(event: JobEvent) -> None:
        result = RESULT_EVENTS.get(event.event)
        if result is None and not everything:
            return
        fields = _fields(event)
        if result in {"failed", "unreachable"}:
            res = event.res or {}
            message = res.get("msg")
            if isinstance(message, str):
                fields["message"] = message[:2000]
            ignored = event.ignore_errors
            logger.log(20 if ignored else 40, "[playbook task %s]", result, extra=fields)
            return
        logger.info("[playbook task %s]" % (result or event.event), extra=fields)

    return on_event
