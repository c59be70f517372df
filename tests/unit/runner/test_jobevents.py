"""Event interpretation without Ansible: failure detection, recap, requeue_after, messages.

The event dicts below have the shape ansible-runner 2.4.3 hands to `event_handler`
(checked against real runs of ansible-core 2.19; see tests/runner/test_ansible_runs.py
for the same scenarios end to end).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ansible_operator.controller import reporting
from ansible_operator.runner.base import FailedTask, RunOutcome, RunResult, Stats
from ansible_operator.runner.jobevents import (
    MAX_CANDIDATES_PER_HOST,
    MAX_MESSAGE_CHARS,
    UNKNOWN_FAILURE,
    JobEvent,
    RunObserver,
    failure_message,
    format_completion,
    is_counted_failure,
    parse_created,
    requeue_period,
)

CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified"
STATS_CREATED = "2026-11-21T05:27:20.942511+00:00"

_counter = iter(range(1, 1_000_000))


def ev(event: str, **data: Any) -> dict[str, Any]:
    """A raw runner event; `created` and `counter` are filled in."""
    return {
        "event": event,
        "uuid": f"uuid-{event}",
        "counter": next(_counter),
        "created": data.pop("created", "2026-11-21T05:27:20.000001+00:00"),
        "stdout": data.pop("stdout", ""),
        "pid": 42,
        "event_data": data,
    }


def failed(task: str, msg: str, *, host: str = "localhost", **extra: Any) -> dict[str, Any]:
    res = extra.pop("res", {"msg": msg, "_ansible_no_log": False})
    return ev(
        "runner_on_failed",
        host=host,
        task=task,
        task_action="ansible.builtin.fail",
        res=res,
        ignore_errors=extra.pop("ignore_errors", None),
        **extra,
    )


def ok(task: str, *, host: str = "localhost", **extra: Any) -> dict[str, Any]:
    return ev("runner_on_ok", host=host, task=task, task_action="debug", **extra)


def unreachable(task: str, *, host: str = "localhost") -> dict[str, Any]:
    res = {"unreachable": True, "msg": "Task failed: cannot connect"}
    return ev("runner_on_unreachable", host=host, task=task, task_action="ping", res=res)


def stats(**per_key: dict[str, int]) -> dict[str, Any]:
    keys = ("changed", "dark", "failures", "ignored", "ok", "processed", "rescued", "skipped")
    data = {key: per_key.get(key, {}) for key in keys}
    return ev("playbook_on_stats", created=STATS_CREATED, **data)


def requeue(period: Any, *, action: str = "requeue_after", event: str = "runner_on_ok") -> dict:
    return ev(event, host="localhost", task="requeue", task_action=action, res={"period": period})


def observe(*raw: dict[str, Any]) -> RunObserver:
    observer = RunObserver()
    for item in raw:
        observer.observe(JobEvent.from_runner(item))
    return observer


# --- failure detection over whole runs ------------------------------------------------

LOOP_RES = {
    "msg": "One or more items failed",
    "failed": True,
    "results": [
        {"item": "true", "failed": False, "msg": ""},
        {"item": "false", "failed": True, "msg": "non-zero return code"},
    ],
}

SCENARIOS: dict[str, tuple[list[dict[str, Any]], list[str]]] = {
    # name: (events of the run, messages of the failures that must count)
    "success": ([ok("a"), stats(ok={"localhost": 1})], []),
    "plain failure": (
        [failed("boom", "plain boom"), stats(failures={"localhost": 1})],
        ["plain boom"],
    ),
    "ignored failure": (
        [
            failed("boom", "ignored", ignore_errors=True),
            ok("after"),
            stats(ignored={"localhost": 1}),
        ],
        [],
    ),
    "rescued failure": (
        [failed("boom", "rescued boom"), ok("rescue"), stats(rescued={"localhost": 1})],
        [],
    ),
    "failure inside rescue": (
        [
            failed("boom", "first boom"),
            failed("in rescue", "rescue boom"),
            stats(failures={"localhost": 1}, rescued={"localhost": 1}),
        ],
        ["rescue boom"],
    ),
    "rescued, then a later failure": (
        [
            failed("boom", "rescued boom"),
            ok("rescue"),
            failed("later", "later boom"),
            stats(failures={"localhost": 1}, rescued={"localhost": 1}),
        ],
        ["later boom"],
    ),
    "loop: items and aggregate count once": (
        [
            ev("runner_item_on_ok", host="localhost", task="loop", res={"msg": ""}),
            ev("runner_item_on_failed", host="localhost", task="loop", res={"msg": "rc 1"}),
            failed("loop", "", res=LOOP_RES),
            stats(failures={"localhost": 1}),
        ],
        ["One or more items failed (item 'false': non-zero return code)"],
    ),
    "unreachable host fails the run": (
        [unreachable("ping"), stats(dark={"localhost": 1})],
        ["Task failed: cannot connect"],
    ),
    "ignored unreachable (dark stays 0)": (
        [unreachable("ping"), ok("after"), stats(ignored={"localhost": 1})],
        [],
    ),
    "recap blames a failure no event showed": (
        [stats(failures={"localhost": 1})],
        [UNKNOWN_FAILURE],
    ),
    "per host: only the blamed host's last failure": (
        [
            failed("boom", "web rescued", host="web"),
            failed("boom", "db fatal", host="db"),
            stats(failures={"db": 1}, rescued={"web": 1}),
        ],
        ["db fatal"],
    ),
    "async failure counts": (
        [
            ev("runner_on_async_failed", host="localhost", task="bg", res={"msg": "async boom"}),
            stats(failures={"localhost": 1}),
        ],
        ["async boom"],
    ),
    "bad requeue period fails the run": (
        [requeue("5"), stats(ok={"localhost": 1})],
        ['Unable to parse time input: time: missing unit in duration "5"'],
    ),
}


@pytest.mark.parametrize(("raw", "messages"), SCENARIOS.values(), ids=SCENARIOS.keys())
def test_counted_failures(raw: list[dict[str, Any]], messages: list[str]) -> None:
    summary = observe(*raw).summary()
    assert [failure.message for failure in summary.failures] == messages
    assert summary.saw_stats


def test_without_recap_nothing_counts() -> None:
    summary = observe(failed("boom", "boom")).summary()
    assert summary == summary.__class__((), None, None, saw_stats=False)


def test_failures_keep_event_order_and_kind() -> None:
    summary = observe(
        failed("boom", "first", host="a"),
        unreachable("ping", host="b"),
        stats(failures={"a": 1}, dark={"b": 1}),
    ).summary()
    assert summary.failures == (
        FailedTask(task="boom", action="ansible.builtin.fail", host="a", message="first"),
        FailedTask(
            task="ping",
            action="ping",
            host="b",
            message="Task failed: cannot connect",
            unreachable=True,
        ),
    )


def test_memory_is_bounded_per_host() -> None:
    observer = observe(*(failed(f"t{i}", f"m{i}") for i in range(10_000)))
    kept = observer._failed["localhost"]
    assert len(kept) == MAX_CANDIDATES_PER_HOST
    assert kept[-1].task.message == "m9999"


def test_stats_are_for_localhost_only() -> None:
    summary = observe(
        stats(
            ok={"localhost": 3, "other": 9},
            changed={"localhost": 2},
            skipped={"localhost": 1},
            failures={"other": 1},
            rescued={"localhost": 1},
            ignored={"localhost": 4},
        )
    ).summary()
    assert summary.stats == Stats(
        ok=3,
        changed=2,
        skipped=1,
        failures=0,
        completion="2026-11-21T05:27:20.942511+00:00",
        rescued=1,
        ignored=4,
    )


def test_last_recap_wins_and_junk_counters_are_zero() -> None:
    summary = observe(
        stats(ok={"localhost": 1}),
        stats(ok={"localhost": "many"}, changed={"localhost": True}),  # type: ignore[dict-item]
    ).summary()
    assert summary.stats is not None
    assert (summary.stats.ok, summary.stats.changed) == (0, 0)


# --- single-event predicates ------------------------------------------------------------

COUNTED = {
    "failed": (failed("t", "m"), True),
    "failed, ignore_errors false": (failed("t", "m", ignore_errors=False), True),
    "failed, ignored": (failed("t", "m", ignore_errors=True), False),
    "failed, ignore_errors as string": (failed("t", "m", ignore_errors="yes"), True),
    "item failed": (ev("runner_item_on_failed", res={"msg": "m"}), False),
    "async failed": (ev("runner_on_async_failed", res={"msg": "m"}), True),
    "unreachable": (unreachable("t"), False),
    "ok": (ok("t"), False),
}


@pytest.mark.parametrize(("raw", "expected"), COUNTED.values(), ids=COUNTED.keys())
def test_is_counted_failure(raw: dict[str, Any], expected: bool) -> None:
    assert is_counted_failure(JobEvent.from_runner(raw)) is expected


REQUEUES: dict[str, tuple[dict[str, Any], str | None]] = {
    "short name": (requeue("30s"), "30s"),
    "FQCN": (requeue("1m", action="operator_sdk.util.requeue_after"), "1m"),
    "loop item": (requeue("2s", event="runner_item_on_ok"), "2s"),
    "resolved FQCN": (
        ev(
            "runner_on_ok",
            task_action="x",
            resolved_action="operator_sdk.util.requeue_after",
            res={"period": "5s"},
        ),
        "5s",
    ),
    "failed short name": (requeue("30s", event="runner_on_failed"), None),
    "failed FQCN (crashed the Go operator)": (
        ev(
            "runner_on_failed",
            task_action="operator_sdk.util.requeue_after",
            res={"msg": "invalid time input"},
        ),
        None,
    ),
    "other module": (requeue("30s", action="debug"), None),
    "period not a string": (requeue(30), None),
    "res not a map": (ev("runner_on_ok", task_action="requeue_after", res="30s"), None),
    "no res": (ev("runner_on_ok", task_action="requeue_after"), None),
}


@pytest.mark.parametrize(("raw", "expected"), REQUEUES.values(), ids=REQUEUES.keys())
def test_requeue_period(raw: dict[str, Any], expected: str | None) -> None:
    assert requeue_period(JobEvent.from_runner(raw)) == expected


def test_first_requeue_wins_and_is_parsed() -> None:
    observer = observe(requeue("1m30s"), requeue("5s"), stats(ok={"localhost": 2}))
    assert observer.summary().requeue_after == 90.0


def test_requeue_reported_even_without_recap() -> None:
    assert observe(requeue("10s")).summary().requeue_after == 10.0


# --- messages ------------------------------------------------------------------------

LONG = "x" * (MAX_MESSAGE_CHARS + 10)
MESSAGES: dict[str, tuple[object, str]] = {
    "msg": ({"msg": "boom"}, "boom"),
    "msg is stripped": ({"msg": "  boom\n"}, "boom"),
    "censored (no_log)": ({"censored": CENSORED}, CENSORED),
    "censored wins over anything": ({"censored": CENSORED, "msg": "secret"}, CENSORED),
    "structured msg": ({"msg": {"b": 1, "a": [2]}}, '{"a": [2], "b": 1}'),
    "empty msg falls back to stderr": ({"msg": "", "stderr": "stderr text"}, "stderr text"),
    "module_stderr": ({"module_stderr": "Traceback ..."}, "Traceback ..."),
    "module_stdout": ({"module_stdout": "garbage"}, "garbage"),
    "nothing usable": ({"changed": False}, UNKNOWN_FAILURE),
    "not a map": ("boom", UNKNOWN_FAILURE),
    "none": (None, UNKNOWN_FAILURE),
    "loop with structured item uses the index": (
        {
            "msg": "One or more items failed",
            "results": [{"item": {"kind": "Pod"}, "failed": True, "msg": "denied"}],
        },
        "One or more items failed (item #0: denied)",
    ),
    "loop item label wins over item": (
        {"results": [{"item": "x", "_ansible_item_label": "lbl", "failed": True, "msg": "m"}]},
        "item 'lbl': m",
    ),
    "loop with censored items": (
        {"msg": "One or more items failed", "results": [{"censored": CENSORED}]},
        "One or more items failed",
    ),
    "long msg is clipped at the end": ({"msg": LONG}, LONG[: MAX_MESSAGE_CHARS - 1] + "…"),
    "long stderr keeps its end": (
        {"stderr": LONG + "END"},
        "…" + (LONG + "END")[-(MAX_MESSAGE_CHARS - 1) :],
    ),
}


@pytest.mark.parametrize(("res", "expected"), MESSAGES.values(), ids=MESSAGES.keys())
def test_failure_message(res: object, expected: str) -> None:
    assert failure_message(res) == expected


DESCRIBE = {
    "task": (
        FailedTask(task="create", action="k8s", host="localhost", message="denied"),
        "task [create] failed on localhost: denied",
    ),
    "role task": (
        FailedTask(task="create", action="k8s", host="localhost", message="m", role="memcached"),
        "task [memcached : create] failed on localhost: m",
    ),
    "unreachable": (
        FailedTask(task="ping", action="ping", host="h", message="m", unreachable=True),
        "task [ping] unreachable on h: m",
    ),
    "no task": (FailedTask(task="", action="", host="", message="rc 3"), "rc 3"),
}


@pytest.mark.parametrize(("failure", "expected"), DESCRIBE.values(), ids=DESCRIBE.keys())
def test_describe_names_the_task(failure: FailedTask, expected: str) -> None:
    assert failure.describe() == expected


FAILURE_MESSAGES = {
    "failed": (
        RunResult(
            ident="1",
            outcome=RunOutcome.FAILED,
            failures=(
                FailedTask(task="a", action="x", host="h", message="m1"),
                FailedTask(task="b", action="x", host="h", message="m2"),
            ),
        ),
        "m1\nm2",
    ),
    "timeout": (
        RunResult(ident="1", outcome=RunOutcome.TIMEOUT, duration=2.5),
        "Ansible run timed out after 2s",
    ),
    "error": (
        RunResult(ident="1", outcome=RunOutcome.ERROR, stdout_tail="x\nERROR! role not found\n"),
        "Ansible run did not complete: ERROR! role not found",
    ),
    "error-no-output": (
        RunResult(ident="1", outcome=RunOutcome.ERROR, rc=127),
        "Ansible run did not complete: ansible-runner exited with code 127",
    ),
}


@pytest.mark.parametrize(
    ("result", "expected"), FAILURE_MESSAGES.values(), ids=FAILURE_MESSAGES.keys()
)
def test_the_failure_condition_explains_a_run_that_did_not_succeed(
    result: RunResult, expected: str
) -> None:
    """What the controller writes (controller/reporting.py) for each way a run fails."""
    assert reporting.failure_message(result) == expected


# --- timestamps ------------------------------------------------------------------------

COMPLETIONS = {
    "micros": ("2026-11-21T05:27:20.942511+00:00", "2026-11-21T05:27:20.942511+00:00"),
    "trailing zeros trimmed": (
        "2026-11-21T05:27:20.942500+00:00",
        "2026-11-21T05:27:20.9425+00:00",
    ),
    "zero fraction dropped": ("2026-11-21T05:27:20.000000+00:00", "2026-11-21T05:27:20+00:00"),
    "no fraction": ("2026-11-21T05:27:20+00:00", "2026-11-21T05:27:20+00:00"),
    "other offset to UTC": ("2026-11-21T07:27:20.5+02:00", "2026-11-21T05:27:20.5+00:00"),
    "naive means UTC": ("2026-11-21T05:27:20.1", "2026-11-21T05:27:20.1+00:00"),
    "Z suffix": ("2026-11-21T05:27:20.25Z", "2026-11-21T05:27:20.25+00:00"),
}


@pytest.mark.parametrize(("created", "expected"), COMPLETIONS.values(), ids=COMPLETIONS.keys())
def test_completion_go_layout(created: str, expected: str) -> None:
    moment = parse_created(created)
    assert moment is not None
    assert format_completion(moment) == expected


def test_unparseable_created_falls_back_to_now() -> None:
    assert parse_created("yesterday") is None
    before = datetime.now(UTC).replace(microsecond=0)
    summary = observe({**stats(), "created": "yesterday"}).summary()
    assert summary.stats is not None
    completion = datetime.fromisoformat(summary.stats.completion)
    assert before <= completion <= datetime.now(UTC) + timedelta(seconds=1)


def test_format_completion_converts_aware_times() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=timezone(timedelta(hours=-5)))
    assert format_completion(moment) == "2026-01-02T08:04:05.6+00:00"


# --- typed events -----------------------------------------------------------------------


def test_job_event_from_runner_is_tolerant_and_read_only() -> None:
    event = JobEvent.from_runner({"event": "verbose", "counter": "7", "pid": "x", "stdout": None})
    assert (event.event, event.counter, event.pid, event.stdout) == ("verbose", 0, None, "")
    assert (event.host, event.res, event.ignore_errors) == (None, None, False)
    with pytest.raises(TypeError):
        event.event_data["x"] = 1  # type: ignore[index]


def test_job_event_fields() -> None:
    raw = failed("create", "m", role="memcached", task_args="a=1", task_path="/r/t.yml:3")
    event = JobEvent.from_runner(raw)
    assert (event.event, event.host, event.task, event.role) == (
        "runner_on_failed",
        "localhost",
        "create",
        "memcached",
    )
    assert (event.task_args, event.task_path, event.task_action) == (
        "a=1",
        "/r/t.yml:3",
        "ansible.builtin.fail",
    )
    assert event.res == {"msg": "m", "_ansible_no_log": False}
    assert event.created == "2026-11-21T05:27:20.000001+00:00"
