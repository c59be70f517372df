"""The Go era's idioms, run through the real operator on each Ansible line (issue 25).

tests/compat/project holds roles written the way roles for the Go operator
(ansible-core 2.18) were written: short module names from the role's
`collections`, non-boolean conditionals, templates whose result is a number where
Kubernetes wants a string, watches.yaml's vars, finalizer vars,
`snakeCaseParameters: false` and `reconcilePeriod: 0s`. One `Idiom` CR per idiom.

Per line, all CRs of the module are created at once and served by one operator each:

* the 2.18 line: one operator; every idiom is Successful;
* 2.19 and later: one operator with the 2.18 compatibility mode (the default), where
  every idiom is Successful and each restored behaviour is logged with its task and
  counted; one with `ANSIBLE_OPERATOR_ANSIBLE_COMPAT=off`, where each idiom that
  relied on 2.18 fails with the error docs/porting.md quotes.

`make test` runs this module on the default line and again on the 2.18 line.
k8s_exec and k8s_log need a kubelet: tests/realnode/test_exec.py runs them on the
real node (docs/porting.md "The corpus").
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.release import __version__ as ANSIBLE_CORE
from kubernetes import client

from testbed.probes import wait_until
from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import OperatorProcess, apply_crds, condition, get_cr

PROJECT = Path(__file__).parent / "project"
GROUP, VERSION = "compat.example.com", "v1alpha1"
TAGGED = tuple(int(p) for p in ANSIBLE_CORE.split(".")[:2]) >= (2, 19)
RELATED_IMAGE = "registry.example/app:1.2.3"

NOT_BOOLEAN = "Conditionals must have a boolean result"
UNMARSHAL = "cannot unmarshal number into Go struct field {field} of type string"


@dataclass(frozen=True)
class Idiom:
    spec: dict[str, Any]
    # The error (a regular expression) on 2.19+ without the compatibility mode;
    # None: the idiom runs there unchanged.
    without_compat: str | None = None
    # The notice the mode logs and counts for it on 2.19+ (compat.notices.WHATS).
    notice: str | None = None


def _unmarshal(field: str) -> str:
    return re.escape(UNMARSHAL.format(field=field))


IDIOMS: dict[str, Idiom] = {
    "when_length": Idiom({}, re.escape(NOT_BOOLEAN), "broken-conditional"),
    "when_string": Idiom({"flag": "enabled"}, re.escape(NOT_BOOLEAN), "broken-conditional"),
    "when_env": Idiom({}, re.escape(NOT_BOOLEAN), "broken-conditional"),
    "assert_count": Idiom({}, re.escape(NOT_BOOLEAN), "broken-conditional"),
    "configmap_number": Idiom({}, _unmarshal("ConfigMap.data"), "native-type"),
    "label_number": Idiom({}, _unmarshal("ObjectMeta.metadata.labels"), "native-type"),
    "annotation_number": Idiom({}, _unmarshal("ObjectMeta.metadata.annotations"), "native-type"),
    "env_args": Idiom(
        {}, _unmarshal("Container.spec.template.spec.containers.args"), "native-type"
    ),
    "set_fact_structures": Idiom({}, _unmarshal("ConfigMap.data"), "native-type"),
    "awx_indent": Idiom(
        {},
        re.escape(
            "The filter plugin 'ansible.builtin.indent' failed: "
            "unsupported operand type(s) for +=: 'NoneType' and 'str'"
        ),
        "empty-template-lookup",
    ),
    "awx_optional_resource": Idiom(
        {},
        re.escape("Failed to apply object: 'NoneType' object is not callable"),
        "empty-template-lookup",
    ),
    "include_when": Idiom({}),
    "k8s_wait": Idiom({}),
    "k8s_status": Idiom({}),
    "no_log_secret": Idiom({}),
    "related_image": Idiom({}),
    "k8s_lookup": Idiom({}),
}


@dataclass
class Line:
    """One operator of this module and the namespace it watches."""

    name: str
    compat: bool
    namespace: str
    operator: OperatorProcess


def _start(api_client: Any, kubeconfig: Path, workdir: Path, *, name: str, compat: bool) -> Line:
    namespace = make_namespace(api_client, f"compat-{name}")
    env = {
        "WATCH_NAMESPACE": namespace,
        "COMPAT_CORPUS_FEATURE": "on",
        "RELATED_IMAGE_COMPAT_APP": RELATED_IMAGE,
        "ANSIBLE_OPERATOR_ANSIBLE_COMPAT": "2.18" if compat else "off",
    }
    operator = OperatorProcess(
        kubeconfig=kubeconfig, workdir=workdir, env=env, name=name, cwd=PROJECT
    )
    return Line(name=name, compat=compat, namespace=namespace, operator=operator.start())


def _create_all(api_client: Any, line: Line) -> None:
    custom = client.CustomObjectsApi(api_client)
    for idiom, case in IDIOMS.items():
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Idiom",
            "metadata": {"name": idiom.replace("_", "-")},
            "spec": {"idiom": idiom, **case.spec},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, line.namespace, "idioms", body)
    setting = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Setting",
        "metadata": {"name": "go-era"},
        "spec": {"appName": "demo"},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, line.namespace, "settings", setting)


@pytest.fixture(scope="module")
def lines(
    api_client: Any, kubeconfig_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Line]]:
    docs = yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text())
    apply_crds(api_client, docs, what="compat")
    workdir = tmp_path_factory.mktemp("compat")
    wanted = [("on", True), ("off", False)] if TAGGED else [("218", True)]
    started: list[Line] = []
    try:
        for name, compat in wanted:
            started.append(_start(api_client, kubeconfig_path, workdir, name=name, compat=compat))
        for line in started:
            _create_all(api_client, line)
        yield started
    finally:
        for line in started:
            line.operator.stop()
            drop_namespace(api_client, line.namespace)


def _finished(api_client: Any, line: Line, plural: str, name: str) -> dict[str, Any]:
    """The CR once its first run ended: Successful is True, or Failure is True."""
    found: dict[str, Any] = {}

    def done() -> bool:
        obj = get_cr(api_client, line.namespace, plural, name, group=GROUP, version=VERSION)
        ended = [condition(obj, ctype) or {} for ctype in ("Successful", "Failure")]
        if not any(cond.get("status") == "True" for cond in ended):
            return False
        found.update(obj or {})
        return True

    wait_until(f"{line.name}: {plural}/{name} finished", done, timeout=240)
    return found


def _expect(line: Line, case: Idiom) -> str | None:
    """None: Successful; else the regular expression of the failure's message."""
    if TAGGED and not line.compat:
        return case.without_compat
    return None


@pytest.mark.cluster
@pytest.mark.parametrize("idiom", IDIOMS)
def test_each_idiom(api_client: Any, lines: list[Line], idiom: str) -> None:
    case = IDIOMS[idiom]
    for line in lines:
        obj = _finished(api_client, line, "idioms", idiom.replace("_", "-"))
        expected = _expect(line, case)
        if expected is None:
            assert (condition(obj, "Successful") or {}).get("status") == "True", (line.name, obj)
        else:
            failure = condition(obj, "Failure") or {}
            assert failure.get("status") == "True", (line.name, obj)
            assert re.search(expected, str(failure.get("message"))), (line.name, failure)


def _expected_notice(line: Line, case: Idiom) -> str | None:
    if TAGGED:
        # Off: nothing is restored, so nothing is reported (the run fails instead).
        return case.notice if line.compat else None
    # 2.18 line: ansible-core itself warns of its non-boolean conditionals.
    return case.notice if case.notice == "broken-conditional" else None


def _notices(line: Line) -> list[dict[str, Any]]:
    return line.operator.logged(lambda e: e.get("compat") is not None)


@pytest.mark.cluster
def test_each_restored_behaviour_is_logged_with_its_task_and_counted(
    api_client: Any, lines: list[Line]
) -> None:
    for line in lines:
        for idiom in IDIOMS:
            _finished(api_client, line, "idioms", idiom.replace("_", "-"))
        notices = _notices(line)
        metrics = line.operator.metrics()
        for idiom, case in IDIOMS.items():
            name = idiom.replace("_", "-")
            mine = [n for n in notices if n.get("name") == name]
            expected = _expected_notice(line, case)
            if expected is None:
                assert [n["compat"] for n in mine] == [], (line.name, idiom, mine)
                continue
            assert {n["compat"] for n in mine} == {expected}, (line.name, idiom, notices)
            assert all(
                n["level"] == "warn" and "/roles/idioms/tasks/" in n["task_path"] for n in mine
            ), mine
            if idiom == "when_length":
                # A false conditional skips its task: reported all the same.
                assert {n["task"] for n in mine} == {
                    "Note the items (a length as the conditional)",
                    "Note nothing (an empty list's length as the conditional)",
                }, mine
            pattern = rf'ansible_operator_compat_deprecations_total{{.*what="{expected}".*}} [1-9]'
            assert re.search(pattern, metrics), (line.name, expected)


@pytest.mark.cluster
def test_what_the_api_server_got_is_what_218_sent(api_client: Any, lines: list[Line]) -> None:
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    for line in lines:
        if TAGGED and not line.compat:
            continue
        for idiom in ("configmap_number", "set_fact_structures", "env_args", "related_image"):
            _finished(api_client, line, "idioms", idiom.replace("_", "-"))
        ns = line.namespace
        assert core.read_namespaced_config_map("configmap-number-count", ns).data == {"count": "4"}
        settings = core.read_namespaced_config_map("set-fact-structures-settings", ns).data
        assert settings == {
            "name": "set-fact-structures-app",
            "replicas": "3",
            "ports": "8080,8081",
        }
        container = apps.read_namespaced_deployment("env-args-app", ns).spec.template.spec
        app = container.containers[0]
        assert app.args == ["--port", "8080", "--workers=3"]
        assert {e.name: e.value for e in app.env} == {"PORT": "8080", "WORKERS": "6"}
        assert app.ports[0].container_port == 8080
        related = apps.read_namespaced_deployment("related-image-related", ns)
        assert related.spec.template.spec.containers[0].image == RELATED_IMAGE


@pytest.mark.cluster
def test_no_log_keeps_the_secret_out_of_the_log(api_client: Any, lines: list[Line]) -> None:
    import base64  # noqa: PLC0415

    for line in lines:
        _finished(api_client, line, "idioms", "no-log-secret")
        secret = client.CoreV1Api(api_client).read_namespaced_secret(
            "no-log-secret-db", line.namespace
        )
        password = base64.b64decode(secret.data["password"]).decode()
        assert len(password) == 24
        assert password not in line.operator.log_path.read_text()


@pytest.mark.cluster
def test_watches_yaml_idioms_and_the_finalizer_vars(api_client: Any, lines: list[Line]) -> None:
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    for line in lines:
        obj = _finished(api_client, line, "settings", "go-era")
        assert (condition(obj, "Successful") or {}).get("status") == "True", obj
        data = core.read_namespaced_config_map("go-era-settings", line.namespace).data
        assert data == {"greeting": "hello", "appName": "demo"}
        custom.delete_namespaced_custom_object(GROUP, VERSION, line.namespace, "settings", "go-era")
    for line in lines:
        wait_until(
            f"{line.name}: settings/go-era gone",
            lambda line=line: (
                get_cr(
                    api_client, line.namespace, "settings", "go-era", group=GROUP, version=VERSION
                )
                is None
            ),
            timeout=120,
        )
        finalized = core.read_namespaced_config_map("go-era-finalized", line.namespace)
        assert finalized.data == {"state": "absent"}
        names = [c.metadata.name for c in core.list_namespaced_config_map(line.namespace).items]
        assert "go-era-settings" not in names


def _restore(api_client: Any, line: Line, name: str, *, wait: bool) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Restore",
        "metadata": {"name": name},
        "spec": {"waitForDeletion": wait},
    }
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, line.namespace, "restores", body
    )


@pytest.mark.cluster
def test_a_run_cannot_resurrect_its_deleted_cr(api_client: Any, lines: list[Line]) -> None:
    """Issue 25 point 5: the proxy refuses the re-creation; the CR stays deleted."""
    line = lines[0]
    custom = client.CustomObjectsApi(api_client)
    ns = line.namespace
    # A role writing its own CR that exists: a patch, forwarded as always.
    _restore(api_client, line, "kept", wait=False)
    kept = _finished(api_client, line, "restores", "kept")
    assert (condition(kept, "Successful") or {}).get("status") == "True", kept
    assert kept["metadata"]["labels"] == {"phase": "labelled"}

    name = f"gone-{uuid.uuid4().hex[:6]}"
    _restore(api_client, line, name, wait=True)
    wait_until(
        "the restore's run is in flight",
        lambda: (
            (
                condition(
                    get_cr(api_client, ns, "restores", name, group=GROUP, version=VERSION),
                    "Running",
                )
                or {}
            ).get("status")
            == "True"
        ),
        timeout=120,
    )
    uid = get_cr(api_client, ns, "restores", name, group=GROUP, version=VERSION)["metadata"]["uid"]
    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "restores", name)

    def refused() -> list[dict[str, Any]]:
        return line.operator.logged(
            lambda e: (
                "refused to re-create Restore" in str(e.get("msg", ""))
                and name in str(e.get("msg"))
            )
        )

    wait_until("the proxy refused the re-creation", lambda: bool(refused()), timeout=120)
    wait_until(
        "the run ended",
        lambda: bool(
            line.operator.logged(
                lambda e: e.get("name") == name and "Ansible run failed" in str(e.get("msg", ""))
            )
        ),
        timeout=120,
    )
    assert get_cr(api_client, ns, "restores", name, group=GROUP, version=VERSION) is None
    events = client.CoreV1Api(api_client).list_namespaced_event(
        ns, field_selector=f"involvedObject.uid={uid},reason=RecreateRefused"
    )
    assert [e.type for e in events.items] == ["Warning"], events.items
    assert "it was deleted while the run was in progress" in events.items[0].message


@pytest.mark.cluster
def test_plan_lists_the_behaviours_a_role_relies_on(
    api_client: Any, lines: list[Line], kubeconfig_path: Path
) -> None:
    """`ansible-operator plan` of an existing CR lists what is left to port."""
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    line = lines[0]  # the mode on, on either line
    _finished(api_client, line, "idioms", "configmap-number")
    env = {**os.environ, **line.operator.env, "KUBECONFIG": str(kubeconfig_path)}
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-operator"),
            "plan",
            "Idiom",
            "when-length",
            "-n",
            line.namespace,
            "-o",
            "json",
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode in {0, 2}, proc.stderr
    listed = json.loads(proc.stdout)["compatDeprecations"]
    assert [(d["what"], d["task"]) for d in listed] == [
        ("broken-conditional", "Note the items (a length as the conditional)"),
        ("broken-conditional", "Note nothing (an empty list's length as the conditional)"),
    ], listed
    assert listed[0]["taskPath"].endswith("roles/idioms/tasks/when_length.yml:2")
    assert listed[1]["taskPath"].endswith("roles/idioms/tasks/when_length.yml:11")
