"""pytest fixtures that give tests a real Kubernetes API server.

Loaded from `tests/conftest.py`. By default the session uses the local testbed:
it reuses one that `make testbed-up` started (and leaves it running), or
starts one and stops it when the session ends. Set `TESTBED_KUBECONFIG` to a
kubeconfig to run the same tests against another cluster (kind, a real one);
the testbed is then not touched. Tests isolate themselves with the
`namespace` fixture: a fresh namespace per test, deleted afterwards.

Tests that need containers to really run use `real_node` (the testbed's real
node, or a skip that gives the testbed's one-line reason; with
`TESTBED_REQUIRE_REAL_NODE=1`, as CI sets it, a failure instead) and
`real_namespace`: a fresh namespace whose every pod goes to the real node
(the PodNodeSelector / PodTolerationRestriction annotations), so the
operator's roles need no change to run there.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.control_plane import ControlPlane
from testbed.layout import Layout
from testbed.node_config import REAL_NODE_NAMESPACE_ANNOTATIONS


@pytest.fixture(scope="session")
def kubeconfig_path() -> Iterator[Path]:
    external = os.environ.get("TESTBED_KUBECONFIG")
    if external:
        yield Path(external)
        return
    plane = ControlPlane()
    report = plane.up()
    try:
        yield report.kubeconfig
    finally:
        if not report.already_running and not os.environ.get("TESTBED_KEEP"):
            plane.down()


@pytest.fixture(scope="session")
def api_client(kubeconfig_path: Path) -> object:
    from kubernetes import client, config  # noqa: PLC0415 - only tests that need a cluster pay for it

    api: object = config.new_client_from_config(config_file=str(kubeconfig_path))  # type: ignore[no-untyped-call]
    assert isinstance(api, client.ApiClient)
    return api


def _namespace_name(node_name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", node_name.lower()).strip("-")[:40].strip("-")
    return f"t-{slug}-{uuid.uuid4().hex[:6]}"


def _create_namespace(
    api_client: object, request: pytest.FixtureRequest, annotations: dict[str, str] | None = None
) -> Iterator[str]:
    from kubernetes import client  # noqa: PLC0415

    core = client.CoreV1Api(api_client)
    name = _namespace_name(request.node.name)
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, annotations=annotations))
    )
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name, propagation_policy="Background")
        except client.ApiException as err:
            if err.status != 404:
                raise


@pytest.fixture
def namespace(api_client: object, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _create_namespace(api_client, request)


@pytest.fixture(scope="session")
def real_node(kubeconfig_path: Path) -> dict[str, object]:
    """The testbed's real node: its state.json record (name, node_ip, host_ip, ...)."""
    record: dict[str, object] = {}
    if os.environ.get("TESTBED_KUBECONFIG"):
        why = "TESTBED_KUBECONFIG names a cluster of your own, which has no testbed real node"
    else:
        record = ControlPlane(Layout.default()).status().get("real_node") or {}
        why = f"this machine cannot run the testbed's real node: {record.get('off', 'unknown')}"
    if "node_ip" not in record:
        # A skip, not a failure, on a machine without root or containerd (the fake
        # nodes still run everything else); CI sets TESTBED_REQUIRE_REAL_NODE=1.
        reason = f"{why} (docs/testbed.md, 'The real node'; TESTBED_REQUIRE_REAL_NODE=1 fails)"
        if os.environ.get("TESTBED_REQUIRE_REAL_NODE") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return dict(record)


@pytest.fixture
def real_namespace(
    api_client: object, real_node: dict[str, object], request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace whose pods all run on the real node."""
    yield from _create_namespace(api_client, request, REAL_NODE_NAMESPACE_ANNOTATIONS)
