"""Helpers for tests whose pods really run: on the testbed's real node.

Used by tests/testbed/test_real_node.py and tests/realnode/. Pods are read
with the Kubernetes client; `kubectl` (the one the testbed built) execs into
pods and reads their logs, as a user would. Waits poll a condition, never
sleep for a fixed time.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from testbed.images import related_images
from testbed.layout import Layout
from testbed.probes import wait_until

KUBECTL = Layout.default().binary("kubectl")
# The operator's environment on the testbed: RELATED_IMAGE_* naming the real
# node's local images (docs/examples/README.md, "Images").
RELATED_IMAGES = related_images()


def kubectl(kubeconfig: Path, *args: str, timeout: float = 120, check: bool = True) -> str:
    done = subprocess.run(
        [str(KUBECTL), f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}{done.stdout}")
    return done.stdout + (done.stderr if not check else "")


def pod_phase(api: Any, namespace: str, name: str) -> str:
    try:
        pod = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    except client.ApiException as err:
        if err.status == 404:
            return ""
        raise
    return str(pod.status.phase or "")


def wait(what: str, check: Callable[[], bool], timeout: float = 180) -> None:
    wait_until(what, check, timeout=timeout)


def run_pod(
    api: Any,
    namespace: str,
    name: str,
    image: str,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    claims: dict[str, str] | None = None,
    timeout: float = 180,
) -> str:
    """Run a one-shot pod to completion; return its log. Fails with the log if it fails.

    `name` is a prefix: the proofs share one namespace, and two of them may run
    a client pod for the same purpose (e.g. "write").
    """
    core = client.CoreV1Api(api)
    created = core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(generate_name=f"{name}-"),
            spec=client.V1PodSpec(
                restart_policy="Never",
                containers=[
                    client.V1Container(
                        name="main",
                        image=image,
                        command=command,
                        env=[client.V1EnvVar(name=k, value=v) for k, v in (env or {}).items()],
                        volume_mounts=[
                            client.V1VolumeMount(name=f"v{i}", mount_path=path)
                            for i, path in enumerate(claims or {})
                        ],
                    )
                ],
                # `claims`: mount path -> PersistentVolumeClaim name
                volumes=[
                    client.V1Volume(
                        name=f"v{i}",
                        persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
                            claim_name=claim
                        ),
                    )
                    for i, claim in enumerate((claims or {}).values())
                ],
            ),
        ),
    )
    name = created.metadata.name
    wait(
        f"pod {name} finished",
        lambda: pod_phase(api, namespace, name) in {"Succeeded", "Failed"},
        timeout,
    )
    log = str(core.read_namespaced_pod_log(name, namespace))
    assert pod_phase(api, namespace, name) == "Succeeded", f"pod {name} failed:\n{log}"
    return log


def psql(kubeconfig: Path, namespace: str, pod: str, sql: str, database: str = "postgres") -> str:
    """Run SQL in a PostgreSQL pod through `kubectl exec`; return psql's unaligned output."""
    return kubectl(
        kubeconfig,
        "-n",
        namespace,
        "exec",
        pod,
        "--",
        "psql",
        "--username=postgres",
        f"--dbname={database}",
        "--no-align",
        "--tuples-only",
        "--set=ON_ERROR_STOP=1",
        f"--command={sql}",
    ).strip()
