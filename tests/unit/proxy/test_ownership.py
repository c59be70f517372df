"""The proxy's ownership rules (spec §4.3) and URL parsing, as pure functions."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from ansible_operator.proxy.credentials import Owner
from ansible_operator.proxy.ownership import (
    OWNER_ANNOTATION,
    OWNER_TYPE_ANNOTATION,
    Mode,
    RequestInfo,
    WriteKind,
    decide,
    dependent_namespace,
    followup_patch,
    has_ownership,
    owner_type,
    parse_request,
    with_ownership,
    write_kind,
)

OWNER = Owner(
    api_version="cache.example.com/v1alpha1",
    kind="Memcached",
    name="mc",
    namespace="ns1",
    uid="uid-1",
    controller="memcached-v1alpha1-controller",
)
CLUSTER_OWNER = Owner(
    api_version="cache.example.com/v1alpha1",
    kind="Cluster",
    name="c1",
    namespace="",
    uid="uid-c",
    controller="cluster-v1alpha1-controller",
)
REF = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "name": "mc",
    "uid": "uid-1",
}
ANNOTATIONS = {OWNER_ANNOTATION: "ns1/mc", OWNER_TYPE_ANNOTATION: "Memcached.cache.example.com"}


# -- URL parsing ------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "target", "expected"),
    [
        (
            "GET",
            "/api/v1/namespaces/ns1/configmaps/cm",
            RequestInfo(True, "get", "", "v1", "ns1", "configmaps", "cm"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns1/configmaps",
            RequestInfo(True, "list", "", "v1", "ns1", "configmaps"),
        ),
        (
            "GET",
            "/api/v1/configmaps?watch=true&resourceVersion=5",
            RequestInfo(True, "watch", "", "v1", "", "configmaps"),
        ),
        (
            "GET",
            "/api/v1/watch/namespaces/ns1/pods",
            RequestInfo(True, "watch", "", "v1", "ns1", "pods"),
        ),
        (
            "POST",
            "/apis/apps/v1/namespaces/ns1/deployments",
            RequestInfo(True, "create", "apps", "v1", "ns1", "deployments"),
        ),
        (
            "PUT",
            "/apis/apps/v1/namespaces/ns1/deployments/d/scale",
            RequestInfo(True, "update", "apps", "v1", "ns1", "deployments", "d", "scale"),
        ),
        (
            "PATCH",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
            RequestInfo(True, "patch", "rbac.authorization.k8s.io", "v1", "", "clusterroles", "r"),
        ),
        ("POST", "/api/v1/namespaces", RequestInfo(True, "create", "", "v1", "", "namespaces")),
        (
            "GET",
            "/api/v1/namespaces/ns1",
            RequestInfo(True, "get", "", "v1", "", "namespaces", "ns1"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns1/finalize",
            RequestInfo(True, "update", "", "v1", "", "namespaces", "ns1", "finalize"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns1/status",
            RequestInfo(True, "update", "", "v1", "", "namespaces", "ns1", "status"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns1/pods/p/log?follow=true",
            RequestInfo(True, "get", "", "v1", "ns1", "pods", "p", "log"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns1/pods/p/proxy/metrics/x",
            RequestInfo(True, "get", "", "v1", "ns1", "pods", "p", "proxy/metrics/x"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns1/configmaps",
            RequestInfo(True, "deletecollection", "", "v1", "ns1", "configmaps"),
        ),
        (
            "POST",
            "/api/v1/namespaces/ns1/configmaps?dryRun=All",
            RequestInfo(True, "create", "", "v1", "ns1", "configmaps", dry_run=True),
        ),
        (
            "GET",
            "/api/v1/namespaces/my%20ns/configmaps/a%2Fb",
            RequestInfo(True, "get", "", "v1", "my ns", "configmaps", "a/b"),
        ),
    ],
)
def test_parse_resource_requests(method: str, target: str, expected: RequestInfo) -> None:
    assert parse_request(method, target) == expected


@pytest.mark.parametrize(
    "target", ["/version", "/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/openapi/v2"]
)
def test_parse_non_resource_requests(target: str) -> None:
    info = parse_request("GET", target)
    assert not info.is_resource
    assert info.resource == ""


# -- the decision table ------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "namespaced", "namespace", "mode"),
    [
        (CLUSTER_OWNER, True, "ns1", Mode.OWNER_REFERENCE),
        (CLUSTER_OWNER, False, "", Mode.OWNER_REFERENCE),
        (OWNER, False, "", Mode.ANNOTATIONS),
        (OWNER, True, "ns1", Mode.OWNER_REFERENCE),
        (OWNER, True, "ns2", Mode.ANNOTATIONS),
        (OWNER, True, "", Mode.ANNOTATIONS),
    ],
)
def test_decision_table(owner: Owner, namespaced: bool, namespace: str, mode: Mode) -> None:
    assert decide(owner, dependent_namespaced=namespaced, dependent_namespace=namespace) is mode


def test_dependent_namespace_prefers_the_url() -> None:
    body = {"metadata": {"namespace": "from-body"}}
    in_url = parse_request("POST", "/api/v1/namespaces/from-url/configmaps")
    no_ns = parse_request("POST", "/api/v1/configmaps")
    assert dependent_namespace(in_url, body, namespaced=True) == "from-url"
    assert dependent_namespace(no_ns, body, namespaced=True) == "from-body"
    assert dependent_namespace(no_ns, {}, namespaced=True) == ""
    # A cluster-scoped kind has no namespace whatever the body says.
    assert dependent_namespace(no_ns, body, namespaced=False) == ""


def test_owner_type_of_core_and_named_groups() -> None:
    assert owner_type(OWNER) == "Memcached.cache.example.com"
    core = Owner(
        api_version="v1",
        kind="Pod",
        name="p",
        namespace="n",
        uid="u",
        controller="pod-v1-controller",
    )
    assert owner_type(core) == "Pod"


# -- injection into bodies (POST, PUT, server-side apply) --------------------


def test_owner_reference_injected_exactly_as_the_reference_writes_it() -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    result = with_ownership(body, OWNER, Mode.OWNER_REFERENCE)
    assert result["metadata"]["ownerReferences"] == [REF]
    assert "ownerReferences" not in body["metadata"]  # the input is not modified


def test_existing_owner_references_are_kept_and_ours_is_not_duplicated() -> None:
    other = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "uid-rs"}
    body = {"metadata": {"name": "cm", "ownerReferences": [other]}}
    once = with_ownership(body, OWNER, Mode.OWNER_REFERENCE)
    twice = with_ownership(once, OWNER, Mode.OWNER_REFERENCE)
    assert once["metadata"]["ownerReferences"] == [other, REF]
    assert twice == once


def test_owner_reference_matched_by_uid_only() -> None:
    # A ref with our uid but other fields counts as present (no second entry
    # with the same uid, which the API server would reject).
    body = {"metadata": {"ownerReferences": [{**REF, "controller": True}]}}
    assert has_ownership(body, OWNER, Mode.OWNER_REFERENCE)
    assert with_ownership(body, OWNER, Mode.OWNER_REFERENCE) == body


def test_annotations_injected_and_existing_ones_kept() -> None:
    body = {"kind": "Namespace", "metadata": {"name": "x", "annotations": {"keep": "me"}}}
    result = with_ownership(body, OWNER, Mode.ANNOTATIONS)
    assert result["metadata"]["annotations"] == {"keep": "me", **ANNOTATIONS}
    assert "ownerReferences" not in result["metadata"]


def test_annotations_of_a_cluster_scoped_owner_have_an_empty_namespace() -> None:
    result = with_ownership({"metadata": {}}, CLUSTER_OWNER, Mode.ANNOTATIONS)
    assert result["metadata"]["annotations"][OWNER_ANNOTATION] == "/c1"


def test_body_without_metadata_gets_metadata() -> None:
    result = with_ownership({"kind": "ConfigMap"}, OWNER, Mode.OWNER_REFERENCE)
    assert result["metadata"] == {"ownerReferences": [REF]}


# -- follow-up patch after merge / strategic / JSON patches -------------------


@pytest.mark.parametrize(
    ("stored", "mode"),
    [
        ({"metadata": {"name": "cm", "resourceVersion": "7"}}, Mode.OWNER_REFERENCE),
        (
            {
                "metadata": {
                    "name": "cm",
                    "resourceVersion": "7",
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "ux"}
                    ],
                }
            },
            Mode.OWNER_REFERENCE,
        ),
        ({"metadata": {"name": "cm", "resourceVersion": "7"}}, Mode.ANNOTATIONS),
        (
            {
                "metadata": {
                    "name": "cm",
                    "resourceVersion": "7",
                    "annotations": {"a/b": "c", OWNER_ANNOTATION: "other/owner"},
                }
            },
            Mode.ANNOTATIONS,
        ),
    ],
)
def test_followup_patch_adds_ownership_when_applied(stored: dict[str, Any], mode: Mode) -> None:
    ops = followup_patch(stored, OWNER, mode)
    assert ops is not None
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    patched = jsonpatch.apply_patch(stored, ops)
    assert has_ownership(patched, OWNER, mode)
    assert patched == with_ownership(stored, OWNER, mode)
    assert followup_patch(patched, OWNER, mode) is None  # nothing more to add


def test_followup_patch_refuses_a_newer_version() -> None:
    ops = followup_patch({"metadata": {"resourceVersion": "7"}}, OWNER, Mode.OWNER_REFERENCE)
    assert ops is not None
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch({"metadata": {"resourceVersion": "8"}}, ops)


# -- which writes take which path -------------------------------------------


@pytest.mark.parametrize(
    ("method", "target", "content_type", "kind"),
    [
        ("POST", "/api/v1/namespaces/n/configmaps", "application/json", WriteKind.CREATE),
        ("PUT", "/api/v1/namespaces/n/configmaps/c", "application/json", WriteKind.UPSERT),
        (
            "PATCH",
            "/api/v1/namespaces/n/configmaps/c",
            "application/apply-patch+yaml",
            WriteKind.UPSERT,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/n/configmaps/c",
            "application/strategic-merge-patch+json",
            WriteKind.PATCH,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/n/configmaps/c",
            "application/merge-patch+json",
            WriteKind.PATCH,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/n/configmaps/c",
            "application/json-patch+json",
            WriteKind.PATCH,
        ),
        # Subresources are never touched.
        (
            "PUT",
            "/apis/apps/v1/namespaces/n/deployments/d/status",
            "application/json",
            WriteKind.NONE,
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/n/deployments/d/scale",
            "application/merge-patch+json",
            WriteKind.NONE,
        ),
        ("POST", "/api/v1/namespaces/n/pods/p/exec", "", WriteKind.NONE),
        ("POST", "/api/v1/namespaces/n/pods/p/eviction", "application/json", WriteKind.NONE),
        (
            "POST",
            "/api/v1/namespaces/n/serviceaccounts/sa/token",
            "application/json",
            WriteKind.NONE,
        ),
        # Reads, deletes and non-resource requests neither.
        ("GET", "/api/v1/namespaces/n/configmaps", "", WriteKind.NONE),
        ("DELETE", "/api/v1/namespaces/n/configmaps/c", "application/json", WriteKind.NONE),
        ("POST", "/version", "application/json", WriteKind.NONE),
        # A PUT to a collection or a POST to a named object is not a write we own.
        ("PUT", "/api/v1/namespaces/n/configmaps", "application/json", WriteKind.NONE),
    ],
)
def test_write_kind(method: str, target: str, content_type: str, kind: WriteKind) -> None:
    assert write_kind(method, parse_request(method, target), content_type) is kind


def test_with_ownership_leaves_its_input_alone_at_any_depth() -> None:
    spec: Any = "leaf"
    for _ in range(3000):  # deeper than a recursive copy can go
        spec = {"a": spec}
    body = {"metadata": {"name": "cm", "ownerReferences": []}, "spec": spec}
    owned = with_ownership(body, OWNER, Mode.OWNER_REFERENCE)
    assert has_ownership(owned, OWNER, Mode.OWNER_REFERENCE)
    assert body["metadata"] == {"name": "cm", "ownerReferences": []}
    assert owned["spec"] is spec
