"""Memcached and WebServer on the real node, through the real operator.

Memcached: a value set through the Service is read back, and scaling `size`
changes how many pods really serve. WebServer: every replica answers HTTP,
and `status.count` is the number of pods that do. A client pod (Python from
the testbed's awscli image) talks to them over the pod network, as any other
client in the cluster would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.harness import OperatorProcess
from tests.examples.test_examples import GROUP, VERSION, patch_cr, reconciled
from tests.realnode.support import run_pod

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.realnode]

PYTHON = "testbed.local/awscli:2.9"
# argv: service host, then pod IPs. Sets and gets a key over one connection
# to the Service, then asks every pod for its version.
MEMCACHED_CLIENT = """
import json, socket, sys
def talk(host, *lines):
    with socket.create_connection((host, 11211), timeout=5) as s:
        out = b""
        for line in lines:
            s.sendall(line)
            out += s.recv(4096)
        return out.decode()
service = talk(sys.argv[1], b"set greeting 0 0 5\\r\\nhello\\r\\n", b"get greeting\\r\\n")
versions = {ip: talk(ip, b"version\\r\\n").strip() for ip in sys.argv[2:]}
print(json.dumps({"service": service, "versions": versions}))
"""
HTTP_CLIENT = """
import json, sys, urllib.request
status = {ip: urllib.request.urlopen("http://%s/" % ip, timeout=5).status for ip in sys.argv[1:]}
print(json.dumps(status))
"""
_runs = iter(range(1000))


def _client(api: Any, ns: str, script: str, *args: str) -> Any:
    out = run_pod(api, ns, f"client-{next(_runs)}", PYTHON, ["python3", "-c", script, *args])
    return json.loads(out.strip().splitlines()[-1])


def _ready_pod_ips(api: Any, ns: str, selector: str) -> list[str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=selector).items
    return sorted(
        p.status.pod_ip
        for p in pods
        if not p.metadata.deletion_timestamp
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    )


def _create(api: Any, ns: str, kind: str, plural: str, name: str, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, ns, plural, body)


def test_memcached_serves_through_its_service_and_scales(
    api_client: Any, kubeconfig_path: Path, rn_namespace: str, rn_operator: OperatorProcess
) -> None:
    ns, name = rn_namespace, "cache"
    selector = f"app.kubernetes.io/name=memcached,app.kubernetes.io/instance={name}"
    _create(api_client, ns, "Memcached", "memcacheds", name, {"size": 3})
    reconciled(
        api_client, ns, "Memcached", name, until=lambda o: o["status"].get("readyReplicas") == 3
    )
    ips = _ready_pod_ips(api_client, ns, selector)
    assert len(ips) == 3
    seen = _client(api_client, ns, MEMCACHED_CLIENT, f"{name}-memcached", *ips)
    assert seen["service"] == "STORED\r\nVALUE greeting 0 5\r\nhello\r\nEND\r\n"
    assert sorted(seen["versions"]) == ips
    assert all(v.startswith("VERSION 1.6.") for v in seen["versions"].values())

    patch_cr(api_client, ns, "Memcached", name, {"size": 1})
    obj = reconciled(
        api_client, ns, "Memcached", name, until=lambda o: len(o["status"].get("nodes", [])) == 1
    )
    ips = _ready_pod_ips(api_client, ns, selector)
    assert len(ips) == 1
    assert obj["status"]["readyReplicas"] == 1
    seen = _client(api_client, ns, MEMCACHED_CLIENT, f"{name}-memcached", *ips)
    assert list(seen["versions"]) == ips


def test_webserver_replicas_answer_http_and_status_counts_them(
    api_client: Any, kubeconfig_path: Path, rn_namespace: str, rn_operator: OperatorProcess
) -> None:
    ns, name = rn_namespace, "site"
    _create(api_client, ns, "WebServer", "webservers", name, {"replicas": 2})
    obj = reconciled(
        api_client, ns, "WebServer", name, until=lambda o: o["status"].get("count") == 2
    )
    pods = (
        client.CoreV1Api(api_client)
        .list_namespaced_pod(ns, label_selector=f"examples.ansible-operator.dev/webserver={name}")
        .items
    )
    assert {p.spec.containers[0].image for p in pods} == {"testbed.local/nginx:1.22"}
    ips = sorted(p.status.pod_ip for p in pods)
    answered = _client(api_client, ns, HTTP_CLIENT, *ips)
    assert answered == dict.fromkeys(ips, 200)
    assert obj["status"]["count"] == len(answered)
    assert sorted(obj["status"]["pods"]) == sorted(p.metadata.name for p in pods)
