"""End to end: a run that cannot be set up ends as Failure, once, not as "Running" forever.

The operator is a real process whose ANSIBLE_INVENTORY names a file that does
not exist, so no Ansible run can be prepared (issue 10, part 3). Before the
fix the CR kept Running=True with no Failure and no Warning Event, and was
retried with backoff (1 s, 2 s, 4 s...): 7 "Running" Events in 75 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import (
    GROUP,
    VERSION,
    OperatorProcess,
    condition,
    create_cr,
    custom,
    events_for,
    wait_condition,
    wait_for,
)

pytestmark = pytest.mark.cluster

CONTROLLER = "widget-v1alpha1-controller"
# Without the fix the queue retried after about 1 s, 3 s and 7 s: a window of
# this length would have seen at least three more Running Events.
QUIET_WINDOW = 8.0


@pytest.fixture(scope="module")
def namespace(api_client: Any, e2e_crds: list[str]) -> Iterator[str]:
    name = make_namespace(api_client, "setup-err")
    yield name
    drop_namespace(api_client, name)


@pytest.fixture(scope="module")
def missing_inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inventory") / "no-such-hosts"


@pytest.fixture(scope="module")
def operator(
    kubeconfig_path: Path,
    namespace: str,
    missing_inventory: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path_factory.mktemp("operator"),
        env={"WATCH_NAMESPACE": namespace, "ANSIBLE_INVENTORY": str(missing_inventory)},
        # A Running Event for every attempt, as the Go operator's status has one, even
        # for a run that fails at once (by default only runs that last get one).
        args=["--running-condition-delay=0"],
        name="setup-errors",
    ).start()
    yield process
    process.stop()


def _events(api_client: Any, ns: str, name: str, reason: str) -> list[Any]:
    return [e for e in events_for(api_client, ns, name) if e.reason == reason]


def _count(api_client: Any, ns: str, name: str, reason: str) -> int:
    # Repeats of one Event are aggregated into its `count`.
    return sum(e.count or 1 for e in _events(api_client, ns, name, reason))


def _retries(operator: OperatorProcess) -> float:
    for family in text_string_to_metric_families(operator.metrics()):
        for sample in family.samples:
            if sample.name == "workqueue_retries_total" and sample.labels.get("name") == CONTROLLER:
                return float(sample.value)
    return 0.0


def test_a_missing_inventory_gives_failure_and_a_warning_once_then_waits_for_a_change(
    api_client: Any, namespace: str, missing_inventory: Path, operator: OperatorProcess
) -> None:
    ns = namespace
    create_cr(api_client, ns, "widgets", "Widget", "no-inventory", {"size": 1})

    obj = wait_condition(api_client, ns, "widgets", "no-inventory", "Failure", timeout=60)
    failure = condition(obj, "Failure")
    assert failure is not None
    assert failure["reason"] == "Failed"
    assert failure["message"].startswith(
        f"Ansible run could not start: cannot use ANSIBLE_INVENTORY='{missing_inventory}'"
    )
    assert "No such file or directory" in failure["message"]
    assert condition(obj, "Running")["status"] == "False"  # type: ignore[index]
    wait_for(
        "a Warning Event with the error",
        lambda: any(
            e.type == "Warning" and e.message == failure["message"]
            for e in _events(api_client, ns, "no-inventory", "Failed")
        ),
        timeout=30,
    )

    # No hot loop: over a window in which backoff would have retried three
    # times, the one Running Event stays one and the queue retries nothing.
    deadline = time.monotonic() + QUIET_WINDOW
    while time.monotonic() < deadline:
        assert _count(api_client, ns, "no-inventory", "Running") == 1
        time.sleep(0.5)
    assert _count(api_client, ns, "no-inventory", "Failed") == 1
    assert _retries(operator) == 0

    # A change of the CR is tried again at once, and reported again.
    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "widgets", "no-inventory", {"spec": {"size": 2}}
    )
    wait_for(
        "a second attempt after the change",
        lambda: _count(api_client, ns, "no-inventory", "Failed") == 2,
        timeout=30,
    )
    assert _count(api_client, ns, "no-inventory", "Running") == 2
