"""Run the real `ansible-operator` as a local process against the test cluster.

Used by the end-to-end tests: `OperatorProcess` starts `ansible-operator run`
with the e2e project (tests/e2e/project) as its working directory, on
ephemeral loopback ports, with its own runner directory, and captures its JSON
log lines to a file the tests can search.

`E2E_OPERATOR_ARGS` (split like a shell would) is appended to every operator's
arguments: `E2E_OPERATOR_ARGS=--warm-ansible=false pytest tests/e2e/test_reconcile.py`
runs the same tests on the cold path.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client

from testbed.probes import wait_until

PROJECT = Path(__file__).parent / "project"
GROUP, VERSION = "e2e.example.com", "v1alpha1"
OPERATOR = str(Path(sys.executable).parent / "ansible-operator")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OperatorProcess:
    def __init__(
        self,
        *,
        kubeconfig: Path,
        workdir: Path,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        name: str = "operator",
        cwd: Path | None = None,
    ) -> None:
        # The working directory holds watches.yaml, roles/ and playbooks/;
        # default: the e2e project.
        self.cwd = cwd or PROJECT
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.runner_dir = workdir / f"{name}-runs"
        self.log_path = workdir / f"{name}.log"
        self.argv = [
            OPERATOR,
            "run",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--runner-dir={self.runner_dir}",
            "--graceful-shutdown-timeout=5s",
            # Several operators run at once in tests: no fixed ports.
            "--proxy-port=0",
            "--user-metrics-bind-address=127.0.0.1:0",
            *args,
            *shlex.split(os.environ.get("E2E_OPERATOR_ARGS", "")),
        ]
        self.env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            **(env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_ready: bool = True) -> OperatorProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        if wait_ready:
            wait_until("operator ready", self.ready, timeout=60, alive=self.alive)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        url = f"http://127.0.0.1:{port or self.health_port}{path}"
        try:
            # Generous: a busy CI machine can be slow to answer a scrape.
            with urllib.request.urlopen(url, timeout=10) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()
        except OSError:
            return 0, ""

    def ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def metrics(self) -> str:
        return self.get("/metrics", self.metrics_port)[1]

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> int | None:
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.signal(signal.SIGTERM)
        try:
            return self.wait(30)
        except subprocess.TimeoutExpired:
            assert self.proc is not None
            self.proc.kill()
            return self.proc.wait(5)

    def log_lines(self) -> Iterator[dict[str, Any]]:
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue

    def logged(self, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        return [entry for entry in self.log_lines() if predicate(entry)]


def custom(api: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def create_cr(
    api: Any, namespace: str, plural: str, kind: str, name: str, spec: dict[str, Any], **meta: Any
) -> dict[str, Any]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, **meta},
        "spec": spec,
    }
    return dict(
        custom(api).create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
    )


def get_cr(
    api: Any, namespace: str, plural: str, name: str, *, group: str = GROUP, version: str = VERSION
) -> dict[str, Any] | None:
    try:
        return dict(
            custom(api).get_namespaced_custom_object(group, version, namespace, plural, name)
        )
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def wait_condition(
    api: Any,
    namespace: str,
    plural: str,
    name: str,
    ctype: str,
    status: str = "True",
    timeout: float = 90,
) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def check() -> bool:
        obj = get_cr(api, namespace, plural, name)
        cond = condition(obj, ctype)
        if cond and cond.get("status") == status:
            found.update(obj or {})
            return True
        return False

    wait_until(f"{plural}/{name} {ctype}={status}", check, timeout=timeout)
    return found


def configmap(api: Any, namespace: str, name: str) -> dict[str, str] | None:
    try:
        cm = client.CoreV1Api(api).read_namespaced_config_map(name, namespace)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise
    return dict(cm.data or {})


def events_for(api: Any, namespace: str, name: str) -> list[Any]:
    items = (
        client.CoreV1Api(api)
        .list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
        .items
    )
    return list(items)


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    wait_until(what, check, timeout=timeout)


def run_processes(marker: str) -> list[str]:
    """Command lines of live processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and "pytest" not in cmd:
            found.append(cmd)
    return found


def pause(seconds: float) -> None:
    time.sleep(seconds)


def apply_crds(
    api: Any, docs: Iterable[dict[str, Any]], *, what: str, replace: bool = True
) -> list[str]:
    """Create CustomResourceDefinitions (replacing existing ones unless `replace`
    is false: a shared cluster's may belong to others) and wait until all are
    Established."""
    ext = client.ApiextensionsV1Api(api)
    names = []
    for doc in docs:
        if doc.get("kind") != "CustomResourceDefinition":  # e.g. a kustomization.yaml
            continue
        names.append(doc["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(doc)
        except client.ApiException as err:
            if err.status != 409:
                raise
            if not replace:
                continue
            current = ext.read_custom_resource_definition(doc["metadata"]["name"])
            doc["metadata"]["resourceVersion"] = current.metadata.resource_version
            ext.replace_custom_resource_definition(doc["metadata"]["name"], doc)

    def established() -> bool:
        for name in names:
            crd = ext.read_custom_resource_definition(name)
            conds = (crd.status and crd.status.conditions) or []
            if not any(c.type == "Established" and c.status == "True" for c in conds):
                return False
        return True

    wait_until(f"{what} CRDs established", established, timeout=60)
    return names
