"""Status writes retry 409 Conflicts on the freshest object and keep others' keys."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.controller import statuswrite
from ansible_operator.errors import Conflict, NotFound, RetryLater
from ansible_operator.kube.client import ResourceInfo

RES = ResourceInfo(group="g", version="v1", kind="K", plural="ks", namespaced=True, has_status=True)


class FakeKube:
    """Stores one object; rejects writes whose resourceVersion is stale."""

    def __init__(self, stored: dict[str, Any] | None, *, conflicts: int = 0) -> None:
        self.stored = stored
        self.conflicts = conflicts
        self.puts: list[dict[str, Any]] = []

    def replace_status(self, res: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
        self.puts.append(obj)
        if self.stored is None:
            raise NotFound(404, "gone")
        if (
            self.conflicts
            or obj["metadata"]["resourceVersion"] != self.stored["metadata"]["resourceVersion"]
        ):
            self.conflicts = max(0, self.conflicts - 1)
            raise Conflict(409, "the object has been modified")
        version = int(self.stored["metadata"]["resourceVersion"]) + 1
        self.stored = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(version)}}
        return self.stored

    def get_or_none(self, res: ResourceInfo, *, namespace: str, name: str) -> dict[str, Any] | None:
        return self.stored


def obj(rv: str, status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "n", "namespace": "ns", "resourceVersion": rv}, "status": status}


def add_condition(status: Any) -> dict[str, Any]:
    return {**(status or {}), "conditions": [{"type": "Running"}]}


def test_first_attempt_succeeds_with_a_current_object() -> None:
    kube = FakeKube(obj("1", {}))
    written = statuswrite.write(kube, RES, obj("1", {}), add_condition)  # type: ignore[arg-type]
    assert written is not None
    assert written["status"] == {"conditions": [{"type": "Running"}]}
    assert len(kube.puts) == 1


def test_conflict_rereads_and_keeps_what_others_wrote_meanwhile() -> None:
    # The role's k8s_status wrote `custom` after we read version 1.
    kube = FakeKube(obj("2", {"custom": "kept"}))
    written = statuswrite.write(kube, RES, obj("1", {}), add_condition)  # type: ignore[arg-type]
    assert written is not None
    assert written["status"] == {"custom": "kept", "conditions": [{"type": "Running"}]}
    assert len(kube.puts) == 2


@pytest.mark.parametrize("stored", [None])
def test_object_gone_returns_none(stored: Any) -> None:
    assert statuswrite.write(FakeKube(stored), RES, obj("1", {}), add_condition) is None  # type: ignore[arg-type]


def test_endless_conflicts_become_retry_later() -> None:
    kube = FakeKube(obj("1", {}), conflicts=100)
    with pytest.raises(RetryLater):
        statuswrite.write(kube, RES, obj("1", {}), add_condition)  # type: ignore[arg-type]
    assert len(kube.puts) == statuswrite.ATTEMPTS
