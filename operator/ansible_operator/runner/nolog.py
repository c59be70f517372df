"""Keep what Ansible prints about a `no_log` result out of everything a run writes.

Where this sits: runner/ansible.py calls `censor_event_output(raw)` first thing in
its ansible-runner `event_handler`, for every job event. ansible-runner hands the
handler the event before it writes `artifacts/<ident>/job_events/<n>-<uuid>.json`
and appends the event's `stdout` to `artifacts/<ident>/stdout` (the file the
stdout tail of a failed run is read from), so text replaced here reaches neither.

Why: Ansible censors a `no_log: true` task's result (`{"censored": "the output has
been hidden ..."}`), but ansible-core 2.21.5 still prints the error of such a task
in full before the censored line: `[ERROR]: Task failed: Action failed: <msg>`,
then an `Origin:` excerpt of the playbook's lines (which may define the secret),
at every verbosity (plain `ansible-playbook` does the same). ansible-core 2.18
prints only the censored line. So for an event whose result is censored, only
the lines Ansible prints for any result are kept (`fatal: [host]: FAILED! => ...`,
`ok: ...`, `...ignoring`, the bare `Origin: <file>:<line>:<col>`); every other
line is dropped, the first one replaced by a note saying that text was hidden.
Text we do not recognise is dropped, not kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["HIDDEN_NOTE", "censor_event_output", "is_censored"]

HIDDEN_NOTE = (
    "[ERROR]: the error message has been hidden due to the fact that 'no_log: true' "
    "was specified for this result"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Lines Ansible's default callback prints for a result, whatever the result holds.
_RESULT_LINE = re.compile(
    r"(?:fatal|failed|ok|changed|skipping|included): \[[^\]]*\]"
    r"|\.\.\.ignoring$"
    r"|Origin: \S+:\d+:\d+$"
)


def is_censored(event_data: Mapping[str, Any]) -> bool:
    """Did Ansible hide this event's result (`no_log`), for it or any loop item?"""
    res = event_data.get("res")
    if not isinstance(res, Mapping):
        return False
    if "censored" in res or res.get("_ansible_no_log") is True:
        return True
    items = res.get("results")
    return isinstance(items, list) and any(
        isinstance(item, Mapping) and "censored" in item for item in items
    )


def censor_event_output(raw: MutableMapping[str, Any]) -> bool:
    """Drop what a censored event's `stdout` may show of the hidden result, in place;
    whether anything was dropped."""
    data = raw.get("event_data")
    stdout = raw.get("stdout")
    if not isinstance(data, Mapping) or not isinstance(stdout, str) or not is_censored(data):
        return False
    kept: list[str] = []
    dropped = False
    for line in stdout.splitlines():
        plain = _ANSI.sub("", line).strip()
        if not plain:
            continue  # an empty line shows nothing (Ansible frames its excerpts with them)
        if _RESULT_LINE.match(plain):
            kept.append(line)
        elif not dropped:
            dropped = True
            kept.append(HIDDEN_NOTE)
    if dropped:
        raw["stdout"] = "\r\n".join(kept)  # as Ansible's lines end on ansible-runner's pty
    return dropped
