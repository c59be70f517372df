"""compat.notices: deprecations found in the events of both Ansible lines, and the proxy's notes."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.compat.notices import (
    BROKEN_CONDITIONAL,
    EMPTY_TEMPLATE,
    NATIVE_TYPE,
    Notice,
    NoticeObserver,
    RunNotes,
)

TASK = {"task": "Scale", "task_path": "/opt/ansible/roles/r/tasks/main.yml:12"}
# As ansible-runner hands them over (ansible-core 2.21.5 and 2.18.19, seen in runs).
DEPRECATION_221 = {
    "msg": "Conditional result (True) was derived from value of type 'int' at "
    "'/opt/ansible/roles/r/tasks/main.yml:13:11'. Conditionals must have a boolean result.",
    "version": "2.23",
}
STDOUT_218 = (
    "\x1b[0;35m[DEPRECATION WARNING]: Conditional result at location /opt/r.yml\x1b[0m\r\n"
    "\x1b[0;35m 15:13 was of type 'int'. Conditional results should only be True or False. The"
    "\x1b[0m\r\n\x1b[0;35m result was interpreted as True.\x1b[0m"
)
EMPTY_LOOKUP = {
    "msg": "[ansible-operator compat: empty-template-lookup] lookup('template', 'x.j2')"
}
OTHER = {"msg": "The 'foo' option is deprecated."}

CASES: dict[str, tuple[str, str, dict[str, Any], list[str]]] = {
    "2.21 result with a broken conditional": (
        "runner_on_ok",
        "",
        {**TASK, "res": {"deprecations": [DEPRECATION_221]}},
        [BROKEN_CONDITIONAL],
    ),
    "2.21 item result": (
        "runner_item_on_ok",
        "",
        {**TASK, "res": {"deprecations": [DEPRECATION_221]}},
        [BROKEN_CONDITIONAL],
    ),
    "2.18 deprecated event": (
        "deprecated",
        STDOUT_218,
        {**TASK, "deprecated": True},
        [BROKEN_CONDITIONAL],
    ),
    "empty template lookup": (
        "runner_on_failed",
        "",
        {**TASK, "res": {"deprecations": [EMPTY_LOOKUP]}},
        [EMPTY_TEMPLATE],
    ),
    "2.21 skipped task: only in its stdout": (
        "runner_on_skipped",
        "\x1b[1;35m[WARNING]: Deprecation warnings can be disabled.\x1b[0m\r\n"
        "\x1b[0;35m[DEPRECATION WARNING]: Conditional result (False) was derived from value "
        "of type 'int' at '/r.yml:5:13'. Conditionals must have a boolean result. This "
        "feature will be removed from ansible-core version 2.23.\x1b[0m\r\n",
        {**TASK, "res": {"skipped": True}},
        [BROKEN_CONDITIONAL],
    ),
    "another deprecation is not ours": (
        "runner_on_ok",
        "",
        {**TASK, "res": {"deprecations": [OTHER]}},
        [],
    ),
    "censored (no_log) result": ("runner_on_ok", "", {**TASK, "res": {"censored": "hidden"}}, []),
    "a start event carries none": ("runner_on_start", "", TASK, []),
}


@pytest.mark.parametrize(("event", "stdout", "data", "whats"), CASES.values(), ids=CASES)
def test_deprecations_in_events(
    event: str, stdout: str, data: dict[str, Any], whats: list[str]
) -> None:
    seen: list[Notice] = []
    NoticeObserver(notes=RunNotes(), report=seen.append).observe(event, stdout, data)
    assert [n.what for n in seen] == whats
    for notice in seen:
        assert (notice.task, notice.task_path) == (TASK["task"], TASK["task_path"])


def test_verbose_lines_belong_to_the_task_that_started_last() -> None:
    """With -v and more (the operator's default -vv), 2.19+ prints a deprecation as an
    event of its own, without a task; the result may carry it too: one notice."""
    seen: list[Notice] = []
    observer = NoticeObserver(notes=RunNotes(), report=seen.append)
    line = (
        "\x1b[0;35m[DEPRECATION WARNING]: " + DEPRECATION_221["msg"] + " This feature will be "
        "removed from ansible-core version 2.23.\x1b[0m"
    )
    observer.observe("playbook_on_task_start", "", TASK)
    observer.observe("verbose", line, {})
    observer.observe("runner_on_ok", "", {**TASK, "res": {"deprecations": [DEPRECATION_221]}})
    assert [(n.what, n.task, n.message) for n in seen] == [
        (BROKEN_CONDITIONAL, TASK["task"], DEPRECATION_221["msg"])
    ]


def test_218_wrapped_lines_are_joined_as_written() -> None:
    seen: list[Notice] = []
    stdout = (
        "\x1b[0;35m[DEPRECATION WARNING]: Conditional result at location /opt/my-\x1b[0m\r\n"
        "\x1b[0;35moperator/r.yml 5:9 was of type 'int'. Conditional results should only be\r\n"
        " True or False.\x1b[0m"
    )
    NoticeObserver(notes=RunNotes(), report=seen.append).observe("deprecated", stdout, TASK)
    assert [n.message for n in seen] == [
        "Conditional result at location /opt/my-operator/r.yml 5:9 was of type 'int'. "
        "Conditional results should only be True or False."
    ]


def test_proxy_notes_belong_to_the_next_task_result() -> None:
    notes = RunNotes()
    seen: list[Notice] = []
    observer = NoticeObserver(notes=notes, report=seen.append)
    observer.observe("runner_on_start", "", TASK)
    notes.add("ConfigMap c data/count: 4 as '4'")
    observer.observe("runner_on_start", "", TASK)
    assert seen == []
    observer.observe("runner_on_ok", "", TASK)
    assert seen == [
        Notice(NATIVE_TYPE, "Scale", TASK["task_path"], "ConfigMap c data/count: 4 as '4'")
    ]
    observer.observe("runner_on_ok", "", {"task": "Next", "task_path": "x:1"})
    assert len(seen) == 1


def test_a_loop_reports_each_deprecation_once() -> None:
    seen: list[Notice] = []
    observer = NoticeObserver(notes=RunNotes(), report=seen.append)
    data = {**TASK, "res": {"deprecations": [DEPRECATION_221]}}
    for event in ("runner_item_on_ok", "runner_item_on_ok", "runner_on_ok"):
        observer.observe(event, "", data)
    assert len(seen) == 1
