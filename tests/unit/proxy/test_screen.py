"""proxy.screen: a run's create of its own deleted CR is refused; numbers go as 2.18's text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_operator.compat.notices import RunNotes
from ansible_operator.kube.client import ResourceInfo
from ansible_operator.kube.fakekube import FakeEvents, FakeKube
from ansible_operator.proxy.credentials import Owner
from ansible_operator.proxy.ownership import RequestInfo, parse_request
from ansible_operator.proxy.screen import RECREATE_REFUSED, screen

RESTORES = ResourceInfo("example.com", "v1", "Restore", "restores", True, True)
CONFIGMAPS = ResourceInfo("", "v1", "ConfigMap", "configmaps", True, False)
OWNER = Owner(
    api_version="example.com/v1",
    kind="Restore",
    name="r1",
    namespace="ns",
    uid="uid-1",
    controller="restore-v1-controller",
)
OWN = "/apis/example.com/v1/namespaces/ns/restores"
APPLY = "application/apply-patch+yaml"
JSON_CT = "application/json"


def _resource(info: RequestInfo) -> ResourceInfo | None:
    return {"restores": RESTORES, "configmaps": CONFIGMAPS}.get(info.resource)


def _run(
    kube: FakeKube, method: str, path: str, body: dict[str, Any], *, ct: str = JSON_CT
) -> tuple[Any, FakeEvents, RunNotes]:
    events, notes = FakeEvents(), RunNotes()
    owner = Owner(
        api_version=OWNER.api_version,
        kind=OWNER.kind,
        name=OWNER.name,
        namespace=OWNER.namespace,
        uid=OWNER.uid,
        controller=OWNER.controller,
        notes=notes,
    )
    screened = screen(
        owner,
        method=method,
        info=parse_request(method, path),
        content_type=ct,
        body=json.dumps(body).encode(),
        resource=_resource,
        kube=kube,
        restores=True,
        events=events,
    )
    return screened, events, notes


def _cr(name: str = "r1") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Restore", "metadata": {"name": name}}


# (what is stored, method, path, content type, body) -> refused?
RECREATE = {
    "POST of the deleted own CR": (False, "POST", OWN, JSON_CT, _cr(), True),
    "server-side apply of the deleted own CR": (False, "PATCH", f"{OWN}/r1", APPLY, _cr(), True),
    "POST while it exists: the API server answers 409": (True, "POST", OWN, JSON_CT, _cr(), False),
    "a patch of the existing own CR": (
        True,
        "PATCH",
        f"{OWN}/r1",
        "application/merge-patch+json",
        _cr(),
        False,
    ),
    "another CR of the same kind": (False, "POST", OWN, JSON_CT, _cr("r2"), False),
    "the same name in another namespace": (
        False,
        "POST",
        "/apis/example.com/v1/namespaces/other/restores",
        JSON_CT,
        _cr(),
        False,
    ),
    "a status write": (False, "PUT", f"{OWN}/r1/status", JSON_CT, _cr(), False),
}


@pytest.mark.parametrize(
    ("exists", "method", "path", "ct", "body", "refused"), RECREATE.values(), ids=RECREATE
)
def test_a_run_never_recreates_its_own_deleted_cr(
    exists: bool, method: str, path: str, ct: str, body: dict[str, Any], refused: bool
) -> None:
    kube = FakeKube(RESTORES)
    if exists:
        kube.create(RESTORES, namespace="ns", body=_cr())
    screened, events, _ = _run(kube, method, path, body, ct=ct)
    assert bool(screened.refusal) is refused
    if refused:
        assert "refused to re-create Restore ns/r1" in screened.refusal
        assert "uid uid-1" in screened.refusal
        assert [(e.type, e.reason, e.ref.uid) for e in events.events] == [
            ("Warning", RECREATE_REFUSED, "uid-1")
        ]
    else:
        assert events.events == []


def test_numbers_in_string_fields_are_sent_as_text_and_noted() -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"gen": 4}},
        "data": {"count": 4, "ok": "x"},
    }
    screened, _, notes = _run(FakeKube(), "POST", "/api/v1/namespaces/ns/configmaps", body)
    sent = json.loads(screened.body)
    assert sent["data"] == {"count": "4", "ok": "x"}
    assert sent["metadata"]["labels"] == {"gen": "4"}
    found = notes.drain()
    assert len(found) == 2
    assert any(
        "ConfigMap c data/count: the number 4 was sent as the string '4'" in n for n in found
    )


def test_without_the_mode_the_body_is_forwarded_as_it_is() -> None:
    body = json.dumps({"metadata": {"name": "c"}, "data": {"count": 4}}).encode()
    screened = screen(
        OWNER,
        method="POST",
        info=parse_request("POST", "/api/v1/namespaces/ns/configmaps"),
        content_type=JSON_CT,
        body=body,
        resource=_resource,
        kube=FakeKube(),
        restores=False,
    )
    assert screened.body == body
    assert screened.refusal == ""
