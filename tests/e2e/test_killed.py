"""End to end: a killed operator leaves nothing running and nothing behind, and no
secret of a `no_log` task reaches a file, a log line, an Event or the status.

The operator runs as a real process (as `make run` runs it) and is SIGKILLed, as
the OOM killer or a crash would end it (runner/lifeline.py says how its runs are
tied to its life).
"""

from __future__ import annotations

import base64
import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import (
    OperatorProcess,
    condition,
    create_cr,
    custom,
    get_cr,
    wait_condition,
    wait_for,
)

pytestmark = pytest.mark.cluster
GROUP, VERSION = "e2e.example.com", "v1alpha1"
# A sleep length no other process on the machine uses, to find the runs' tasks by.
_LONG = "3613"


def _processes_owned_by(pid: int) -> list[int]:
    """Live processes started for the runs of the operator process `pid`."""
    needle = f"AO_RUN_OWNER={pid}.".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != b"Z" and any(item.startswith(needle) for item in environ):
            found.append(int(entry.name))
    return found


def _sleeping(length: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.split(b"\0")[:2] == [b"sleep", length.encode()]:
            found.append(int(entry.name))
    return found


@pytest.fixture
def namespaces(api_client: Any, e2e_crds: list[str]) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        drop_namespace(api_client, name)


def test_sigkill_ends_every_process_of_every_run_warm_and_cold(
    api_client: Any, kubeconfig_path: Path, namespaces: list[str], tmp_path: Path
) -> None:
    """Each run's task rewrites a file every 0.2 s until it is killed: once the operator
    is SIGKILLed, its runs' processes are gone within 2 s and no file changes after."""
    beats = tmp_path / "beats"
    beats.mkdir()
    operators = []
    for path, args in (("warm", []), ("cold", ["--warm-ansible=false"])):
        ns = make_namespace(api_client, f"e2e-kill-{path}")
        namespaces.append(ns)
        operator = OperatorProcess(
            kubeconfig=kubeconfig_path,
            workdir=tmp_path,
            env={"WATCH_NAMESPACE": ns},
            args=args,
            name=path,
        ).start()
        operators.append(operator)
        for i in range(2):
            spec = {"heartbeat": True, "markerDir": str(beats)}
            create_cr(api_client, ns, "lingerers", "Lingerer", f"{path}-{i}", spec)
    try:
        wait_for("four tasks beating", lambda: len(list(beats.iterdir())) == 4, timeout=180)
        pids = [op.proc.pid for op in operators if op.proc is not None]
        for operator in operators:
            operator.signal(signal.SIGKILL)
        killed_at = time.time()
        for operator in operators:
            operator.wait(10)

        def all_gone() -> bool:
            return not any(_processes_owned_by(p) for p in pids)

        wait_for("every process of the runs gone", all_gone, timeout=30)
        gone_after = time.time() - killed_at
        assert gone_after < 2.0, f"processes of the runs lived {gone_after:.2f} s after the kill"
        last = {p.name: p.stat().st_mtime for p in beats.iterdir()}
        time.sleep(1.0)  # four beats' time: a task still alive would have written again
        assert {p.name: p.stat().st_mtime for p in beats.iterdir()} == last
        assert max(last.values()) < killed_at + gone_after
    finally:
        for operator in operators:
            operator.stop()


def _client_key_line(kubeconfig: Path) -> bytes:
    """A line of the base64 body of the client's private key, as a file would hold it."""
    config = yaml.safe_load(kubeconfig.read_text())
    pem = base64.b64decode(config["users"][0]["user"]["client-key-data"])
    return pem.splitlines()[1]


def _files_holding(needles: list[bytes], *roots: Path) -> list[str]:
    found = []
    for root in roots:
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            try:
                data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            except OSError:
                continue
            found += [f"{path}: {needle[:12]!r}" for needle in needles if needle in data]
    return found


def _runner_dirs(runner_dir: Path, kind: str, namespace: str) -> list[str]:
    where = runner_dir / GROUP / VERSION / kind / namespace
    return sorted(p.name for p in where.iterdir()) if where.is_dir() else []


def test_repeated_kills_during_changes_and_deletions_leave_nothing_behind(
    api_client: Any, kubeconfig_path: Path, namespaces: list[str], tmp_path: Path
) -> None:
    ns = make_namespace(api_client, "e2e-kills")
    namespaces.append(ns)
    home, temp, runs = tmp_path / "home", tmp_path / "tmp", tmp_path / "runs"
    for directory in (home, temp):
        directory.mkdir()
    env = {"WATCH_NAMESPACE": ns, "HOME": str(home), "TMPDIR": str(temp)}

    def operator(name: str) -> OperatorProcess:
        return OperatorProcess(
            kubeconfig=kubeconfig_path,
            workdir=tmp_path,
            env=env,
            name=name,
            args=[f"--runner-dir={runs}"],
        )

    first, second, third = operator("first"), operator("second"), operator("third")
    try:
        _kill_and_restart(api_client, ns, runs, (first, second, third), tmp_path)
        _check_nothing_left(kubeconfig_path, runs, home, temp, (first, second, third))
    finally:
        for each in (first, second, third):  # also when an assertion failed midway
            each.stop()
    wait_for("a stopped operator leaves no process", lambda: not _sleeping(_LONG), timeout=30)
    wait_for(
        "and no private directory",
        lambda: not list(temp.glob("ansible-operator-*")),
        timeout=30,
    )


Operators = tuple[OperatorProcess, OperatorProcess, OperatorProcess]


def _kill_and_restart(
    api_client: Any, ns: str, runs: Path, operators: Operators, tmp_path: Path
) -> None:
    """Kill the first operator mid-run, delete CRs while none runs, kill the second
    right after a finalizer, start the third."""
    first, second, third = operators
    first.start()
    for i in range(2):
        create_cr(api_client, ns, "cleanables", "Cleanable", f"fin-{i}", {})
        spec = {"delay": int(_LONG), "markerDir": str(tmp_path)}
        create_cr(api_client, ns, "lingerers", "Lingerer", f"long-{i}", spec)
    wait_condition(api_client, ns, "cleanables", "fin-0", "Successful")
    wait_condition(api_client, ns, "cleanables", "fin-1", "Successful")
    wait_for("both long tasks running", lambda: len(_sleeping(_LONG)) == 2, timeout=60)
    first.signal(signal.SIGKILL)  # mid-run
    first.wait(10)

    # While no operator runs: one CR is deleted outright, one waits for its finalizer.
    custom(api_client).delete_namespaced_custom_object(GROUP, VERSION, ns, "lingerers", "long-0")
    custom(api_client).delete_namespaced_custom_object(GROUP, VERSION, ns, "cleanables", "fin-0")
    second.start()
    wait_for(
        "the finalizer ran",
        lambda: get_cr(api_client, ns, "cleanables", "fin-0") is None,
        timeout=60,
    )
    second.signal(signal.SIGKILL)  # right after the finalizer, with long-1 running again
    second.wait(10)

    third.start()
    wait_for(
        "only existing CRs keep a runner directory",
        lambda: (
            _runner_dirs(runs, "Cleanable", ns) == ["fin-1"]
            and _runner_dirs(runs, "Lingerer", ns) == ["long-1"]
        ),
        timeout=60,
    )


def _check_nothing_left(
    kubeconfig_path: Path, runs: Path, home: Path, temp: Path, operators: Operators
) -> None:
    first, second, third = operators
    assert sorted(p.name for p in home.rglob("ansible-local-*")) == []
    assert sorted(p.name for p in temp.rglob("ansible-local-*")) == []
    assert sorted(p.name for p in runs.rglob("ansible-local-*")) == []
    key = _client_key_line(kubeconfig_path)
    assert _files_holding([key, b"PRIVATE KEY"], temp, runs, home) == []
    # The killed operators' runs: nothing of them lives on.
    assert not _processes_owned_by(first.proc.pid if first.proc else 0)
    assert not _processes_owned_by(second.proc.pid if second.proc else 0)
    # The third operator's own run of long-1 is not mistaken for an orphan.
    wait_for("long-1 running again", lambda: len(_sleeping(_LONG)) == 1, timeout=60)
    assert _processes_owned_by(third.proc.pid if third.proc else 0)


def test_no_log_secrets_reach_no_file_log_event_or_status(
    api_client: Any, kubeconfig_path: Path, namespaces: list[str], tmp_path: Path
) -> None:
    ns = make_namespace(api_client, "e2e-secrets")
    namespaces.append(ns)
    home, temp, runs = tmp_path / "home", tmp_path / "tmp", tmp_path / "runs"
    for directory in (home, temp):
        directory.mkdir()
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path,
        env={"WATCH_NAMESPACE": ns, "HOME": str(home), "TMPDIR": str(temp)},
        args=[f"--runner-dir={runs}"],
    ).start()
    core = client.CoreV1Api(api_client)
    tokens = {f"s{i}": f"tok-{secrets.token_hex(12)}" for i in range(20)}
    try:
        for i, (name, token) in enumerate(tokens.items()):
            core.create_namespaced_secret(
                ns,
                client.V1Secret(
                    metadata=client.V1ObjectMeta(name=f"{name}-token"),
                    string_data={"token": token},
                ),
            )
            create_cr(api_client, ns, "secretives", "Secretive", name, {"fail": i % 4 == 0})
        statuses = []
        for i, name in enumerate(tokens):
            wanted = "Failure" if i % 4 == 0 else "Successful"
            statuses.append(wait_condition(api_client, ns, "secretives", name, wanted, timeout=180))
        failing = [name for i, name in enumerate(tokens) if i % 4 == 0]
        assert len(failing) == 5
        for name in failing:  # the run did fail in the no_log task
            failure = condition(get_cr(api_client, ns, "secretives", name), "Failure") or {}
            assert "no_log" in str(failure.get("message")), failure
    finally:
        operator.stop()
    needles = [t.encode() for t in tokens.values()]
    needles += [base64.b64encode(t.encode()) for t in tokens.values()]
    assert _files_holding(needles, runs, temp, home) == []
    assert _files_holding(needles, operator.log_path) == []
    events = core.list_namespaced_event(ns).items
    assert [e.message for e in events if any(t in (e.message or "") for t in tokens.values())] == []
    assert [s for s in statuses if any(t in str(s) for t in tokens.values())] == []
    assert os.path.isdir(runs)  # the runs happened where the test looked
