"""Real Ansible runs through AnsibleRunner (ansible-runner + ansible-playbook), no cluster.

Every run's evidence comes from outside the code under test: files the role or
playbook wrote under tmp_path, ansible-runner's artifacts, and /proc. Fixtures live in
tests/runner/roles and tests/runner/playbooks (including a connection plugin that makes
a host unreachable and a stand-in for operator_sdk.util's requeue_after module).

The input-directory and FakeRunner tests at the end need no Ansible.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from ansible.release import __version__ as ANSIBLE_CORE

from ansible_operator.controller import reporting
from ansible_operator.errors import RunSetupError
from ansible_operator.runner import privatedir
from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.base import Runner, RunOutcome, RunRequest, RunResult, new_ident
from ansible_operator.runner.fakerunner import FakeRunner
from ansible_operator.runner.jobevents import JobEvent

HERE = Path(__file__).parent
PLAYBOOKS = HERE / "playbooks"
ROLES = HERE / "roles"
VENV_BIN = str(Path(sys.executable).parent)


@pytest.fixture(autouse=True)
def _neutral_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own Ansible settings must not change what these tests see.
    for name in (
        "ANSIBLE_INVENTORY",
        "ANSIBLE_GATHERING",
        "ANSIBLE_ROLES_PATH",
        "ANSIBLE_VERBOSITY",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "runner"


@pytest.fixture
def runner(root: Path) -> AnsibleRunner:
    return AnsibleRunner(root=root)


def make_request(out_dir: Path, **overrides: Any) -> RunRequest:
    fields: dict[str, Any] = {
        "ident": new_ident(),
        "group": "cache.example.com",
        "version": "v1alpha1",
        "kind": "Memcached",
        "namespace": "ns1",
        "name": "mc",
        "verbosity": 0,
        "max_artifacts": 20,
        "extravars": {
            "out_dir": str(out_dir),
            "greeting": "hello",
            "ansible_operator_meta": {"name": "mc", "namespace": "ns1"},
        },
    }
    fields.update(overrides)
    return RunRequest(**fields)


def data_dir(root: Path) -> Path:
    return root / "cache.example.com" / "v1alpha1" / "Memcached" / "ns1" / "mc"


def command_file(result: RunResult) -> dict[str, Any]:
    assert result.artifacts_dir is not None
    document: dict[str, Any] = json.loads((result.artifacts_dir / "command").read_text())
    return document


def files_containing(top: Path, needle: str, *, skip: tuple[Path, ...] = ()) -> list[Path]:
    hits = []
    for path in top.rglob("*"):
        readable = path.is_file() and not path.is_symlink() and path not in skip
        if readable and needle.encode() in path.read_bytes():
            hits.append(path)
    return hits


def processes_mentioning(needle: str) -> list[str]:
    """Live (non-zombie) processes whose command line contains `needle`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle.encode() in cmdline:
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {shown}")
    return found


@pytest.fixture
def sleeper_watch() -> Iterator[dict[str, Any]]:
    """Polls /proc for the sleeping task's process; optionally cancels the run once seen."""
    state: dict[str, Any] = {"marker": f"ao-test-{uuid.uuid4().hex}", "seen": threading.Event()}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            if processes_mentioning(state["marker"]):
                state["seen_at"] = time.monotonic()
                state["seen"].set()
                cancel = state.get("cancel")
                if cancel is not None:
                    cancel.set()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    yield state
    stop.set()
    thread.join(5)


# --- what a run receives ------------------------------------------------------------


def test_role_mode_runs_the_role_with_extravars_verbosity_and_kubeconfig_path(
    runner: AnsibleRunner, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"users:\n- name: u\n  user:\n    token: {token}\n")
    env_secret = f"pw-{uuid.uuid4().hex}"
    monkeypatch.setenv("MY_SERVICE_PASSWORD", env_secret)

    request = make_request(tmp_path, role=ROLES / "capture", verbosity=3, kubeconfig=kubeconfig)
    result = runner.run(request)

    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    assert result.stats is not None
    assert (result.stats.ok, result.stats.changed, result.stats.failures) == (1, 1, 0)
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {
        "greeting": "hello",
        "meta": {"name": "mc", "namespace": "ns1"},
        "interpreter": sys.executable,
        "facts_gathered": False,
        "kubeconfig": str(kubeconfig),
    }
    directory = data_dir(root)
    assert (directory / "env" / "extravars").read_text() == json.dumps(
        request.extravars, sort_keys=True, separators=(",", ":")
    )
    command = command_file(result)
    assert "-vvv" in command["command"]
    assert command["env"]["K8S_AUTH_KUBECONFIG"] == str(kubeconfig)
    assert command["env"]["PATH"].startswith(VENV_BIN + os.pathsep)
    assert command["env"]["MY_SERVICE_PASSWORD"] == "<redacted>"
    assert json.loads((directory / "env" / "envvars").read_text()) == {
        "K8S_AUTH_KUBECONFIG": str(kubeconfig),
        "KUBECONFIG": str(kubeconfig),
    }
    assert files_containing(directory, token) == []
    assert files_containing(directory, env_secret) == []
    assert (directory / "artifacts" / "latest").resolve() == result.artifacts_dir


@pytest.mark.parametrize(
    ("gathering", "facts_gathered"),
    [(None, False), ("implicit", True)],
    ids=["default: no facts", "operator env asks for facts"],
)
def test_playbook_mode_and_fact_gathering(
    runner: AnsibleRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gathering: str | None,
    facts_gathered: bool,
) -> None:
    if gathering is not None:
        monkeypatch.setenv("ANSIBLE_GATHERING", gathering)
    result = runner.run(make_request(tmp_path, playbook=PLAYBOOKS / "capture.yml"))
    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {
        "greeting": "hello",
        "meta": {"name": "mc", "namespace": "ns1"},
        "facts_gathered": facts_gathered,
    }
    assert str(PLAYBOOKS / "capture.yml") in command_file(result)["command"]


def test_ansible_args_reach_ansible_playbook(
    runner: AnsibleRunner, root: Path, tmp_path: Path
) -> None:
    request = make_request(
        tmp_path, playbook=PLAYBOOKS / "tags.yml", ansible_args="'--tags selected'"
    )
    result = runner.run(request)
    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    assert (tmp_path / "selected").exists()
    assert not (tmp_path / "other").exists()
    assert (data_dir(root) / "env" / "cmdline").read_text() == "--tags selected"
    assert "selected" in command_file(result)["command"]


# --- failure semantics --------------------------------------------------------------

# Ansible's own wording differs between its lines (README "Which Ansible").
_CORE_LINE = tuple(int(part) for part in ANSIBLE_CORE.split(".")[:2])
TASK_FAILED = "Task failed: " if _CORE_LINE >= (2, 19) else ""
LOOP_FAILED = "One or more items failed" + (
    " (item 'false': non-zero return code)" if _CORE_LINE < (2, 21) else ""
)

FAILURE_CASES = {
    # playbook: (outcome, [(task, message, unreachable)], rc)
    "plain_failure": (
        RunOutcome.FAILED,
        [("Fail plainly", "plain failure message", False)],
        2,
    ),
    "ignored_failure": (RunOutcome.SUCCESSFUL, [], 0),
    "rescued_failure": (RunOutcome.SUCCESSFUL, [], 0),
    "failure_in_rescue": (
        RunOutcome.FAILED,
        [("Fail inside the rescue", "rescue failure message", False)],
        2,
    ),
    "loop_failure": (
        RunOutcome.FAILED,
        [("Loop with one failing item", LOOP_FAILED, False)],
        2,
    ),
    "unreachable": (
        RunOutcome.FAILED,
        [("Talk to an unreachable host", f"{TASK_FAILED}failconn refuses every connection", True)],
        4,
    ),
    "ignored_unreachable": (RunOutcome.SUCCESSFUL, [], 0),
}


@pytest.mark.parametrize(
    ("playbook", "outcome", "failures", "rc"),
    [(name, *case) for name, case in FAILURE_CASES.items()],
    ids=FAILURE_CASES.keys(),
)
def test_failure_semantics(
    runner: AnsibleRunner,
    tmp_path: Path,
    playbook: str,
    outcome: RunOutcome,
    failures: list[tuple[str, str, bool]],
    rc: int,
) -> None:
    result = runner.run(make_request(tmp_path, playbook=PLAYBOOKS / f"{playbook}.yml"))
    assert result.outcome is outcome, result.stdout_tail
    assert [(f.task, f.message, f.unreachable) for f in result.failures] == failures
    assert all(f.host == "localhost" for f in result.failures)
    assert result.rc == rc
    assert result.stats is not None
    for _task, message, _ in failures:
        assert message in reporting.failure_message(result)
    if outcome is RunOutcome.FAILED:
        assert "PLAY RECAP" in result.stdout_tail
    else:
        assert result.stdout_tail == ""


def test_missing_role_is_an_error_carrying_ansibles_output(
    runner: AnsibleRunner, tmp_path: Path
) -> None:
    result = runner.run(make_request(tmp_path, role=tmp_path / "roles" / "no_such_role"))
    assert result.outcome is RunOutcome.ERROR
    assert result.rc == 1
    assert result.stats is None
    assert result.failures == ()
    assert "no_such_role" in result.stdout_tail
    assert "was not found" in result.stdout_tail
    assert "\x1b[" not in result.stdout_tail
    assert reporting.failure_message(result).startswith("Ansible run did not complete: ")


def test_requeue_after_is_reported_and_the_run_still_completes(
    runner: AnsibleRunner, tmp_path: Path
) -> None:
    result = runner.run(make_request(tmp_path, playbook=PLAYBOOKS / "requeue.yml"))
    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    assert result.requeue_after == 90.0
    assert (tmp_path / "after-requeue").read_text() == "done"  # the play went on
    assert result.stats is not None
    assert result.stats.ignored == 1  # the broken requeue_after failed harmlessly


# --- artifacts and the private data dir -------------------------------------------------


def test_artifacts_are_rotated_and_latest_follows(
    runner: AnsibleRunner, root: Path, tmp_path: Path
) -> None:
    idents = []
    for _ in range(4):
        request = make_request(tmp_path, playbook=PLAYBOOKS / "noop.yml", max_artifacts=2)
        assert runner.run(request).outcome is RunOutcome.SUCCESSFUL
        idents.append(request.ident)
    artifacts = data_dir(root) / "artifacts"
    runs = sorted(p.name for p in artifacts.iterdir() if not p.is_symlink())
    assert runs == sorted(idents[-2:])
    assert os.readlink(artifacts / "latest") == idents[-1]
    assert (artifacts / "latest" / "status").read_text() == "successful"


def test_on_event_sees_every_event_and_cannot_break_the_run(
    runner: AnsibleRunner, tmp_path: Path
) -> None:
    seen: list[JobEvent] = []

    def hook(event: JobEvent) -> None:
        seen.append(event)
        raise RuntimeError("a broken logging hook")

    result = runner.run(make_request(tmp_path, playbook=PLAYBOOKS / "noop.yml", on_event=hook))
    assert result.outcome is RunOutcome.SUCCESSFUL
    names = [event.event for event in seen]
    assert names[0] == "playbook_on_start"
    assert names[-1] == "playbook_on_stats"
    assert "runner_on_ok" in names
    assert [event.counter for event in seen] == sorted(event.counter for event in seen)


def test_no_log_values_stay_hidden(runner: AnsibleRunner, root: Path, tmp_path: Path) -> None:
    secret = f"S3CR3T-{uuid.uuid4().hex}"
    payloads: list[str] = []

    def hook(event: JobEvent) -> None:
        payloads.append(json.dumps({"stdout": event.stdout, "data": dict(event.event_data)}))

    request = make_request(
        tmp_path,
        playbook=PLAYBOOKS / "secrets.yml",
        verbosity=4,
        extravars={"secret_source": secret},
        on_event=hook,
    )
    result = runner.run(request)
    assert result.outcome is RunOutcome.FAILED
    assert [f.task for f in result.failures] == ["Fail with the secret in every output"]
    assert "no_log: true" in result.failures[0].message
    assert len(payloads) > 5
    assert not [payload for payload in payloads if secret in payload]
    assert secret not in repr(result)
    extravars = data_dir(root) / "env" / "extravars"  # the input itself, by design
    assert files_containing(data_dir(root), secret, skip=(extravars,)) == []


# --- timeout and cancellation leave no process behind --------------------------------


RUN_TIMEOUT = 10


def test_timeout_kills_every_process(
    runner: AnsibleRunner,
    root: Path,
    tmp_path: Path,
    sleeper_watch: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ansible_temp = tmp_path / "ansible-temp"
    monkeypatch.setenv("ANSIBLE_LOCAL_TEMP", str(ansible_temp))
    monkeypatch.setenv("ANSIBLE_REMOTE_TEMP", str(ansible_temp))
    own_temp = tmp_path / "operator-tmp"  # where a module's payload went before runs had their own
    own_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(own_temp))
    marker = sleeper_watch["marker"]
    request = make_request(
        tmp_path,
        playbook=PLAYBOOKS / "sleep.yml",
        extravars={"marker": marker},
        # Room for the play to reach its sleeping task on a loaded machine.
        timeout=RUN_TIMEOUT,
    )
    started = time.monotonic()
    result = runner.run(request)
    elapsed = time.monotonic() - started

    assert sleeper_watch["seen"].is_set(), "the sleeping task never started"
    assert result.outcome is RunOutcome.TIMEOUT
    assert RUN_TIMEOUT <= elapsed < RUN_TIMEOUT + 6
    assert result.rc == 254
    assert reporting.failure_message(result).startswith("Ansible run timed out after ")
    assert processes_mentioning(marker) == []
    assert processes_mentioning(str(tmp_path)) == []
    assert list(ansible_temp.iterdir()) == []  # what the killed processes left is gone
    assert list(own_temp.iterdir()) == []  # the killed module's ansible_*_payload_* too
    assert list(data_dir(root).glob("tmp-*")) == []  # and the run's own TMPDIR
    assert not (root / ".discovery").exists()  # a killed run's cache may be half written


def test_cancel_kills_every_process_promptly(
    runner: AnsibleRunner, tmp_path: Path, sleeper_watch: dict[str, Any]
) -> None:
    marker = sleeper_watch["marker"]
    request = make_request(
        tmp_path, playbook=PLAYBOOKS / "sleep.yml", extravars={"marker": marker}, timeout=50
    )
    sleeper_watch["cancel"] = request.cancel
    result = runner.run(request)
    finished = time.monotonic()

    assert sleeper_watch["seen"].is_set(), "the sleeping task never started"
    assert result.outcome is RunOutcome.CANCELED
    assert finished - sleeper_watch["seen_at"] < 3
    assert processes_mentioning(marker) == []
    assert processes_mentioning(str(tmp_path)) == []


def test_canceling_one_run_leaves_a_concurrent_run_alone(
    runner: AnsibleRunner, tmp_path: Path, sleeper_watch: dict[str, Any]
) -> None:
    doomed = make_request(
        tmp_path,
        playbook=PLAYBOOKS / "sleep.yml",
        name="doomed",
        extravars={"marker": sleeper_watch["marker"]},
    )
    sleeper_watch["cancel"] = doomed.cancel
    survivor = make_request(tmp_path, playbook=PLAYBOOKS / "slow_ok.yml", name="survivor")
    results: dict[str, RunResult] = {}
    threads = [
        threading.Thread(target=lambda r=r: results.update({r.name: runner.run(r)}))
        for r in (doomed, survivor)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sleeper_watch["seen"].is_set()
    assert results["doomed"].outcome is RunOutcome.CANCELED
    assert results["survivor"].outcome is RunOutcome.SUCCESSFUL, results["survivor"].stdout_tail
    assert (tmp_path / "slow-done").read_text() == "done"
    assert processes_mentioning(sleeper_watch["marker"]) == []


def test_a_canceled_request_does_not_start(
    runner: AnsibleRunner, root: Path, tmp_path: Path
) -> None:
    request = make_request(tmp_path, playbook=PLAYBOOKS / "noop.yml")
    request.cancel.set()
    result = runner.run(request)
    assert result.outcome is RunOutcome.CANCELED
    assert not root.exists()


# --- request validation (no Ansible) ---------------------------------------------------

BAD_REQUESTS = {
    "neither playbook nor role": {},
    "both playbook and role": {"playbook": PLAYBOOKS / "noop.yml", "role": ROLES / "capture"},
    "relative playbook": {"playbook": Path("noop.yml")},
    "ident with a slash": {"playbook": PLAYBOOKS / "noop.yml", "ident": "a/b"},
    "ident named latest": {"playbook": PLAYBOOKS / "noop.yml", "ident": "latest"},
    "hidden ident": {"playbook": PLAYBOOKS / "noop.yml", "ident": ".x"},
    "zero timeout": {"playbook": PLAYBOOKS / "noop.yml", "timeout": 0},
    "name with ..": {"playbook": PLAYBOOKS / "noop.yml", "name": ".."},
    "namespace with a slash": {"playbook": PLAYBOOKS / "noop.yml", "namespace": "a/b"},
    "unbalanced ansible args": {"playbook": PLAYBOOKS / "noop.yml", "ansible_args": "--tags 'x"},
    "extravars not JSON": {"playbook": PLAYBOOKS / "noop.yml", "extravars": {"x": object()}},
}


@pytest.mark.parametrize("overrides", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_bad_requests_are_setup_errors(
    runner: AnsibleRunner, tmp_path: Path, overrides: dict[str, Any]
) -> None:
    with pytest.raises(RunSetupError):
        runner.run(make_request(tmp_path, **overrides))


def test_a_reused_ident_is_a_setup_error(runner: AnsibleRunner, root: Path, tmp_path: Path) -> None:
    request = make_request(tmp_path, playbook=PLAYBOOKS / "noop.yml", ident="7")
    (data_dir(root) / "artifacts" / "7").mkdir(parents=True)
    with pytest.raises(RunSetupError, match="already used"):
        runner.run(request)


# --- the private data dir (no Ansible) -------------------------------------------------

LAYOUTS = {
    "namespaced": (
        ("cache.example.com", "v1", "Memcached", "ns", "m"),
        "cache.example.com/v1/Memcached/ns/m",
    ),
    "core group": (("", "v1", "Secret", "ns", "s"), "v1/Secret/ns/s"),
    "cluster-scoped": (("example.com", "v1", "Cluster", "", "c"), "example.com/v1/Cluster/c"),
}


@pytest.mark.parametrize(("parts", "expected"), LAYOUTS.values(), ids=LAYOUTS.keys())
def test_cr_dir_layout(tmp_path: Path, parts: tuple[str, ...], expected: str) -> None:
    group, version, kind, namespace, name = parts
    path = privatedir.cr_dir(
        root=tmp_path, group=group, version=version, kind=kind, namespace=namespace, name=name
    )
    assert path == tmp_path / expected


def prepare(
    root: Path, tmp_path: Path, environ: dict[str, str] | None = None, **overrides: Any
) -> Path:
    request = make_request(tmp_path, playbook=PLAYBOOKS / "noop.yml", **overrides)
    return privatedir.prepare(
        request, root=root, environ=environ or {}, python="/opt/py/bin/python3", settings={"a": 1}
    )


def test_default_inventory_pins_the_interpreter(root: Path, tmp_path: Path) -> None:
    directory = prepare(root, tmp_path)
    assert (directory / "inventory" / "hosts").read_text() == (
        "localhost ansible_connection=local ansible_python_interpreter=/opt/py/bin/python3\n"
    )
    assert json.loads((directory / "env" / "settings").read_text()) == {"a": 1}
    assert (directory / "env").stat().st_mode & 0o777 == 0o700
    assert (directory / "env" / "extravars").stat().st_mode & 0o777 == 0o600


def test_extravars_are_compact_sorted_json(root: Path, tmp_path: Path) -> None:
    extravars = MappingProxyType({"b": MappingProxyType({"y": [1, 2], "x": None}), "a": "é"})
    directory = prepare(root, tmp_path, extravars=extravars)
    text = (directory / "env" / "extravars").read_text(encoding="utf-8")
    assert text == '{"a":"é","b":{"x":null,"y":[1,2]}}'


def test_inventory_from_ansible_inventory(root: Path, tmp_path: Path) -> None:
    source = tmp_path / "inv"
    (source / "group_vars").mkdir(parents=True)
    (source / "hosts.ini").write_text("[web]\nw1\n")
    (source / "group_vars" / "web.yml").write_text("x: 1\n")
    directory = prepare(root, tmp_path, {"ANSIBLE_INVENTORY": str(source)})
    assert (directory / "inventory" / "hosts.ini").read_text() == "[web]\nw1\n"
    assert (directory / "inventory" / "group_vars" / "web.yml").read_text() == "x: 1\n"
    assert not (directory / "inventory" / "hosts").exists()

    single = tmp_path / "single.ini"
    single.write_text("db1\n")
    directory = prepare(root, tmp_path, {"ANSIBLE_INVENTORY": str(single)})
    assert sorted(p.name for p in (directory / "inventory").iterdir()) == ["hosts"]
    assert (directory / "inventory" / "hosts").read_text() == "db1\n"

    with pytest.raises(RunSetupError, match="ANSIBLE_INVENTORY"):
        prepare(root, tmp_path, {"ANSIBLE_INVENTORY": str(tmp_path / "missing")})


ARGS = {
    "plain": ("--tags x", "--tags x"),
    "wrapped in single quotes": ("'--tags x'", "--tags x"),
    "only one pair stripped": ("''--tags x''", "'--tags x'"),
    "double quotes kept": ('"--tags x"', '"--tags x"'),
    "lone quote": ("'", "'"),
    "empty": ("", None),
    "quotes around nothing": ("''", None),
    "blank": ("   ", None),
}


@pytest.mark.parametrize(("args", "cmdline"), ARGS.values(), ids=ARGS.keys())
def test_cmdline_from_ansible_args(
    root: Path, tmp_path: Path, args: str, cmdline: str | None
) -> None:
    if cmdline == "'":
        with pytest.raises(RunSetupError):  # shlex cannot split a lone quote
            prepare(root, tmp_path, ansible_args=args)
        return
    directory = prepare(root, tmp_path, ansible_args="--check")  # a stale file from before
    directory = prepare(root, tmp_path, ansible_args=args)
    path = directory / "env" / "cmdline"
    assert (path.read_text() if path.exists() else None) == cmdline


def test_envvars_hold_only_the_kubeconfig_path(root: Path, tmp_path: Path) -> None:
    directory = prepare(root, tmp_path, kubeconfig=tmp_path / "kc")
    assert json.loads((directory / "env" / "envvars").read_text()) == {
        "K8S_AUTH_KUBECONFIG": str(tmp_path / "kc"),
        "KUBECONFIG": str(tmp_path / "kc"),
    }
    prepare(root, tmp_path, kubeconfig=None)
    assert not (directory / "env" / "envvars").exists()


def test_remove_cr_dir_prunes_empty_parents_only(root: Path, tmp_path: Path) -> None:
    gone = prepare(root, tmp_path, name="gone")
    kept = prepare(root, tmp_path, name="kept")
    other_ns = prepare(root, tmp_path, namespace="other", name="alone")
    where = {"root": root, "group": "cache.example.com", "version": "v1alpha1", "kind": "Memcached"}

    assert privatedir.remove_cr_dir(**where, namespace="ns1", name="gone") is True
    assert not gone.exists()
    assert kept.is_dir()
    assert privatedir.remove_cr_dir(**where, namespace="other", name="alone") is True
    assert not other_ns.exists()
    assert not other_ns.parent.exists()  # the emptied namespace dir went too
    assert kept.parent.parent.is_dir()
    assert privatedir.remove_cr_dir(**where, namespace="ns1", name="never") is False
    assert privatedir.remove_cr_dir(**where, namespace="ns1", name="kept") is True
    assert root.is_dir()
    assert list(root.iterdir()) == []


def test_rotation_skips_latest_and_keeps_the_current_run(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    for name, age in {"old": 30, "older": 20, "current": 10, "newest": 40}.items():
        (artifacts / name).mkdir(parents=True)
        os.utime(artifacts / name, (1_000_000 + age, 1_000_000 + age))
    privatedir.refresh_latest(artifacts, "old")
    removed = privatedir.rotate_artifacts(artifacts, keep=2, current="current")
    assert sorted(p.name for p in removed) == ["old", "older"]
    assert sorted(p.name for p in artifacts.iterdir()) == ["current", "latest", "newest"]
    privatedir.refresh_latest(artifacts, "current")
    assert os.readlink(artifacts / "latest") == "current"
    assert privatedir.rotate_artifacts(artifacts, keep=0, current="x") == []


# --- FakeRunner (no Ansible) ------------------------------------------------------------


def fake_request(**overrides: Any) -> RunRequest:
    return make_request(Path("/nonexistent"), playbook=PLAYBOOKS / "noop.yml", **overrides)


def test_fake_runner_answers_from_its_script_and_records_requests() -> None:
    boom = RunSetupError("no inventory")
    fake = FakeRunner(
        [FakeRunner.failed("m1", "m2"), boom, lambda r: FakeRunner.successful(requeue_after=5)],
        default=FakeRunner.errored(),
    )
    assert isinstance(fake, Runner)
    first, second, third, fourth = (fake_request() for _ in range(4))
    failed = fake.run(first)
    assert (failed.ident, failed.outcome, [f.message for f in failed.failures]) == (
        first.ident,
        RunOutcome.FAILED,
        ["m1", "m2"],
    )
    with pytest.raises(RunSetupError):
        fake.run(second)
    assert fake.run(third).requeue_after == 5
    assert fake.run(fourth).outcome is RunOutcome.ERROR
    assert fake.requests == [first, second, third, fourth]
    assert FakeRunner().run(fake_request()).outcome is RunOutcome.SUCCESSFUL


def test_fake_runner_holds_runs_until_released_or_canceled() -> None:
    fake = FakeRunner()
    fake.hold()
    results: list[RunResult] = []
    requests = [fake_request() for _ in range(3)]
    threads = [threading.Thread(target=lambda r=r: results.append(fake.run(r))) for r in requests]
    for thread in threads:
        thread.start()
    assert fake.wait_running(3)
    assert results == []
    requests[0].cancel.set()
    assert fake.wait_calls(3)
    deadline = time.monotonic() + 5
    while not results and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.outcome for r in results] == [RunOutcome.CANCELED]
    fake.release()
    for thread in threads:
        thread.join(5)
    assert sorted(r.outcome for r in results) == ["canceled", "successful", "successful"]
    assert fake.max_concurrent == 3
    assert fake.running == 0


# --- each run has its own TMPDIR; the API discovery cache outlives it ----------------


def test_each_run_has_its_own_tmpdir_and_the_discovery_cache_is_carried_over(
    runner: AnsibleRunner, root: Path, tmp_path: Path
) -> None:
    def run(label: str) -> dict[str, Any]:
        request = make_request(
            tmp_path,
            playbook=PLAYBOOKS / "discovery_cache.yml",
            extravars={"out_dir": str(tmp_path), "label": label},
        )
        assert runner.run(request).outcome is RunOutcome.SUCCESSFUL
        report: dict[str, Any] = json.loads((tmp_path / f"{label}.json").read_text())
        return report

    first, second = run("first"), run("second")
    assert first["caches"] == []
    assert second["caches"] == ["k8srcp-test.json"]  # written by the first run
    assert first["tmpdir"] != second["tmpdir"]
    # A short name (a socket path under it must fit in 107 bytes) for a dir in the CR's.
    assert len(first["tmpdir"]) < 60, first["tmpdir"]
    assert Path(first["real_tmpdir"]).parent == data_dir(root)
    for report in (first, second):
        assert not Path(report["tmpdir"]).exists()
        assert not Path(report["tmpdir"]).is_symlink()
        assert not Path(report["real_tmpdir"]).exists()
    shared = root / ".discovery" / "k8srcp-test.json"
    assert json.loads(shared.read_text()) == {"written_by": "second"}
