"""warm/protocol.py and the clients' import path: the wire bytes and what a client loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_operator.warm.protocol import Request

OPERATOR = Path(__file__).resolve().parents[3] / "operator"


@pytest.mark.parametrize(
    "request_",
    [
        Request(argv0="ansible-playbook", argv=["-i", "inv", "p.yml"], env={"A": "1"}, cwd="/w"),
        Request(argv0="", argv=[], env={}, cwd="", stdin_script=True),
        Request(argv0='q"uote\\', argv=["new\nline", "tab\t"], env={"K": "v"}, cwd="/t"),
        Request(argv0="ü", argv=["\u2603", "\U0001f600"], env={"LANG": "ß"}, cwd="/ü"),
        Request(argv0="x", argv=["\udcff"], env={"Z\udc80": "\udc81"}, cwd="/"),  # undecodable
    ],
    ids=["plain", "empty", "escapes", "non-ascii", "surrogate-escaped"],
)
def test_the_wire_format_is_jsons_and_round_trips(request_: Request) -> None:
    document = {
        "argv0": request_.argv0,
        "argv": request_.argv,
        "env": request_.env,
        "cwd": request_.cwd,
        "stdin_script": request_.stdin_script,
    }
    assert request_.to_json() == json.dumps(document, ensure_ascii=True).encode("ascii")
    assert Request.from_json(request_.to_json()) == request_


def test_a_client_loads_no_heavy_module() -> None:
    # The clients start once per run and once per module task, under `python -IS`.
    code = (
        f"import sys; sys.path.append({str(OPERATOR)!r}); "
        "import ansible_operator.warm.handoff; "
        "heavy = {'enum', 'json', 'socket', 'signal', 'typing', 'dataclasses', 're', "
        "'contextlib', 'array', 'selectors', 'collections'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-IS", "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
