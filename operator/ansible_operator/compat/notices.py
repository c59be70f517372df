"""What a run relied on that ansible-core 2.19+ removed: found in its events, kept visible.

Where it sits: for every run the reconciler (and `ansible-operator plan`) makes a
`RunNotes` and a `NoticeObserver`. The API proxy adds to the `RunNotes` each number
it sent as text (compat.stringfields; the proxy finds the run's notes on its
`Owner`). The observer is called for every job event of the run (launch.compatlog
wires it into the run's `on_event`) and turns into `Notice`s:

* the deprecations Ansible attached to a task's result (2.19+: `res.deprecations`;
  a skipped task's only in the result event's stdout), or its `deprecated` events
  (2.18: the text is only in the event's stdout);
* the proxy's notes, drained at the next task result: a task's HTTP requests are all
  done when its result event is written, and a run's tasks run one after another,
  so the notes belong to that task.

Only what the 2.18-compatibility mode hides is a notice (`WHATS`); other deprecations
stay in Ansible's own output. Pure: no I/O, no Ansible import.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "BROKEN_CONDITIONAL",
    "EMPTY_TEMPLATE",
    "NATIVE_TYPE",
    "WHATS",
    "Notice",
    "NoticeObserver",
    "RunNotes",
    "classify",
]

BROKEN_CONDITIONAL: Final = "broken-conditional"
EMPTY_TEMPLATE: Final = "empty-template-lookup"
NATIVE_TYPE: Final = "native-type"
WHATS: Final = (BROKEN_CONDITIONAL, EMPTY_TEMPLATE, NATIVE_TYPE)
"""The metric's `what` label: a fixed set."""

# The marker the compat lookup plugin (ansible-plugins/lookup/template.py) puts first.
_EMPTY_TEMPLATE_MARKER = "[ansible-operator compat: empty-template-lookup]"
# 2.19+: "Conditional result (True) was derived from value of type 'int' at '...'.
# Conditionals must have a boolean result."; 2.18: "Conditional result at location
# FILE LINE:COL was of type 'int'. Conditional results should only be True or False."
_CONDITIONAL = re.compile(r"Conditional result.*(boolean result|should only be True or False)")
_DEPRECATION = "[DEPRECATION WARNING]:"
_REMOVAL = re.compile(r"\s*This feature will be removed\b.*$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_RESULT_EVENTS = frozenset(
    {
        "runner_on_ok",
        "runner_on_failed",
        "runner_on_skipped",
        "runner_on_unreachable",
        "runner_on_async_ok",
        "runner_on_async_failed",
    }
)
_TASK_START = frozenset({"playbook_on_task_start", "runner_on_start"})
_ITEM_EVENTS = frozenset({"runner_item_on_ok", "runner_item_on_failed", "runner_item_on_skipped"})
_MAX_MESSAGE = 1000


@dataclass(frozen=True, slots=True)
class Notice:
    """One 2.18 behaviour a task relied on."""

    what: str  # one of WHATS
    task: str
    task_path: str  # FILE:LINE of the task, as Ansible gives it
    message: str


class RunNotes:
    """The proxy's findings for one run, waiting for the task they belong to.

    Appended from the proxy's handler threads, drained from the runner's thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[str] = []

    def add(self, message: str) -> None:
        with self._lock:
            self._pending.append(message)

    def drain(self) -> list[str]:
        with self._lock:
            pending, self._pending = self._pending, []
        return pending


def classify(message: str) -> str | None:
    """Which of WHATS a deprecation's message is, or None for any other."""
    if message.startswith(_EMPTY_TEMPLATE_MARKER):
        return EMPTY_TEMPLATE
    if _CONDITIONAL.search(message):
        return BROKEN_CONDITIONAL
    return None


def _unwrap(text: str) -> str:
    """2.18 wraps its warnings at the terminal's width, also after a hyphen: a
    path such as /opt/my-operator is cut at "my-"; join such lines without a space."""
    joined = ""
    for line in (part.strip() for part in text.splitlines()):
        if line:
            joined += line if not joined or joined.endswith("-") else " " + line
    return joined


def _deprecation_texts(event: str, stdout: str, data: Mapping[str, Any]) -> Iterable[str]:
    if event == "deprecated":  # 2.18: the text is only in the display output
        yield _unwrap(_ANSI.sub("", stdout)).removeprefix(_DEPRECATION).strip()
        return
    if event == "verbose":  # with -v and more, each display line is an event of its own
        yield from _stdout_deprecations(stdout)
        return
    if event not in _RESULT_EVENTS and event not in _ITEM_EVENTS:
        return
    res = data.get("res")
    found = res.get("deprecations") if isinstance(res, Mapping) else None
    if not isinstance(found, list):
        # A skipped task's result carries none (a `when` that was false): the text
        # is only in the display output, one line each on 2.19+.
        yield from _stdout_deprecations(stdout)
        return
    for entry in found:
        msg = entry.get("msg") if isinstance(entry, Mapping) else None
        if isinstance(msg, str):
            yield msg


def _stdout_deprecations(stdout: str) -> Iterable[str]:
    """2.19+ prints each deprecation on one line; the sentence it adds ("This feature
    will be removed ...") is not in `res.deprecations`, so it goes too (same notice)."""
    for line in _ANSI.sub("", stdout).splitlines():
        text = line.strip()
        if text.startswith(_DEPRECATION):
            yield _REMOVAL.sub("", text.removeprefix(_DEPRECATION)).strip()


class NoticeObserver:
    """Turns one run's events into Notices, each reported once per run and task."""

    def __init__(self, *, notes: RunNotes, report: Callable[[Notice], None]) -> None:
        self._notes = notes
        self._report = report
        self._seen: set[tuple[str, str, str]] = set()
        self._task = ("", "")

    def observe(self, event: str, stdout: str, data: Mapping[str, Any]) -> None:
        if event in _TASK_START and data.get("task"):
            self._task = (str(data.get("task")), str(data.get("task_path") or ""))
        # A `verbose` event carries no task: it belongs to the task that started last.
        task = str(data.get("task") or self._task[0])
        task_path = str(data.get("task_path") or self._task[1])
        for text in _deprecation_texts(event, stdout, data):
            what = classify(text)
            if what is not None:
                self._emit(Notice(what, task, task_path, text[:_MAX_MESSAGE]))
        if event in _RESULT_EVENTS:
            for text in self._notes.drain():
                self._emit(Notice(NATIVE_TYPE, task, task_path, text[:_MAX_MESSAGE]))

    def _emit(self, notice: Notice) -> None:
        # A loop repeats the same deprecation per item; one line per task is enough.
        key = (notice.what, notice.task_path, notice.message)
        if key in self._seen:
            return
        self._seen.add(key)
        self._report(notice)
