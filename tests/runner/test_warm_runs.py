"""Real Ansible runs on the warm path (ansible_operator.warm), compared with cold runs.

The warm servers are real processes started by `WarmServers`; every run goes through
ansible-runner, the `ansible-playbook` shim and the interpreter client, exactly as in
the operator. Evidence comes from files the plays write, ansible-runner's artifacts
and /proc. The runner tests of test_ansible_runs.py about failure semantics, arguments,
facts, killing runs and hiding secrets run here a second time, against a warm runner
(this module's `runner` fixture overrides theirs).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import signal
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.base import RunOutcome, RunResult
from ansible_operator.warm import immortal, payloadcache
from ansible_operator.warm.protocol import HELPER_DIED_MESSAGE, PRIMED_COMM, run_comm
from ansible_operator.warm.supervisor import WarmServers, ansible_core_version
from testbed.probes import wait_until
from tests.runner.test_ansible_runs import (  # re-run on the warm path, see the docstring
    PLAYBOOKS,
    _neutral_environment,
    data_dir,
    files_containing,
    make_request,
    processes_mentioning,
    root,
    sleeper_watch,
    test_ansible_args_reach_ansible_playbook,
    test_cancel_kills_every_process_promptly,
    test_canceling_one_run_leaves_a_concurrent_run_alone,
    test_failure_semantics,
    test_missing_role_is_an_error_carrying_ansibles_output,
    test_no_log_values_stay_hidden,
    test_playbook_mode_and_fact_gathering,
    test_requeue_after_is_reported_and_the_run_still_completes,
    test_timeout_kills_every_process,
)

__all__ = [
    "_neutral_environment",
    "root",
    "sleeper_watch",
    "test_ansible_args_reach_ansible_playbook",
    "test_cancel_kills_every_process_promptly",
    "test_canceling_one_run_leaves_a_concurrent_run_alone",
    "test_failure_semantics",
    "test_missing_role_is_an_error_carrying_ansibles_output",
    "test_no_log_values_stay_hidden",
    "test_playbook_mode_and_fact_gathering",
    "test_requeue_after_is_reported_and_the_run_still_completes",
    "test_timeout_kills_every_process",
]


@pytest.fixture(scope="module")
def warm_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmServers]:
    servers = WarmServers(directory=tmp_path_factory.mktemp("warm") / ".warm")
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture
def runner(root: Path, warm_servers: WarmServers) -> AnsibleRunner:
    return AnsibleRunner(root=root, warm=warm_servers)


def run_processes(marker: str) -> list[int]:
    """Live processes of a run: its marker in their environment, or its process name."""
    needle = f"AO_RUN_MARKER={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            comm = (entry / "comm").read_text().strip()
        except (OSError, IndexError):
            continue
        if needle in environ or comm == run_comm(marker):
            found.append(int(entry.name))
    return found


def probe(runner: AnsibleRunner, out: Path, **overrides: Any) -> tuple[RunResult, dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    result = runner.run(make_request(out, playbook=PLAYBOOKS / "warm_probe.yml", **overrides))
    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    seen: dict[str, Any] = json.loads((out / "probe.json").read_text())
    return result, seen


def kubeconfig_with_token(path: Path, token: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        f"users: [{{name: u, user: {{token: {token}}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return path


# --- the warm path is really taken, and applies each run's own settings ---------------


def test_sockets_are_private_to_the_operators_uid(warm_servers: WarmServers) -> None:
    assert stat.S_IMODE(warm_servers.directory.stat().st_mode) == 0o700
    for name in ("playbook", "module"):
        mode = warm_servers.socket_path(name).stat().st_mode
        assert stat.S_ISSOCK(mode)
        assert stat.S_IMODE(mode) == 0o600
    assert set(warm_servers.pids()) == {"playbook", "module"}


def test_warm_runs_are_forked_and_see_their_own_settings(
    runner: AnsibleRunner, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = AnsibleRunner(root=root)
    seen: dict[str, dict[str, Any]] = {}
    for index, (name, each) in enumerate((("cold", cold), ("warm1", runner), ("warm2", runner))):
        config = tmp_path / f"{name}.cfg"
        config.write_text(f"[defaults]\ntimeout = {31 + index}\n")
        monkeypatch.setenv("ANSIBLE_CONFIG", str(config))
        monkeypatch.setenv("ANSIBLE_WARM_PROBE", name)
        if name == "warm2":  # the payload on the interpreter's stdin
            monkeypatch.setenv("ANSIBLE_PIPELINING", "True")
        kubeconfig = kubeconfig_with_token(tmp_path / f"{name}.kubeconfig", f"token-{name}")
        _result, seen[name] = probe(each, tmp_path / name, kubeconfig=kubeconfig)

    assert seen["cold"]["controller_comm"] == "ansible-playboo"
    # A warm worker starts with the run child's objects frozen (fewer copied pages);
    # a cold one does not (the same lookup, so the check can fail).
    assert seen["cold"]["run_child_frozen"] is False
    assert seen["warm1"]["run_child_frozen"] is True
    assert seen["warm2"]["run_child_frozen"] is True
    # What the primed child and the module server imported before forking is sealed
    # (immortal: using it copies no page); a cold run's objects are ordinary. Sealing
    # needs Python 3.12+ (the 2.18 line's venv is 3.11): there, objects are only frozen.
    sealing = immortal.supported()
    assert seen["cold"]["controller_sealed"] is False
    assert seen["cold"]["module"]["client_sealed"] is False
    for name in ("warm1", "warm2"):
        assert seen[name]["controller_sealed"] is sealing
        assert seen[name]["module"]["client_sealed"] is sealing
    assert not seen["cold"]["module"]["comm"].startswith("ao-")
    for index, name in enumerate(("cold", "warm1", "warm2")):
        run = seen[name]
        module = run["module"]
        if name != "cold":  # forked from the servers, named after the run's marker
            assert run["controller_comm"] == run_comm(run["marker"])
            assert module["comm"] == run_comm(run["marker"])
            assert run["interpreter"] == runner_interpreter(runner)
        assert module["marker"] == run["marker"]
        assert int(run["timeout"]) == 31 + index  # ANSIBLE_CONFIG read per run
        assert module["probe_var"] == name  # ANSIBLE_* variables per run
        assert module["env_tmpdir"] == run["tmpdir"]
        assert module["tempdir"] == run["tmpdir"]  # tempfile's cache was reset
        assert Path(module["real_tmpdir"]).parent == data_dir(root)  # run["tmpdir"] links it
        assert module["kube_default"] == str(tmp_path / f"{name}.kubeconfig")
        assert module["bearer"] == f"Bearer token-{name}"
    assert len({seen[n]["marker"] for n in seen}) == 3


def runner_interpreter(runner: AnsibleRunner) -> str:
    warm = runner._warm
    assert warm is not None
    return warm.interpreter


def test_an_ansible_cfg_in_the_project_dir_applies_per_run(
    runner: AnsibleRunner, root: Path, tmp_path: Path
) -> None:
    # ansible-runner runs ansible-playbook in <private data dir>/project.
    project = data_dir(root) / "project"
    project.mkdir(parents=True)
    (project / "ansible.cfg").write_text("[defaults]\ntimeout = 47\n")
    _result, seen = probe(runner, tmp_path / "with-cfg")
    assert int(seen["timeout"]) == 47
    (project / "ansible.cfg").unlink()
    _result, seen = probe(runner, tmp_path / "without-cfg")
    assert int(seen["timeout"]) == 10  # Ansible's default: nothing was frozen


def test_a_projects_own_module_utils_load_from_the_payload(
    runner: AnsibleRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pipelining in ("False", "True"):  # the payload as a script, and on stdin
        monkeypatch.setenv("ANSIBLE_PIPELINING", pipelining)
        out = tmp_path / pipelining
        out.mkdir()
        request = make_request(out, playbook=PLAYBOOKS / "warm_module_utils.yml")
        result = runner.run(request)
        assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
        assert json.loads((out / "utils.json").read_text()) == "from-the-payload"


@pytest.mark.slow
def test_twenty_concurrent_runs_each_see_only_their_own_credentials(
    runner: AnsibleRunner, tmp_path: Path
) -> None:
    tokens = {f"cr{i}": f"token-{uuid.uuid4().hex}" for i in range(20)}

    def one(name: str) -> tuple[str, dict[str, Any]]:
        kubeconfig = kubeconfig_with_token(tmp_path / f"{name}.kubeconfig", tokens[name])
        _result, seen = probe(runner, tmp_path / name, name=name, kubeconfig=kubeconfig)
        return name, seen

    with ThreadPoolExecutor(max_workers=20) as pool:
        seen = dict(pool.map(one, tokens))
    for name, token in tokens.items():
        assert seen[name]["module"]["bearer"] == f"Bearer {token}", name
        assert seen[name]["module"]["kube_default"] == str(tmp_path / f"{name}.kubeconfig")
        assert seen[name]["module"]["marker"] == seen[name]["marker"]
        assert seen[name]["module"]["comm"] == run_comm(seen[name]["marker"])
    assert len({s["marker"] for s in seen.values()}) == 20


# --- crashes and kills ------------------------------------------------------------------


def test_a_helper_dying_mid_run_fails_that_run_and_the_next_run_succeeds(
    root: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    servers = WarmServers(directory=tmp_path_factory.mktemp("crash") / ".warm", restart_interval=0)
    servers.start()
    try:
        runner = AnsibleRunner(root=root, warm=servers)
        marker = f"ao-test-{uuid.uuid4().hex}"
        request = make_request(
            tmp_path, playbook=PLAYBOOKS / "sleep.yml", extravars={"marker": marker}
        )
        results: list[RunResult] = []
        thread = threading.Thread(target=lambda: results.append(runner.run(request)))
        thread.start()
        wait_until("the sleeping task", lambda: bool(processes_mentioning(marker)), timeout=60)
        server = servers.pids()["playbook"]
        below = children_of(server)  # keepers, or primed children (warm/primed.py)
        primed = [pid for pid in below if process_name(pid) == PRIMED_COMM]
        keepers = [pid for pid in below if pid not in primed]
        keepers += [pid for each in primed for pid in children_of(each)]
        assert keepers, "no keeper below the playbook helper"
        # The helper, its primed children and the keepers crash (OOM kill ...).
        for pid in [server, *primed, *keepers]:
            os.kill(pid, signal.SIGKILL)
        thread.join(60)
        assert not thread.is_alive()
        (result,) = results
        assert result.outcome is RunOutcome.ERROR
        assert HELPER_DIED_MESSAGE in result.stdout_tail
        wait_until("no process of the run", lambda: not processes_mentioning(marker), timeout=10)

        # The next run restarts the helper (or goes cold until it listens) and succeeds.
        probe(runner, tmp_path / "after")
        wait_until("a new playbook helper", lambda: "playbook" in servers.pids(), timeout=30)
        assert servers.pids()["playbook"] != server
        wait_until("it listens", servers.socket_path("playbook").exists, timeout=30)
        _result, seen = probe(runner, tmp_path / "warm-again")
        assert seen["controller_comm"] == run_comm(seen["marker"])
    finally:
        servers.stop()
    assert not servers.directory.exists()
    assert run_processes(seen["marker"]) == []


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def children_of(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == parent:
                found.append(int(entry.name))
    return found


def test_without_servers_the_clients_go_cold(root: Path, tmp_path: Path) -> None:
    servers = WarmServers(directory=tmp_path / "never-started" / ".warm")
    servers.prepare()  # the clients exist, no server listens
    servers._stopped = True  # and none starts with the run (as during the operator's stop)
    _result, seen = probe(AnsibleRunner(root=root, warm=servers), tmp_path / "cold")
    assert seen["controller_comm"] == "ansible-playboo"
    assert not seen["module"]["comm"].startswith("ao-")


# --- kubernetes.core on the testbed: same results cold and warm -------------------------


def k8s_run(
    runner: AnsibleRunner, out: Path, *, namespace: str, kubeconfig: Path, secret: str
) -> tuple[RunResult, dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    request = make_request(
        out,
        playbook=PLAYBOOKS / "warm_k8s.yml",
        kubeconfig=kubeconfig,
        extravars={"out_dir": str(out), "ns": namespace, "secret_value": secret},
    )
    result = runner.run(request)
    return result, json.loads((out / "k8s.json").read_text())


@pytest.mark.cluster
def test_kubernetes_core_gives_the_same_results_cold_and_warm(
    runner: AnsibleRunner, root: Path, tmp_path: Path, namespace: str, kubeconfig_path: Path
) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    outcomes = {}
    for name, each in (("cold", AnsibleRunner(root=root)), ("warm", runner)):
        result, seen = k8s_run(
            each, tmp_path / name, namespace=namespace, kubeconfig=kubeconfig_path, secret=secret
        )
        outcomes[name] = (result, seen)
        assert result.artifacts_dir is not None
        encoded = base64.b64encode(secret.encode()).decode()
        assert files_containing(result.artifacts_dir, secret) == []
        assert files_containing(result.artifacts_dir, encoded) == []
        assert files_containing(result.artifacts_dir, "was specified for this result")
    (cold, cold_seen), (warm, warm_seen) = outcomes["cold"], outcomes["warm"]
    assert cold_seen == warm_seen
    assert cold_seen["create"] is True
    assert cold_seen["again"] is False
    assert cold_seen["check"] == [True, {"key": "two"}]
    assert cold_seen["info"] == {"key": "one"}  # check mode changed nothing
    assert cold_seen["secret"] is True
    assert cold_seen["bad"][0] is True
    assert (cold.outcome, cold.rc) == (warm.outcome, warm.rc) == (RunOutcome.FAILED, 2)
    assert [f.message for f in cold.failures] == [f.message for f in warm.failures]
    assert cold.stats is not None
    assert warm.stats is not None
    assert dataclasses.replace(cold.stats, completion="") == dataclasses.replace(
        warm.stats, completion=""
    )


# --- AnsiballZ payloads shared across warm runs (warm/payloadcache.py) ----------------------

SHARED_FQN = "ansible_collections.aotest.shared.plugins.modules.probe"
SHARED_PROBE = """\
import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aotest.shared.plugins.module_utils.value import VALUE


def main():
    module = AnsibleModule(argument_spec={"dest": {"type": "str", "required": True}})
    with open(module.params["dest"], "w") as handle:
        json.dump(VALUE, handle)
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
"""
SHARED_PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - aotest.shared.probe:
        dest: "{{ out_dir }}/value.json"
"""


def shared_probe(runner: AnsibleRunner, playbook: Path, out: Path) -> tuple[Any, list[str]]:
    """The value the module's payload carried, and the cache's notes about it."""
    out.mkdir()
    result = runner.run(make_request(out, playbook=playbook))
    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    assert result.artifacts_dir is not None
    stdout = (result.artifacts_dir / "stdout").read_text()
    # Ansible wraps its warnings: join the lines again, without colour codes.
    text = re.sub(r"\s+", " ", re.sub(r"\x1b\[[0-9;]*m", "", stdout))
    notes = re.findall(rf"ao-warm payloadcache: ([a-z ]+): {re.escape(SHARED_FQN)}\b", text)
    return json.loads((out / "value.json").read_text()), notes


def test_a_payload_is_shared_by_later_runs_until_its_module_utils_change(
    runner: AnsibleRunner,
    warm_servers: WarmServers,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AO_WARM_DEBUG", "1")  # the cache's notes, as Ansible warnings
    project = tmp_path / "project"
    collection = project / "collections" / "ansible_collections" / "aotest" / "shared"
    (collection / "plugins" / "modules").mkdir(parents=True)
    (collection / "plugins" / "module_utils").mkdir()
    (collection / "plugins" / "modules" / "probe.py").write_text(SHARED_PROBE)
    value = collection / "plugins" / "module_utils" / "value.py"
    value.write_text('VALUE = "one"\n')
    playbook = project / "probe.yml"
    playbook.write_text(SHARED_PLAYBOOK)
    time.sleep(payloadcache.RACY_SECONDS + 0.1)  # files this young are not shared yet

    if not ansible_core_version().startswith(payloadcache.SUPPORTED_ANSIBLE):
        # ansible-core 2.18 keeps its payload cache in another format: every warm run
        # builds its own payloads, as a cold one does (docs/runner.md), and is right.
        for attempt in ("1", "2"):
            assert shared_probe(runner, playbook, tmp_path / attempt) == ("one", [])
        value.write_text('VALUE = "two"\n')
        assert shared_probe(runner, playbook, tmp_path / "3") == ("two", [])
        return
    assert shared_probe(runner, playbook, tmp_path / "1") == ("one", ["miss", "shared"])
    assert stat.S_IMODE(warm_servers.ansiballz_dir.stat().st_mode) == 0o700
    entries = list(warm_servers.ansiballz_dir.iterdir())
    assert entries
    assert all(stat.S_IMODE(entry.stat().st_mode) == 0o600 for entry in entries)
    assert shared_probe(runner, playbook, tmp_path / "2") == ("one", ["hit"])

    # The key test: the next run's module behaves per the edit, even one that kept the
    # file's size and modification time.
    before = value.stat()
    value.write_text('VALUE = "two"\n')
    os.utime(value, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert shared_probe(runner, playbook, tmp_path / "3") == ("two", ["miss", "not shared"])
    value.write_text('VALUE = "three"\n')
    assert shared_probe(runner, playbook, tmp_path / "4") == ("three", ["miss", "not shared"])

    # The cold path never loads the cache.
    cold_value, cold_notes = shared_probe(AnsibleRunner(root=root), playbook, tmp_path / "cold")
    assert (cold_value, cold_notes) == ("three", [])
