"""Helpers for the deployment tests: kubectl and kustomize, the samples, identities.

Used by tests/deploy/test_*.py and tests/deploy/measure_resources.py. Nothing
here starts or stops a cluster: every function works on the cluster behind the
kubeconfig or ApiClient it is given.
"""

from __future__ import annotations

import base64
import functools
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from testbed.layout import Layout
from tests.e2e import harness

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION = "examples.ansible-operator.dev", "v1alpha1"


# --- YAML ------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate mapping keys (PyYAML keeps the last one)."""


def _no_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def load_all_strict(text: str) -> list[dict[str, Any]]:
    """Every document of a YAML stream; duplicate keys are an error."""
    return [doc for doc in yaml.load_all(text, Loader=_UniqueKeyLoader) if doc]


# --- kubectl and kustomize --------------------------------------------------------


def kubectl_binary() -> str | None:
    """The testbed's kubectl (it has `kustomize`), else one on PATH."""
    built = Layout.default().binary("kubectl")
    if built.exists():
        return str(built)
    return shutil.which("kubectl")


def kubectl(
    kubeconfig: Path | None, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    binary = kubectl_binary()
    assert binary, "kubectl not found (build the testbed or put kubectl on PATH)"
    argv = [binary, *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []), *args]
    result = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=180, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv[1:])} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


def build(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR` as a list of objects."""
    return load_all_strict(kubectl(None, "kustomize", str(directory)).stdout)


def write_overlay(directory: Path, *, base: Path, namespace: str, prefix: str) -> Path:
    """A kustomization in `directory` that puts `base` into `namespace` with an extra prefix."""
    directory.mkdir(parents=True, exist_ok=True)
    relative = os.path.relpath(base, directory)
    (directory / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {"namespace": namespace, "namePrefix": prefix, "resources": [relative]},
            sort_keys=False,
        )
    )
    return directory


def to_yaml(objects: Iterable[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(list(objects), sort_keys=False)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# --- the example kinds and samples --------------------------------------------


@functools.cache
def _crd_documents() -> tuple[dict[str, Any], ...]:
    return tuple(build(REPO / "crds"))


def crd_documents() -> list[dict[str, Any]]:
    """The CRDs of crds/ (read once per process)."""
    return [dict(doc) for doc in _crd_documents()]


@functools.cache
def plurals() -> dict[str, str]:
    """Kind -> plural of every CRD in crds/."""
    return {doc["spec"]["names"]["kind"]: doc["spec"]["names"]["plural"] for doc in crd_documents()}


def ensure_crds(api: Any) -> None:
    """Create the example CRDs that are missing and wait until all are established.

    Existing CRDs are left alone: the cluster may be shared, and other tests
    and developers apply the same files.
    """
    harness.apply_crds(api, crd_documents(), what="example", replace=False)


def samples() -> list[dict[str, Any]]:
    """The sample CRs of config/samples, in kustomization order."""
    return build(REPO / "config" / "samples")


def sample_claims(objects: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """(claim name, size) of every PersistentVolumeClaim the SampleDB samples create.

    The testbed has no storage provisioner, so a test pre-binds a volume to
    each (`create_volumes`). The names are roles/sampledb's: NAME-data and
    NAME-backups.
    """
    claims = []
    for obj in objects:
        if obj["kind"] == "SampleDB":
            name = obj["metadata"]["name"]
            claims += [(f"{name}-data", "10Gi"), (f"{name}-backups", "10Gi")]
    return claims


def create_volumes(api: Any, namespace: str, claims: Iterable[tuple[str, str]]) -> list[str]:
    """One PersistentVolume pre-bound to each claim; returns their names (cluster-scoped)."""
    core: Any = client.CoreV1Api(api)
    names = []
    for claim, size in claims:
        name = f"{namespace}-{claim}"[:63].rstrip("-")
        core.create_persistent_volume(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name, "labels": {"ansible-operator.dev/test": namespace}},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Delete",
                    "storageClassName": "",
                    "hostPath": {"path": f"/tmp/{name}"},  # never mounted: kwok runs no pods
                    "claimRef": {"namespace": namespace, "name": claim},
                },
            }
        )
        names.append(name)
    return names


def delete_volumes(api: Any, names: Iterable[str]) -> None:
    core = client.CoreV1Api(api)
    for name in names:
        try:
            core.delete_persistent_volume(name)
        except client.ApiException as err:
            if err.status != 404:
                raise


def get_cr(api: Any, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    return harness.get_cr(api, namespace, plurals()[kind], name, group=GROUP, version=VERSION)


condition = harness.condition


def successful(api: Any, namespace: str, objects: Iterable[dict[str, Any]]) -> dict[str, str]:
    """name -> 'True' / reason-and-message of each object's Successful condition so far."""
    found = {}
    table = plurals()
    custom: Any = client.CustomObjectsApi(api)
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        try:
            current = custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, table[kind], name
            )
        except client.ApiException as err:
            if err.status != 404:
                raise
            current = None
        cond = condition(current, "Successful")
        failure = condition(current, "Failure")
        if cond and cond.get("status") == "True":
            found[f"{kind}/{name}"] = "True"
        else:
            detail = failure.get("message") if failure else None
            found[f"{kind}/{name}"] = f"not yet ({detail or 'no Successful condition'})"
    return found


def wait_successful(
    api: Any, namespace: str, objects: list[dict[str, Any]], timeout: float
) -> float:
    """Wait until every object has Successful=True; return the seconds it took."""
    start = time.monotonic()
    state: dict[str, str] = {}
    while time.monotonic() - start < timeout:
        state = successful(api, namespace, objects)
        if all(value == "True" for value in state.values()):
            return time.monotonic() - start
        time.sleep(1)
    raise AssertionError(f"not all Successful after {timeout:.0f}s: {state}")


def wait_for(what: str, check: Any, timeout: float) -> None:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not after {timeout:.0f}s")
        time.sleep(0.5)


# --- identities -------------------------------------------------------------------


def service_account_kubeconfig(
    api: Any, *, namespace: str, service_account: str, path: Path, seconds: int = 3600
) -> Path:
    """A kubeconfig for `service_account`, with a token minted by the TokenRequest API.

    The server and its CA come from the admin client; nothing else of the
    admin's credentials is copied.
    """
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
    )
    core: Any = client.CoreV1Api(api)
    token = core.create_namespaced_service_account_token(service_account, namespace, request)
    token = token.status.token
    configuration = api.configuration
    cluster: dict[str, Any] = {"server": configuration.host}
    if configuration.ssl_ca_cert:
        ca = Path(configuration.ssl_ca_cert).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    elif not configuration.verify_ssl:
        cluster["insecure-skip-tls-verify"] = True
    user = f"system:serviceaccount:{namespace}:{service_account}"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "cluster", "cluster": cluster}],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "sa",
                        "context": {"cluster": "cluster", "user": user, "namespace": namespace},
                    }
                ],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return path


def log_lines_matching(path: Path, *needles: str) -> Iterator[str]:
    """Lines of a log file that contain any of `needles` (case-insensitive)."""
    lowered = [n.lower() for n in needles]
    for line in path.read_text(errors="replace").splitlines():
        if any(n in line.lower() for n in lowered):
            yield line
