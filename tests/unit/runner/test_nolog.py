"""`runner.nolog`: what Ansible prints about a no_log result stays out of the artifacts.

The event shapes are those ansible-runner hands its event_handler (checked against
real runs of ansible-core 2.18.19 and 2.21.5: tests/e2e/test_killed.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.runner.nolog import HIDDEN_NOTE, censor_event_output, is_censored

CENSORED = {
    "censored": "the output has been hidden due to the fact that 'no_log: true' was specified "
    "for this result",
    "changed": False,
}
RED, END = "\x1b[0;31m", "\x1b[0m"
FATAL = f'{RED}fatal: [localhost]: FAILED! => {{"censored": "the output has been hidden"}}{END}'
# ansible-core 2.21.5 prints the error of a no_log task before the censored line.
LEAK_221 = "\r\n".join(
    [
        f"{RED}[ERROR]: Task failed: Action failed: failing with s3cr3t{END}",
        f"{RED}Origin: /p/pb.yml:6:7{END}",
        f"{RED}{END}",
        f"{RED}4     token: s3cr3t{END}",
        f"{RED}6     - name: fail with secret{END}",
        f"{RED}        ^ column 7{END}",
        f"{RED}{END}",
        FATAL,
    ]
)


def _event(stdout: str, res: Any, event: str = "runner_on_failed") -> dict[str, Any]:
    return {"event": event, "stdout": stdout, "event_data": {"res": res, "task": "t"}}


@pytest.mark.parametrize(
    ("stdout", "res", "expected"),
    [
        # the 2.21 leak: the message and the excerpt go, the result lines stay
        (
            LEAK_221,
            CENSORED,
            "\r\n".join([HIDDEN_NOTE, f"{RED}Origin: /p/pb.yml:6:7{END}", FATAL]),
        ),
        # what 2.18 prints: untouched
        (FATAL, CENSORED, FATAL),
        # ignore_errors adds "...ignoring"
        (f"{LEAK_221}\r\n...ignoring", CENSORED, None),
        # a loop whose items are censored
        (
            f"{RED}[ERROR]: boom s3cr3t{END}\r\nfailed: [localhost] (item=None) => {{}}",
            {"results": [CENSORED], "msg": "One or more items failed"},
            f"{HIDDEN_NOTE}\r\nfailed: [localhost] (item=None) => {{}}",
        ),
        # Ansible's own no_log flag
        ("[WARNING]: s3cr3t\r\nok: [localhost]", {"_ansible_no_log": True}, None),
        # a result in YAML form spans lines we do not recognise: they go
        ("ok: [localhost] =>\r\n  censored: s3cr3t", CENSORED, None),
    ],
    ids=["2.21-error", "2.18-plain", "ignoring", "loop-items", "no-log-flag", "yaml-result"],
)
def test_censored_events_keep_only_result_lines(
    stdout: str, res: Any, expected: str | None
) -> None:
    raw = _event(stdout, res)
    changed = censor_event_output(raw)
    assert "s3cr3t" not in raw["stdout"]
    assert changed is (stdout != raw["stdout"])
    if expected is not None:
        assert raw["stdout"] == expected


@pytest.mark.parametrize(
    "raw",
    [
        _event(f"{RED}[ERROR]: Task failed: visible{END}\r\n{FATAL}", {"msg": "visible"}),
        _event("ok: [localhost]", None, event="runner_on_ok"),
        {"event": "verbose", "stdout": "PLAY [x] ***"},
        {"event": "runner_on_failed", "event_data": {"res": CENSORED}},  # no stdout
        {"event": "runner_on_failed", "stdout": 3, "event_data": {"res": CENSORED}},
    ],
    ids=["not-no-log", "no-result", "verbose", "no-stdout", "odd-stdout"],
)
def test_other_events_are_left_as_they_are(raw: dict[str, Any]) -> None:
    before = dict(raw)
    assert censor_event_output(raw) is False
    assert raw == before


def test_is_censored_reads_only_the_result() -> None:
    assert is_censored({"res": CENSORED})
    assert not is_censored({"res": {"msg": "x"}})
    assert not is_censored({"res": "censored"})
    assert not is_censored({})
