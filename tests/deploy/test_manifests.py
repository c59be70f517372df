"""The kustomize manifests, checked without a cluster.

* every file we own under config/ and crds/kustomization.yaml is YAML with
  2-space indentation and no duplicate keys; crds/kustomization.yaml lists
  exactly the CRD files;
* `kubectl kustomize config/default` builds, and the Deployment carries the
  probes, arguments, environment, security settings and volumes it must, with
  arguments our own `ansible-operator run` parser accepts;
* manager-role grants exactly what the operator and the example Ansible
  content need: the verbs each kubernetes.core / operator_sdk.util task needs
  are derived from roles/ and playbooks/, and the role may hold nothing more.
  (tests/deploy/test_rbac.py checks the same on a real API server.)
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_operator.config.options import add_run_arguments, options_from_args
from tests.deploy import support

REPO = support.REPO
OWN_YAML = [
    *sorted((REPO / "config").glob("default/*.yaml")),
    *sorted((REPO / "config").glob("manager/*.yaml")),
    *sorted((REPO / "config").glob("rbac/*.yaml")),
    *sorted((REPO / "config").glob("prometheus/*.yaml")),
    REPO / "crds" / "kustomization.yaml",
]

# --- files ------------------------------------------------------------------------


def _indentation_errors(node: yaml.Node, path: Path) -> Iterator[str]:
    """Block mappings and sequences must nest by exactly two columns."""
    if isinstance(node, yaml.MappingNode) and not node.flow_style:
        for key, value in node.value:
            col = key.start_mark.column
            if isinstance(value, yaml.MappingNode) and not value.flow_style and value.value:
                child = value.value[0][0].start_mark.column
                if child != col + 2:
                    yield f"{path}:{value.start_mark.line + 1}: indented {child - col}, not 2"
            if isinstance(value, yaml.SequenceNode) and not value.flow_style and value.value:
                dash = value.start_mark.column
                if dash not in (col, col + 2):
                    yield f"{path}:{value.start_mark.line + 1}: list indented {dash - col}"
            yield from _indentation_errors(value, path)
    elif isinstance(node, yaml.SequenceNode) and not node.flow_style:
        for item in node.value:
            if isinstance(item, yaml.MappingNode) and not item.flow_style and item.value:
                col = item.value[0][0].start_mark.column
                if col != node.start_mark.column + 2:
                    yield f"{path}:{item.start_mark.line + 1}: list item indented wrongly"
            yield from _indentation_errors(item, path)


@pytest.mark.parametrize("path", OWN_YAML, ids=lambda p: str(p.relative_to(REPO)))
def test_yaml_is_strict_and_two_space_indented(path: Path) -> None:
    text = path.read_text()
    assert support.load_all_strict(text)
    assert "\t" not in text
    errors = [e for doc in yaml.compose_all(text) for e in _indentation_errors(doc, path)]
    assert not errors, errors


def test_crds_kustomization_lists_every_crd_file() -> None:
    listed = yaml.safe_load((REPO / "crds" / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in (REPO / "crds").glob("*.yaml") if p.stem != "kustomization")
    assert sorted(listed) == present
    for name in listed:
        (doc,) = support.load_all_strict((REPO / "crds" / name).read_text())
        assert doc["kind"] == "CustomResourceDefinition"


def test_every_watched_kind_has_a_crd() -> None:
    watches = yaml.safe_load((REPO / "watches.yaml").read_text())
    assert {w["kind"] for w in watches} <= set(support.plurals())


# --- the built manifests ------------------------------------------------------------


@pytest.fixture(scope="module")
def default_build() -> list[dict[str, Any]]:
    # kubectl comes with the testbed (make testbed-build); support.kubectl says so if not.
    return support.build(REPO / "config" / "default")


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def test_default_build_contents(default_build: list[dict[str, Any]]) -> None:
    kinds = sorted(o["kind"] for o in default_build)
    assert kinds == sorted(
        ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role"]
        + ["RoleBinding", "Service", "Deployment"]
        + ["CustomResourceDefinition"] * len(support.plurals())
    )
    namespace = _one(default_build, "Namespace")["metadata"]["name"]
    assert namespace == "ansible-operator-system"
    for obj in default_build:
        meta = obj["metadata"]
        if obj["kind"] == "CustomResourceDefinition":
            assert not meta["name"].startswith("ansible-operator-")
        elif obj["kind"] != "Namespace":
            assert meta["name"].startswith("ansible-operator-"), meta["name"]
        if obj["kind"] in {"ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"}:
            assert meta["namespace"] == namespace
    account = _one(default_build, "ServiceAccount")["metadata"]["name"]
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        (subject,) = _one(default_build, binding)["subjects"]
        assert subject == {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    assert (
        _one(default_build, "ClusterRoleBinding")["roleRef"]["name"]
        == _one(default_build, "ClusterRole")["metadata"]["name"]
    )
    assert (
        _one(default_build, "RoleBinding")["roleRef"]["name"]
        == _one(default_build, "Role")["metadata"]["name"]
    )


def _container(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def _quantity(text: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "": 1.0}
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text)).groups()  # type: ignore[union-attr]
    return float(number) * units[unit]


def test_deployment(default_build: list[dict[str, Any]]) -> None:
    pod, container = _container(default_build)
    assert pod["serviceAccountName"] == _one(default_build, "ServiceAccount")["metadata"]["name"]
    assert container["image"] == "controller:latest"
    args = container["args"]
    assert "--leader-elect" in args
    assert any(a.startswith("--leader-election-id=") and len(a) > 21 for a in args)
    assert "--health-probe-bind-address=:6789" in args
    assert "--metrics-bind-address=:8443" in args
    # The memory limit is sized for a fixed number of concurrent Ansible runs.
    assert any(a.startswith("--max-concurrent-reconciles-total=") for a in args)
    # Readiness needs the leader Lease: a surge pod could never become ready.
    assert _one(default_build, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert {"name": "ANSIBLE_GATHERING", "value": "explicit"} in container["env"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 6789}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 6789}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert {"/tmp", "/opt/ansible/.ansible"} <= set(mounts)
    assert all("emptyDir" in volumes[name] for name in mounts.values())
    # Long enough for --graceful-shutdown-timeout (30s by default) and the Lease release.
    assert pod["terminationGracePeriodSeconds"] > 30
    resources = container["resources"]
    for key in ("cpu", "memory"):
        assert _quantity(resources["requests"][key]) <= _quantity(resources["limits"][key])


def test_deployment_args_are_accepted_by_ansible_operator_run(
    default_build: list[dict[str, Any]],
) -> None:
    _pod, container = _container(default_build)
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    argv = ["--watches-file=./watches.yaml", *container["args"]]
    options = options_from_args(parser.parse_args(argv), argv, environ={})
    assert options.leader_elect
    assert options.leader_election_id
    assert options.health_probe_bind_address == ":6789"
    assert options.metrics_bind_address == ":8443"


def test_metrics_service_reaches_the_metrics_port(default_build: list[dict[str, Any]]) -> None:
    pod_labels = _one(default_build, "Deployment")["spec"]["template"]["metadata"]["labels"]
    _pod, container = _container(default_build)
    service = _one(default_build, "Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port["targetPort"] == "metrics"
    assert named["metrics"] == 8443
    assert named["health"] == 6789
    if support.kubectl_binary() is not None:
        (monitor,) = support.build(REPO / "config" / "prometheus")
        assert (
            monitor["spec"]["selector"]["matchLabels"].items()
            <= service["metadata"]["labels"].items()
        )
        assert monitor["spec"]["endpoints"][0]["port"] == port["name"]


# --- RBAC: what the Ansible content needs, and nothing more --------------------------

Triple = tuple[str, str, str]  # (apiGroup, resource, verb)

BUILTIN_KINDS = {  # kind: (plural, namespaced)
    "Pod": ("pods", True),
    "Service": ("services", True),
    "Secret": ("secrets", True),
    "ConfigMap": ("configmaps", True),
    "PersistentVolumeClaim": ("persistentvolumeclaims", True),
    "PersistentVolume": ("persistentvolumes", False),
    "Deployment": ("deployments", True),
    "StatefulSet": ("statefulsets", True),
    "Job": ("jobs", True),
    "CronJob": ("cronjobs", True),
}
# Kinds a task names through a variable: the values that variable can take.
TEMPLATED_KINDS = {"{{ backup_target_kind }}": ["SampleDB", "ReplicatedDB"]}
# Tasks with state=present that can only ever create: they run only when a
# lookup just before found no object. Without this the Secrets they create
# would need `patch` too, i.e. the right to rewrite any Secret in the cluster.
CREATE_ONLY = {
    ("roles/sampledb/tasks/credentials.yml", "Generate the credentials once"),
    ("roles/replicateddb/tasks/main.yml", "Generate the credentials once"),
}
# Modules that talk to no Kubernetes API.
NO_API = {"operator_sdk.util.requeue_after", "operator_sdk.util.osdk_metric"}


@dataclass(frozen=True)
class Need:
    triple: Triple
    where: str


@dataclass(frozen=True)
class Kind:
    group: str
    plural: str
    kind: str
    namespaced: bool


def _crd_kinds() -> dict[str, Kind]:
    return {
        doc["spec"]["names"]["kind"]: Kind(
            doc["spec"]["group"],
            doc["spec"]["names"]["plural"],
            doc["spec"]["names"]["kind"],
            doc["spec"]["scope"] == "Namespaced",
        )
        for doc in support.crd_documents()
    }


def _resource(api_version: str, kind: str) -> Kind:
    crds = _crd_kinds()
    if kind in crds:
        return crds[kind]
    assert kind in BUILTIN_KINDS, f"kind {kind}: add it to BUILTIN_KINDS in {__file__}"
    group = api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""
    plural, namespaced = BUILTIN_KINDS[kind]
    return Kind(group, plural, kind, namespaced)


def _kinds(params: dict[str, Any], where: str) -> list[tuple[str, str]]:
    definition = params.get("definition")
    if isinstance(definition, str) and "{{" in definition:
        # A definition built by an expression names its kind in the module's own
        # api_version/kind parameters, which the module also checks against it.
        assert "api_version" in params, f"{where}: templated definition without api_version"
        assert "kind" in params, f"{where}: templated definition without kind"
        definition = None
    if definition is not None:
        docs = definition if isinstance(definition, list) else [definition]
        assert all(isinstance(d, dict) for d in docs), f"{where}: templated definition"
        pairs = [
            (
                str(d.get("apiVersion", params.get("api_version"))),
                str(d.get("kind", params.get("kind"))),
            )
            for d in docs
        ]
    else:
        pairs = [(str(params["api_version"]), str(params["kind"]))]
    resolved = []
    for api_version, kind in pairs:
        if "{{" in kind:
            assert kind in TEMPLATED_KINDS, f"{where}: kind {kind}: add it to TEMPLATED_KINDS"
            resolved += [(api_version, k) for k in TEMPLATED_KINDS[kind]]
        else:
            resolved.append((api_version, kind))
    return resolved


def _states(params: dict[str, Any]) -> set[str]:
    state = str(params.get("state", "present"))
    found = {s for s in ("present", "absent", "patched") if s in state}
    assert found, f"state {state!r}"
    return found


def _module(task: dict[str, Any]) -> tuple[str, Any] | None:
    for key, value in task.items():
        if key.startswith(("kubernetes.core.", "operator_sdk.util.", "community.kubernetes.")):
            return key, value
        if key in {"k8s", "k8s_info", "k8s_scale", "k8s_status", "k8s_event"}:
            prefix = (
                "operator_sdk.util." if key in {"k8s_status", "k8s_event"} else "kubernetes.core."
            )
            return prefix + key, value
    return None


def _watched(kind: Kind, watch: dict[str, Any]) -> bool:
    """Whether the operator watches `kind` once a run of `watch` wrote one (docs/proxy.md)."""
    if not watch.get("watchDependentResources", True):
        return False
    for entry in watch.get("blacklist") or []:
        if entry.get("kind") == kind.kind and entry.get("group", "") == kind.group:
            return False
    owner = _crd_kinds()[watch["kind"]]
    if owner.namespaced and not kind.namespaced:
        return bool(watch.get("watchClusterScopedResources", False))
    return True


def _task_needs(task: dict[str, Any], where: str, watches: list[dict[str, Any]]) -> Iterator[Need]:
    found = _module(task)
    if found is None:
        return
    module, params = found
    create_only = (where, task.get("name")) in CREATE_ONLY
    if create_only:
        assert "length == 0" in str(task.get("when")), f"{where}: no longer create-only?"
    where = f"{where} [{task.get('name', module)}]"
    if module in NO_API:
        return
    assert isinstance(params, dict), f"{where}: arguments must be a mapping"
    if module == "operator_sdk.util.k8s_event":
        # Reads the Event by name, then creates or patches it; reads the
        # involved object for its uid.
        for verb in ("get", "create", "patch"):
            yield Need(("", "events", verb), where)
        involved = params.get("involvedObject") or {}
        kind = _resource(str(involved.get("apiVersion", "")), str(involved.get("kind", "")))
        yield Need((kind.group, kind.plural, "get"), where)
        return
    for api_version, kind_name in _kinds(params, where):
        kind = _resource(api_version, kind_name)

        def need(verb: str, resource: str = kind.plural, group: str = kind.group) -> Need:
            return Need((group, resource, verb), where)

        if module == "kubernetes.core.k8s":
            for state in _states(params):
                yield need("get")
                if state == "present":
                    yield need("create")
                    if not create_only:
                        yield need("patch")
                    if params.get("force"):
                        yield need("update")
                if state == "patched":
                    yield need("patch")
                if state == "absent":
                    yield need("delete")
                # The operator watches the kinds a run writes (dependent watches).
                if state in {"present", "patched"} and any(_watched(kind, w) for w in watches):
                    yield from (need("list"), need("watch"))
        elif module == "kubernetes.core.k8s_info":
            yield need("get" if params.get("name") else "list")
        elif module == "kubernetes.core.k8s_scale":
            yield need("get")
            yield need("patch", kind.plural if kind_name == "Job" else f"{kind.plural}/scale")
        elif module == "operator_sdk.util.k8s_status":
            yield need("get")
            yield need("update" if params.get("replace") else "patch", f"{kind.plural}/status")
        else:
            raise AssertionError(f"{where}: teach {__file__} the API calls of {module}")


def _walk(tasks: Any, where: str, watches: list[dict[str, Any]]) -> Iterator[Need]:
    for task in tasks or []:
        for nested in ("block", "rescue", "always"):
            if nested in task:
                yield from _walk(task[nested], where, watches)
        yield from _task_needs(task, where, watches)


def _watches_running(content: str) -> list[dict[str, Any]]:
    """The watches.yaml entries whose runs use a role (by name) or a playbook (by path)."""
    found = []
    for watch in yaml.safe_load((REPO / "watches.yaml").read_text()):
        finalizer = watch.get("finalizer") or {}
        used = {watch.get("role"), watch.get("playbook"), finalizer.get("role")}
        used.add(finalizer.get("playbook"))
        if content in used:
            found.append(watch)
    return found


def content_needs() -> list[Need]:
    """What every task in roles/ and playbooks/ needs from the API server."""
    needs: list[Need] = []
    for role in sorted(p for p in (REPO / "roles").iterdir() if p.is_dir()):
        watches = _watches_running(role.name)
        for path in sorted(role.glob("tasks/*.yml")) + sorted(role.glob("handlers/*.yml")):
            where = str(path.relative_to(REPO))
            needs += _walk(yaml.safe_load(path.read_text()), where, watches)
    for path in sorted((REPO / "playbooks").glob("*.yml")):
        where = str(path.relative_to(REPO))
        watches = _watches_running(where)
        for play in yaml.safe_load(path.read_text()) or []:
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                needs += _walk(play.get(section), where, watches)
    return needs


def operator_needs() -> list[Need]:
    """The operator's own requests (controller, kopf, Event recorder)."""
    needs = []
    for watch in yaml.safe_load((REPO / "watches.yaml").read_text()):
        group, plural = watch["group"], support.plurals()[watch["kind"]]
        for verb in ("get", "list", "watch", "patch"):
            needs.append(Need((group, plural, verb), "operator: watch, read, finalizer"))
        for verb in ("update", "patch"):
            needs.append(Need((group, f"{plural}/status", verb), "operator: status"))
        needs.append(Need((group, f"{plural}/finalizers", "update"), "ownerRef admission"))
    for verb in ("list", "watch"):
        needs.append(Need(("apiextensions.k8s.io", "customresourcedefinitions", verb), "kopf"))
    for verb in ("list", "watch"):
        needs.append(Need(("", "namespaces", verb), "kopf, with WATCH_NAMESPACE"))
    for verb in ("create", "patch"):
        needs.append(Need(("", "events", verb), "operator: Events"))
    return needs


def granted(role: dict[str, Any]) -> set[Triple]:
    triples = set()
    for rule in role["rules"]:
        assert "resourceNames" not in rule
        assert "nonResourceURLs" not in rule
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    triples.add((group, resource, verb))
    return triples


def _role(path: Path) -> dict[str, Any]:
    (role,) = support.load_all_strict(path.read_text())
    return role


def test_manager_role_allows_everything_the_operator_and_content_need() -> None:
    allowed = granted(_role(REPO / "config" / "rbac" / "role.yaml"))
    missing = [n for n in operator_needs() + content_needs() if n.triple not in allowed]
    assert not missing, "\n".join(f"{n.triple} needed by {n.where}" for n in missing)


def test_manager_role_allows_nothing_more() -> None:
    allowed = granted(_role(REPO / "config" / "rbac" / "role.yaml"))
    needed = {n.triple for n in operator_needs() + content_needs()}
    assert not allowed - needed, f"granted but needed by nothing: {sorted(allowed - needed)}"


def test_content_needs_are_derived() -> None:
    # Guards the parser itself: a few needs the example content certainly has.
    needs = {n.triple for n in content_needs()}
    assert ("apps", "deployments", "create") in needs  # memcached
    assert ("", "pods", "delete") in needs  # webserver scale-down
    assert ("apps", "statefulsets/scale", "patch") in needs  # sampledb upgrade
    assert ("batch", "cronjobs", "delete") in needs  # sampledb without a schedule
    assert ("", "secrets", "create") in needs
    assert ("", "secrets", "patch") not in needs  # credentials are never changed
    # A SampleDB's cluster-scoped PersistentVolume is patched but not watched.
    assert ("", "persistentvolumes", "patch") in needs
    assert ("", "persistentvolumes", "watch") not in needs


def test_leader_election_role_is_leases_only() -> None:
    role = _role(REPO / "config" / "rbac" / "leader_election_role.yaml")
    assert role["kind"] == "Role"
    assert granted(role) == {
        ("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")
    }
