"""The proxy's read-only mode as pure functions (proxy.readonly): no cluster."""

from __future__ import annotations

import pytest

from ansible_operator.proxy.ownership import parse_request
from ansible_operator.proxy.readonly import dry_run_target, refusal

CM = "/api/v1/namespaces/ns/configmaps"


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (CM, f"{CM}?dryRun=All"),
        (f"{CM}?fieldManager=ansible", f"{CM}?fieldManager=ansible&dryRun=All"),
        (
            f"{CM}/x?force=true&fieldManager=a%20b",
            f"{CM}/x?force=true&fieldManager=a%20b&dryRun=All",
        ),
        (f"{CM}?dryRun=None", f"{CM}?dryRun=All"),
        (f"{CM}?dryRun=All&dryRun=All", f"{CM}?dryRun=All"),
        (f"{CM}?dry%52un=x&a=1", f"{CM}?a=1&dryRun=All"),
        (f"{CM}?", f"{CM}?dryRun=All"),
        (f"{CM}?a=1&&b=2", f"{CM}?a=1&b=2&dryRun=All"),
    ],
)
def test_dry_run_is_added_once_and_other_parameters_are_kept(target: str, expected: str) -> None:
    assert dry_run_target(target) == expected
    assert parse_request("POST", dry_run_target(target)).dry_run


POD = "/api/v1/namespaces/ns/pods/p"


@pytest.mark.parametrize(
    ("method", "target", "upgrade", "refused_for"),
    [
        ("POST", f"{POD}/exec?command=ls", True, "exec"),
        ("GET", f"{POD}/exec?command=ls", False, "exec"),
        ("POST", f"{POD}/attach", True, "attach"),
        ("POST", f"{POD}/portforward", True, "portforward"),
        ("GET", f"{POD}/proxy/metrics", False, "proxy"),
        ("GET", "/api/v1/namespaces/ns/services/s:80/proxy/", False, "proxy"),
        ("GET", "/api/v1/nodes/n/proxy/stats", False, "proxy"),
        ("GET", f"{POD}/log", True, "connection upgrade"),
        ("POST", "/version", False, "only API resources"),
    ],
)
def test_requests_that_cannot_be_dry_run_are_refused(
    method: str, target: str, upgrade: bool, refused_for: str
) -> None:
    why = refusal(method, parse_request(method, target), upgrade=upgrade)
    assert why.startswith("read-only run (plan): ")
    assert refused_for in why
    assert "\n" not in why


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("GET", f"{POD}/log"),
        ("GET", "/api/v1/namespaces/ns/configmaps?watch=1"),
        ("POST", "/api/v1/namespaces/ns/configmaps"),
        ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale"),
        ("PUT", "/apis/x.example.com/v1/namespaces/ns/things/t/status"),
        ("DELETE", "/api/v1/namespaces/ns/configmaps"),
        ("POST", "/api/v1/namespaces/ns/pods/p/eviction"),
        ("GET", "/version"),
    ],
)
def test_other_requests_pass(method: str, target: str) -> None:
    assert refusal(method, parse_request(method, target), upgrade=False) == ""
