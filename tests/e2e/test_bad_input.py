"""End to end: one bad custom resource must not stop the others (issue 10, part 2).

One real operator process (tests/e2e/bad_input_project, a kind whose spec takes
any shape) serves the whole table. The table's custom resources exist before
the operator starts, so kopf receives them in its initial list and then, as
the operator writes their status, in its watch stream: the two ways kopf
decodes objects. Each must end with the Successful condition, or with a
Failure condition and a Warning Event that say why; a normal custom resource
created after them must still succeed, and the operator must still be running.

Custom resources are written and read with the operator's own client
(kube.client.Kube): the kubernetes package cannot encode or decode objects
nested more than about 500 levels, which is the point of the test.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_operator.kube.client import Kube, ResourceInfo, load_login
from testbed.probes import NotReady
from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import (
    OperatorProcess,
    apply_crds,
    condition,
    configmap,
    events_for,
    wait_for,
)

pytestmark = pytest.mark.cluster

PROJECT = Path(__file__).parent / "bad_input_project"
GROUP, VERSION, KIND = "badinput.e2e.example.com", "v1alpha1", "Anything"
TOO_DEEP = "spec nested deeper than 100 levels at spec.a.a.a.a.a.a…"
# Every run is short, but up to a dozen share two cores with the control plane.
SETTLE_SECONDS = 240


def nested(depth: int) -> dict[str, Any]:
    """A spec `depth` keys deep: {"a": {"a": ... {"a": "leaf"}}}."""
    spec: Any = "leaf"
    for _ in range(depth):
        spec = {"a": spec}
    return dict(spec)


@dataclass(frozen=True)
class Case:
    name: str
    spec: dict[str, Any] = field(repr=False)
    failure: str | None = None  # what the Failure message says; None: must succeed
    foo_bar: str = "unset"  # what the run must have seen as `foo_bar`


CASES = [
    Case("depth-50", nested(50)),
    Case("depth-100", nested(100)),  # the limit itself still runs
    Case("depth-400", nested(400), failure=TOO_DEEP),
    Case("depth-600", nested(600), failure=TOO_DEEP),
    Case("depth-1200", nested(1200), failure=TOO_DEEP),
    Case("depth-1500", nested(1500), failure=TOO_DEEP),
    Case("one-mib", {f"k{index:04d}": "x" * 1024 for index in range(1024)}),
    Case("dots", {"a.b": "x", "c.d": {"e.f": 1}}),
    Case("spaces", {"with space": "x", " padded ": "y"}),
    Case("unicode", {"ключ": "значение", "名前": "値", "emoji😀": "✓"}),
    Case("empty-key", {"": "x", "other": "y"}),
    Case("colliding", {"fooBar": "camel", "foo_bar": "snake"}, foo_bar="snake"),
]
NORMAL = Case("normal-after", {"hello": "world"})


@dataclass
class Outcome:
    """What the table run left behind, for the per-case tests."""

    api_client: Any
    namespace: str
    operator: OperatorProcess
    # Never printed: repr() of a deep object raises RecursionError.
    objects: dict[str, dict[str, Any]] = field(repr=False)


def _body(case: Case) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": case.name},
        "spec": case.spec,
    }


def _verdict(obj: dict[str, Any] | None) -> str | None:
    for ctype in ("Successful", "Failure"):
        found = condition(obj, ctype)
        if found and found.get("status") == "True":
            return ctype
    return None


def _settle(
    kube: Kube, res: ResourceInfo, namespace: str, operator: OperatorProcess
) -> dict[str, Any]:
    """Wait until every custom resource has a verdict (or time runs out); return them all."""
    names = [case.name for case in [*CASES, NORMAL]]
    objects: dict[str, Any] = {}

    def settled() -> bool:
        for name in names:
            if _verdict(objects.get(name)) is None:
                objects[name] = kube.get_or_none(res, namespace=namespace, name=name)
        return all(_verdict(objects.get(name)) for name in names) or not operator.alive()

    # On a timeout the per-case tests say which custom resources have no verdict.
    with contextlib.suppress(NotReady):
        wait_for("every custom resource has a verdict", settled, timeout=SETTLE_SECONDS)
    return objects


@pytest.fixture(scope="module")
def outcome(
    api_client: Any, kubeconfig_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Outcome]:
    apply_crds(
        api_client,
        yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text()),
        what="bad-input",
    )
    namespace = make_namespace(api_client, "badinput")
    kube = Kube(load_login(str(kubeconfig_path)))
    res = kube.resource(group=GROUP, version=VERSION, kind=KIND)
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path_factory.mktemp("bad-input"),
        env={"WATCH_NAMESPACE": namespace},
        cwd=PROJECT,
    )
    try:
        for case in CASES:
            kube.create(res, namespace=namespace, body=_body(case))
        operator.start()
        kube.create(res, namespace=namespace, body=_body(NORMAL))
        objects = _settle(kube, res, namespace, operator)
        yield Outcome(api_client, namespace, operator, objects)
    finally:
        operator.stop()
        drop_namespace(api_client, namespace)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_each_custom_resource_ends_successful_or_failed_with_the_reason(
    outcome: Outcome, case: Case
) -> None:
    obj = outcome.objects.get(case.name)
    expected = "Failure" if case.failure else "Successful"
    assert _verdict(obj) == expected, f"{case.name}: conditions {(obj or {}).get('status')}"
    if case.failure is None:
        seen = configmap(outcome.api_client, outcome.namespace, f"{case.name}-seen")
        assert seen is not None, "the run did not happen"
        assert seen["foo_bar"] == case.foo_bar
        assert seen["spec_keys"] == str(len(case.spec))
        return
    message = str((condition(obj, "Failure") or {}).get("message", ""))
    assert case.failure in message
    assert len(message) < 300, "a bounded message, whatever the depth"
    # Not left "Running": the reconcile is over, and nothing retries it in a loop.
    assert (condition(obj, "Running") or {}).get("status") != "True"

    def warnings() -> list[Any]:
        return [
            event
            for event in events_for(outcome.api_client, outcome.namespace, case.name)
            if event.type == "Warning" and case.failure in (event.message or "")
        ]

    wait_for(f"a Warning Event for {case.name}", lambda: bool(warnings()), timeout=30)
    # Reported once: the same object is not retried in a loop.
    assert sum(event.count or 1 for event in warnings()) == 1


def test_a_normal_custom_resource_created_after_them_succeeds(outcome: Outcome) -> None:
    assert _verdict(outcome.objects.get(NORMAL.name)) == "Successful"
    assert configmap(outcome.api_client, outcome.namespace, f"{NORMAL.name}-seen") is not None


def test_the_operator_kept_running_without_recursion_errors(outcome: Outcome) -> None:
    assert outcome.operator.alive()
    assert outcome.operator.ready()
    log = outcome.operator.log_path.read_text(errors="replace")
    assert "RecursionError" not in log
    assert "maximum recursion depth" not in log
    # kopf reports what it could not process at error level: there must be none.
    kopf_errors = outcome.operator.logged(
        lambda entry: (
            entry.get("level") in {"ERROR", "error"}
            and str(entry.get("logger", "")).startswith("kopf")
        )
    )
    assert kopf_errors == [], json.dumps(kopf_errors)[:2000]
