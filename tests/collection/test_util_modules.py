"""The operator_sdk.util collection's modules, run by real playbooks against the test cluster.

Each test runs a fixture playbook (tests/collection/playbooks) through
ansible-runner, with the collection as `make venv` installs it, and checks
what the module returned and what the API server then holds, read with the
kubernetes client. The CRDs are throw-away ones in a group unique to the
session, one with a status subresource and one without. osdk_metric talks to
a UserMetricsServer started by the test on an ephemeral port.
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
from ansible_collections.operator_sdk.util.plugins.module_utils import kube
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ansible_operator.observability.metrics import OperatorMetrics
from ansible_operator.observability.usermetrics import UserMetricsServer

pytestmark = pytest.mark.cluster

PLAYBOOKS = Path(__file__).parent / "playbooks"
VENV_BIN = str(Path(sys.executable).parent)
VERSION = "v1"
OLD_TIME = "2020-01-02T03:04:05Z"


# --- running playbooks -------------------------------------------------------------------


@dataclass
class PlaybookRun:
    status: str
    events: list[dict[str, Any]]

    def task_events(self, task: str) -> list[dict[str, Any]]:
        return [
            event
            for event in self.events
            if event["event"] in ("runner_on_ok", "runner_on_failed")
            and event["event_data"].get("task") == task
        ]

    def results(self, task: str) -> list[dict[str, Any]]:
        """The task's result, or one result per loop item, in order."""
        (event,) = self.task_events(task)
        res: dict[str, Any] = event["event_data"]["res"]
        items: list[dict[str, Any]] | None = res.get("results")
        if items is not None:
            # ansible-core 2.21 leaves `failed` out of a failed item's result too (2.19
            # kept it there); each item's own event says whether it failed.
            outcomes = [
                e["event"] == "runner_item_on_failed"
                for e in self.events
                if e["event"] in ("runner_item_on_ok", "runner_item_on_failed")
                and e["event_data"].get("task") == task
            ]
            assert len(outcomes) == len(items), (outcomes, items)
            return [dict(item, failed=failed) for item, failed in zip(items, outcomes, strict=True)]
        # A failed task's own result carries no `failed` key; its event says so.
        return [dict(res, failed=event["event"] == "runner_on_failed")]


@pytest.fixture(autouse=True)
def _neutral_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own Ansible and Kubernetes settings must not leak into the runs.
    for name in list(os.environ):
        if name.startswith(("ANSIBLE_", "K8S_AUTH_")):
            monkeypatch.delenv(name)


@pytest.fixture
def run_playbook(kubeconfig_path: Path, tmp_path: Path) -> Any:
    def run(playbook: str, *, check: bool = False, **extravars: Any) -> PlaybookRun:
        private = tmp_path / f"runner-{uuid.uuid4().hex[:8]}"
        private.mkdir()
        runner = ansible_runner.run(
            private_data_dir=str(private),
            playbook=str(PLAYBOOKS / playbook),
            inventory=(
                f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}"
            ),
            extravars=extravars,
            envvars={
                "K8S_AUTH_KUBECONFIG": str(kubeconfig_path),
                "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            },
            cmdline="--check" if check else None,
            quiet=True,
        )
        return PlaybookRun(status=runner.status, events=list(runner.events))

    return run


# --- throw-away CRDs and custom resources -------------------------------------------------


@dataclass(frozen=True)
class Kinds:
    group: str
    api_version: str
    with_status: str = "Widget"
    without_status: str = "Gadget"


def _crd(group: str, kind: str, *, status: bool) -> dict[str, Any]:
    plural = kind.lower() + "s"
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [version],
        },
    }


@pytest.fixture(scope="session")
def kinds(api_client: client.ApiClient) -> Iterator[Kinds]:
    # A group of its own per session: stale discovery caches cannot mislead the modules.
    group = f"t{uuid.uuid4().hex[:8]}.collection.example.com"
    found = Kinds(group=group, api_version=f"{group}/{VERSION}")
    extensions = client.ApiextensionsV1Api(api_client)
    names = []
    for kind, status in ((found.with_status, True), (found.without_status, False)):
        created = extensions.create_custom_resource_definition(_crd(group, kind, status=status))
        names.append(created.metadata.name)
    try:
        custom = client.CustomObjectsApi(api_client)
        deadline = time.monotonic() + 60
        for kind in (found.with_status, found.without_status):
            while True:  # served once discovery lists it
                try:
                    custom.list_cluster_custom_object(group, VERSION, kind.lower() + "s")
                    break
                except client.ApiException as err:
                    if err.status != 404 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        yield found
    finally:
        for name in names:
            extensions.delete_custom_resource_definition(name)


class Objects:
    """Create and read the test's custom resources and Events."""

    def __init__(self, api_client: client.ApiClient, kinds: Kinds, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.kinds = kinds
        self.namespace = namespace

    def create(self, name: str, *, kind: str = "Widget", status: dict[str, Any] | None = None):
        body = {
            "apiVersion": self.kinds.api_version,
            "kind": kind,
            "metadata": {"name": name},
            "spec": {"size": 1},
        }
        plural = kind.lower() + "s"
        obj = self.custom.create_namespaced_custom_object(
            self.kinds.group, VERSION, self.namespace, plural, body
        )
        if status is not None:
            obj["status"] = status
            obj = self.custom.replace_namespaced_custom_object_status(
                self.kinds.group, VERSION, self.namespace, plural, name, obj
            )
        return obj

    def get(self, name: str, *, kind: str = "Widget") -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            self.kinds.group, VERSION, self.namespace, kind.lower() + "s", name
        )
        return obj

    def events(self) -> list[client.CoreV1Event]:
        items: list[client.CoreV1Event] = self.core.list_namespaced_event(self.namespace).items
        return items


@pytest.fixture
def objects(api_client: client.ApiClient, kinds: Kinds, namespace: str) -> Objects:
    return Objects(api_client, kinds, namespace)


def status_calls(
    run_playbook: Any, objects: Objects, name: str, *calls: dict[str, Any], check: bool = False
) -> list[dict[str, Any]]:
    run = run_playbook(
        "k8s_status.yml",
        check=check,
        api_version=objects.kinds.api_version,
        kind="Widget",
        cr_name=name,
        cr_namespace=objects.namespace,
        calls=list(calls),
    )
    return run.results("k8s_status")


def conditions_by_type(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"]["conditions"]}


def recent(stamp: str) -> bool:
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return abs(datetime.now(UTC) - when) < timedelta(minutes=5)


# --- k8s_status ----------------------------------------------------------------------------


def test_status_merge_keeps_other_keys_and_conditions(run_playbook: Any, objects: Objects) -> None:
    old = {"type": "Old", "status": "True", "reason": "Fine", "lastTransitionTime": OLD_TIME}
    objects.create("merge", status={"kept": "yes", "nested": {"a": 1}, "conditions": [old]})

    (result,) = status_calls(
        run_playbook,
        objects,
        "merge",
        {
            "status": {"nested": {"b": 2}, "added": ["x"]},
            "conditions": [{"type": "Ready", "status": True, "reason": "AllGood", "message": "ok"}],
        },
    )

    assert result["changed"] is True, result
    live = objects.get("merge")
    status = live["status"]
    assert status["kept"] == "yes"
    assert status["nested"] == {"a": 1, "b": 2}
    assert status["added"] == ["x"]
    assert [c["type"] for c in status["conditions"]] == ["Old", "Ready"]
    assert status["conditions"][0] == old
    ready = status["conditions"][1]
    assert ready["status"] == "True"  # the YAML boolean, as upstream converts it
    assert (ready["reason"], ready["message"]) == ("AllGood", "ok")
    assert recent(ready["lastTransitionTime"])
    # `result` is the object after the write
    assert result["result"]["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    assert result["result"]["status"] == status


def test_status_repeat_is_unchanged_and_keeps_transition_time(
    run_playbook: Any, objects: Objects
) -> None:
    ready = {"type": "Ready", "status": "True", "reason": "Up", "message": "fine"}
    objects.create("repeat", status={"conditions": [dict(ready, lastTransitionTime=OLD_TIME)]})
    before = objects.get("repeat")["metadata"]["resourceVersion"]

    same, reworded, flipped, flipped_again = status_calls(
        run_playbook,
        objects,
        "repeat",
        {"conditions": [ready]},
        {"conditions": [dict(ready, message="still fine")]},
        {"conditions": [dict(ready, status="False", reason="Down")]},
        {"conditions": [dict(ready, status="False", reason="Down")]},
    )

    # Identical apart from the (missing) time: nothing to write, old time kept.
    assert same["changed"] is False
    assert same["result"]["metadata"]["resourceVersion"] == before
    assert same["result"]["status"]["conditions"][0]["lastTransitionTime"] == OLD_TIME
    # A new message is written, but the status did not transition: time kept.
    assert reworded["changed"] is True
    assert reworded["result"]["status"]["conditions"][0]["message"] == "still fine"
    assert reworded["result"]["status"]["conditions"][0]["lastTransitionTime"] == OLD_TIME
    # A status flip is a transition: time is now; the repeat changes nothing.
    assert flipped["changed"] is True
    flipped_time = flipped["result"]["status"]["conditions"][0]["lastTransitionTime"]
    assert flipped_time != OLD_TIME
    assert recent(flipped_time)
    assert flipped_again["changed"] is False
    live = conditions_by_type(objects.get("repeat"))["Ready"]
    assert live == dict(ready, status="False", reason="Down", lastTransitionTime=flipped_time)


def test_status_given_transition_time_is_kept_unless_fields_change(
    run_playbook: Any, objects: Objects
) -> None:
    current = {"type": "Ready", "status": "True", "reason": "Up", "lastTransitionTime": OLD_TIME}
    objects.create("explicit", status={"conditions": [current]})

    other_time, new_reason = status_calls(
        run_playbook,
        objects,
        "explicit",
        {"conditions": [dict(current, lastTransitionTime="2024-05-06T07:08:09Z")]},
        {"conditions": [dict(current, reason="Again", lastTransitionTime="2024-05-06T07:08:09Z")]},
    )

    assert other_time["changed"] is False  # only the time differs: the old condition stays
    assert new_reason["changed"] is True
    (live,) = objects.get("explicit")["status"]["conditions"]
    assert live == dict(current, reason="Again", lastTransitionTime="2024-05-06T07:08:09Z")


def test_status_replace_puts_the_whole_status(run_playbook: Any, objects: Objects) -> None:
    old = {"type": "Old", "status": "True", "lastTransitionTime": OLD_TIME}
    objects.create("replace", status={"a": 1, "conditions": [old]})

    replaced, again, forced = status_calls(
        run_playbook,
        objects,
        "replace",
        {"replace": True, "status": {"b": 2}},
        {"replace": True, "status": {"b": 2}},
        {"force": True, "status": {"c": 3}, "conditions": [{"type": "New", "status": "Unknown"}]},
    )

    assert replaced["changed"] is True
    assert replaced["result"]["status"] == {"b": 2}
    assert again["changed"] is False
    assert forced["changed"] is True
    live = objects.get("replace")["status"]
    assert set(live) == {"c", "conditions"}
    (new,) = live["conditions"]
    assert (new["type"], new["status"]) == ("New", "Unknown")
    assert recent(new["lastTransitionTime"])
    assert forced["result"]["status"] == live


def test_status_lists_merge_by_containment_unless_replace_lists(
    run_playbook: Any, objects: Objects
) -> None:
    objects.create("lists", status={"items": [1, 2, 3]})

    subset, replaced = status_calls(
        run_playbook,
        objects,
        "lists",
        {"status": {"items": [1, 2]}},
        {"status": {"items": [1, 2]}, "replace_lists": True},
    )

    assert subset["changed"] is False  # upstream: the given items are all present already
    assert replaced["changed"] is True
    assert objects.get("lists")["status"]["items"] == [1, 2]


def test_status_null_removes_a_key(run_playbook: Any, objects: Objects) -> None:
    objects.create("remove", status={"gone": "soon", "stays": True})

    removed, again = status_calls(
        run_playbook, objects, "remove", {"status": {"gone": None}}, {"status": {"gone": None}}
    )

    assert removed["changed"] is True
    assert again["changed"] is False
    assert objects.get("remove")["status"] == {"stays": True}


def test_status_conditions_under_status_merge_by_type_unvalidated(
    run_playbook: Any, objects: Objects
) -> None:
    old = {"type": "Old", "status": "True", "lastTransitionTime": OLD_TIME}
    other = {"type": "Other", "status": "True", "lastTransitionTime": OLD_TIME}
    objects.create("raw", status={"conditions": [old, other]})
    raw = {"type": "Old", "status": "false", "reason": "not one word"}

    (result,) = status_calls(run_playbook, objects, "raw", {"status": {"conditions": [raw]}})

    assert result["changed"] is True
    # Taken as given: no validation, no lastTransitionTime added (as upstream).
    assert objects.get("raw")["status"]["conditions"] == [raw, other]


def test_status_check_mode_writes_nothing(run_playbook: Any, objects: Objects) -> None:
    created = objects.create("dry", status={"a": 1})

    (result,) = status_calls(run_playbook, objects, "dry", {"status": {"b": 2}}, check=True)

    assert result["changed"] is True
    assert result["result"]["status"] == {"a": 1, "b": 2}
    live = objects.get("dry")
    assert live["status"] == {"a": 1}
    assert live["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_status_writes_are_conditional_and_retried_on_conflict(objects: Objects) -> None:
    # The modules' write path: a merge patch of /status that carries the
    # resourceVersion read, inside kube.with_conflict_retry. A stale version
    # must be refused by the API server (409), and the retry must re-read.

    stale = objects.create("conflict", status={"n": 0})["metadata"]["resourceVersion"]
    objects.custom.patch_namespaced_custom_object_status(
        objects.kinds.group, VERSION, objects.namespace, "widgets", "conflict", {"status": {"n": 1}}
    )
    widgets = DynamicClient(objects.custom.api_client).resources.get(
        api_version=objects.kinds.api_version, kind="Widget"
    )
    versions = iter([stale])
    attempts = []

    def attempt() -> Any:
        version = next(versions, None) or objects.get("conflict")["metadata"]["resourceVersion"]
        attempts.append(version)
        return widgets.status.patch(
            body={"metadata": {"resourceVersion": version}, "status": {"n": 2}},
            name="conflict",
            namespace=objects.namespace,
            content_type="application/merge-patch+json",
        )

    result = kube.with_conflict_retry(attempt)

    assert len(attempts) == 2
    assert attempts[0] == stale != attempts[1]
    assert result.status.n == 2
    assert objects.get("conflict")["status"] == {"n": 2}


def test_status_conditions_are_validated(run_playbook: Any, objects: Objects) -> None:
    objects.create("validate")
    ready = {"type": "Ready", "status": "True"}

    results = status_calls(
        run_playbook,
        objects,
        "validate",
        {"conditions": [dict(ready, reason="The Ping Failed")]},
        {"conditions": [dict(ready, reason="A" * 5000 + "1")]},  # no regex blow-up
        {"conditions": [dict(ready, lastTransitionTime="26/03/2021 2:00PM")]},
        {"conditions": [dict(ready, lastHeartbeatTime="2021-03-26")]},
        {"conditions": [dict(ready, type="")]},
        {"conditions": [dict(ready, status="Maybe")]},
        {"conditions": [dict(ready, color="blue")]},
        {"conditions": [{"status": "True"}]},
        {"status": {"conditions": [ready]}, "conditions": [ready]},
        {
            "conditions": [
                dict(ready, reason="CamelCase", lastTransitionTime="2021-03-26T14:00:00+02:00")
            ]
        },
    )

    camel = "Condition 'reason' must be a single, CamelCase word"
    invalid = "The specified conditions failed to validate"
    assert [(r.get("msg"), r.get("error")) for r in results[:5]] == [
        (invalid, camel),
        (invalid, camel),
        (invalid, "'lastTransitionTime' must be an RFC3339 compliant datetime string"),
        (invalid, "'lastHeartbeatTime' must be an RFC3339 compliant datetime string"),
        (invalid, "Condition `type` must be set"),
    ]
    # Ansible's own argument checks, from the module's argument spec (as upstream).
    assert results[5]["failed"] is True
    assert "value of status must be one of: True, False, Unknown, got: Maybe" in results[5]["msg"]
    assert results[6]["failed"] is True
    assert "Unsupported parameters" in results[6]["msg"]
    assert "color" in results[6]["msg"]
    assert results[7]["failed"] is True
    assert "missing required arguments: type" in results[7]["msg"]
    assert results[8]["msg"] == (
        "You cannot specify conditions in both the 'status' and 'conditions' parameters"
    )
    assert results[9]["changed"] is True, results[9]
    assert results[9]["result"]["status"]["conditions"][0]["reason"] == "CamelCase"


def test_status_failures_name_the_problem(
    run_playbook: Any, objects: Objects, kinds: Kinds
) -> None:
    objects.create("gadget", kind="Gadget")

    no_subresource, missing, unknown_kind = status_calls(
        run_playbook,
        objects,
        "gadget",
        {"kind": "Gadget", "status": {"hello": "world"}},
        {"name": "does-not-exist", "status": {"hello": "world"}},
        {"kind": "NoSuchKind", "status": {"hello": "world"}},
    )

    assert no_subresource["failed"] is True
    assert no_subresource["msg"] == (
        f"Resource {kinds.api_version}.Gadget does not support the status subresource"
    )
    assert "status" not in objects.get("gadget", kind="Gadget")
    assert missing["msg"] == "Failed to retrieve requested object"
    assert (missing["error"]["status"], missing["error"]["reason"]) == (404, "Not Found")
    assert unknown_kind["msg"] == (
        f"Failed to find exact match for {kinds.api_version}.NoSuchKind "
        "by [kind, name, singularName, shortNames]"
    )


# --- requeue_after -------------------------------------------------------------------------


def test_requeue_after_returns_the_period_the_operator_reads(run_playbook: Any) -> None:
    run = run_playbook("requeue_after.yml", good_time="1h2m30s", bad_time="1.5s")

    assert run.status == "successful"  # the failing task is ignored
    for task, action in (
        ("requeue with the fully qualified name", "operator_sdk.util.requeue_after"),
        ("requeue with the short name", "requeue_after"),
    ):
        (event,) = run.task_events(task)
        assert event["event"] == "runner_on_ok"
        # What the operator's event handling keys on: the action as written, and res.period.
        assert event["event_data"]["task_action"] == action
        assert event["event_data"]["res"]["period"] == "1h2m30s"
        assert event["event_data"]["res"]["changed"] is False
    (bad,) = run.results("requeue with an invalid time")
    assert bad["failed"] is True
    assert bad["msg"] == "invalid time input"
    assert "period" not in bad


# --- k8s_event -----------------------------------------------------------------------------


def test_k8s_event_records_and_counts_repeats(run_playbook: Any, objects: Objects) -> None:
    cr = objects.create("watched")
    call = {
        "name": "watched-scaled",
        "namespace": objects.namespace,
        "message": "Scaled to 3",
        "reason": "Scaled",
        "type": "Warning",
        "reportingComponent": "test-operator",
        "reportingInstance": "test-operator-0",
        "source": {"component": "test-operator", "host": "node-1"},
        "involvedObject": {
            "apiVersion": objects.kinds.api_version,
            "kind": "Widget",
            "name": "watched",
            "namespace": objects.namespace,
        },
    }

    run = run_playbook("k8s_event.yml", calls=[call])
    (first,) = run.results("k8s_event")
    assert first["changed"] is True, first
    (event,) = objects.events()
    assert event.metadata.name == "watched-scaled"
    assert (event.message, event.reason, event.type) == ("Scaled to 3", "Scaled", "Warning")
    assert (event.reporting_component, event.reporting_instance) == (
        "test-operator",
        "test-operator-0",
    )
    assert (event.source.component, event.source.host) == ("test-operator", "node-1")
    involved = event.involved_object
    assert (involved.api_version, involved.kind, involved.name, involved.namespace) == (
        objects.kinds.api_version,
        "Widget",
        "watched",
        objects.namespace,
    )
    assert involved.uid == cr["metadata"]["uid"]  # looked up from the live object
    assert event.count == 1
    assert event.first_timestamp == event.last_timestamp
    first_seen = event.first_timestamp

    time.sleep(1.1)  # so the repeat's lastTimestamp (second precision) differs
    untyped = {key: value for key, value in call.items() if key != "type"}
    repeat, other_reason = run_playbook(
        "k8s_event.yml", calls=[call, dict(untyped, reason="Resized", message="Scaled to 4")]
    ).results("k8s_event")

    # Upstream semantics: the same Event is updated, never a second one created;
    # a repeated reason counts up and keeps firstTimestamp, a new one starts over.
    assert repeat["changed"] is True
    assert repeat["result"]["count"] == 2
    assert other_reason["changed"] is True
    (event,) = objects.events()
    assert (event.reason, event.message, event.count) == ("Resized", "Scaled to 4", 1)
    assert event.type is None  # not given this time: cleared, as upstream's patch did
    assert event.involved_object.uid == cr["metadata"]["uid"]
    assert event.first_timestamp > first_seen
    assert event.first_timestamp == event.last_timestamp
    assert repeat["result"]["firstTimestamp"] == first["result"]["firstTimestamp"]
    assert repeat["result"]["lastTimestamp"] > repeat["result"]["firstTimestamp"]


def test_k8s_event_append_timestamp_and_absent(run_playbook: Any, objects: Objects) -> None:
    call = {
        "name": "burst",
        "namespace": objects.namespace,
        "message": "tick",
        "reason": "Tick",
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "not-there",
            "namespace": objects.namespace,
        },
    }

    first, second = run_playbook(
        "k8s_event.yml", calls=[dict(call, appendTimestamp=True)] * 2
    ).results("k8s_event")

    names = sorted(e.metadata.name for e in objects.events())
    assert names == sorted(
        [first["result"]["metadata"]["name"], second["result"]["metadata"]["name"]]
    )
    assert all(re.fullmatch(r"burst\.[0-9a-f]+", name) for name in names)
    # The involved object does not exist: recorded as given, without a uid.
    assert all(e.involved_object.uid is None for e in objects.events())

    absent = {"state": "absent", "name": "burst", "namespace": objects.namespace}
    created, deleted, gone = run_playbook(
        "k8s_event.yml",
        calls=[call, absent, absent],
    ).results("k8s_event")
    assert created["changed"] is True
    assert deleted["changed"] is True
    assert deleted["result"]["metadata"]["name"] == "burst"
    assert gone["changed"] is False
    assert "burst" not in {e.metadata.name for e in objects.events()}


def test_k8s_event_requires_message_and_reason_when_present(
    run_playbook: Any, objects: Objects
) -> None:
    (result,) = run_playbook(
        "k8s_event.yml", calls=[{"name": "x", "namespace": objects.namespace}]
    ).results("k8s_event")

    assert result["failed"] is True
    assert (
        "state is present but all of the following are missing: message, reason" in (result["msg"])
    )
    assert objects.events() == []


# --- osdk_metric ---------------------------------------------------------------------------


@pytest.fixture
def user_metrics() -> Iterator[tuple[OperatorMetrics, str]]:
    metrics = OperatorMetrics(runtime_collectors=False)
    server = UserMetricsServer(registry=metrics.registry, bind="127.0.0.1:0")
    server.start()
    try:
        yield metrics, f"http://127.0.0.1:{server.port}/metrics"
    finally:
        server.stop()


# The memcached sample's metric tasks, whose output the Go operator's e2e test greps.
SAMPLE_CALLS: list[dict[str, Any]] = [
    {"name": "sanity_counter", "description": "ensure counter can be created", "counter": {}},
    {"name": "sanity_gauge", "description": "ensure gauge can be created", "gauge": {}},
    {"name": "sanity_histogram", "description": "ensure histogram", "histogram": {}},
    {"name": "sanity_summary", "description": "ensure summary can be created", "summary": {}},
    {"name": "counter_inc_test", "description": "create counter", "counter": {}},
    {"name": "counter_inc_test", "description": "increment", "counter": {"increment": True}},
    {"name": "counter_add_test", "description": "create counter", "counter": {}},
    {"name": "counter_add_test", "description": "add", "counter": {"add": 2}},
    {"name": "gauge_set_test", "description": "set a gauge to 5", "gauge": {"set": 5}},
    {"name": "gauge_add_test", "description": "create a gauge", "gauge": {}},
    {"name": "gauge_add_test", "description": "add 7", "gauge": {"add": 7}},
    {"name": "gauge_sub_test", "description": "create a gauge", "gauge": {}},
    {"name": "gauge_sub_test", "description": "subtract 7", "gauge": {"subtract": 7}},
    {"name": "gauge_time_test", "description": "now", "gauge": {"set_to_current_time": True}},
    {"name": "summary_test", "description": "create a summary", "summary": {}},
    {"name": "summary_test", "description": "observe", "summary": {"observe": 2}},
    {"name": "histogram_test", "description": "create a histogram", "histogram": {}},
    {"name": "histogram_test", "description": "observe", "histogram": {"observe": 2}},
]


def test_osdk_metric_feeds_the_operator_registry(
    run_playbook: Any, user_metrics: tuple[OperatorMetrics, str]
) -> None:
    metrics, address = user_metrics
    started = time.time()

    results = run_playbook("osdk_metric.yml", address=address, calls=SAMPLE_CALLS).results(
        "osdk_metric"
    )

    assert [r.get("failed", False) for r in results] == [False] * len(SAMPLE_CALLS), results
    assert all(r["changed"] is True for r in results)
    text = metrics.render().decode()
    for expected in (
        "sanity_counter 0",
        "sanity_gauge 0",
        "sanity_histogram_bucket",
        "sanity_summary summary",
        "counter_inc_test 1",
        "counter_add_test 2",
        "gauge_set_test 5",
        "gauge_add_test 7",
        "gauge_sub_test -7",
        "gauge_time_test 1",
        "summary_test_sum 2",
        "histogram_test_sum 2",
    ):
        assert expected in text, expected
    values = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }
    assert values["counter_inc_test"] == 1
    assert values["counter_add_test"] == 2
    assert values["gauge_set_test"] == 5
    assert values["gauge_add_test"] == 7
    assert values["gauge_sub_test"] == -7
    assert started - 1 <= values["gauge_time_test"] <= time.time() + 1
    # `{}` observes 0 (as in the Go operator), then 2 was observed
    assert (values["summary_test_sum"], values["summary_test_count"]) == (2, 2)
    assert (values["histogram_test_sum"], values["histogram_test_count"]) == (2, 2)
    assert generate_latest(metrics.registry).decode().count("# TYPE histogram_test histogram") == 1


def test_osdk_metric_reports_the_api_errors(
    run_playbook: Any, user_metrics: tuple[OperatorMetrics, str]
) -> None:
    metrics, address = user_metrics
    calls: list[dict[str, Any]] = [
        {"name": "jobs", "description": "jobs done", "counter": {"increment": True}},
        {"name": "jobs", "description": "two kinds", "counter": {}, "gauge": {}},
        {"name": "jobs", "description": "none"},
        {"name": "jobs", "description": "as a gauge", "gauge": {"set": 1}},
        {"name": "jobs", "description": "down", "counter": {"add": -1}},
        {"name": "level", "description": "a gauge", "gauge": {"set": 3}},
        {"name": "level", "description": "as a counter", "counter": {"increment": True}},
        {"name": "latency", "description": "a summary", "summary": {"observe": 1}},
        {"name": "latency", "description": "as a gauge", "gauge": {}},
        {"name": "latency", "description": "histogram is fine", "histogram": {"observe": 3}},
        {
            "name": "jobs",
            "description": "nobody listening",
            "address": "http://127.0.0.1:9/metrics",
            "counter": {},
        },
    ]

    results = run_playbook("osdk_metric.yml", address=address, calls=calls).results("osdk_metric")

    outcome = [(r.get("failed", False), r.get("status_code"), r.get("msg")) for r in results[:10]]
    assert outcome == [
        (False, None, None),
        (True, 400, "only one metric can be processed at a time\n"),
        (True, 400, "a request should contain at least one metric\n"),
        (True, 400, "cannot change metric type of jobs, which is a counter\n"),
        (True, 400, "counter metrics cannot decrease in value\n"),
        (False, None, None),
        (True, 400, "cannot change metric type of level, which is a gauge\n"),
        (False, None, None),
        (True, 400, "cannot change metric type of latency, which is a histogram or summary\n"),
        (False, None, None),
    ]
    assert results[10]["failed"] is True
    assert results[10]["msg"].startswith("Could not reach the metrics API at http://127.0.0.1:9/")
    text = metrics.render().decode()
    assert "\njobs 1.0\n" in text
    assert "\nlevel 3.0\n" in text
    assert "\nlatency_sum 4.0\n" in text
    assert "\nlatency_count 2.0\n" in text
