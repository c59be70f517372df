"""End to end: after a restart the operator runs only what changed (controller/restartrule.py).

One namespace, three Widgets: one unchanged since its successful reconcile, one
whose last run failed, one edited while no operator ran. The second operator must
run the edited and the failed ones at once and leave the unchanged one for its
reconcile period; a change after the restart runs at once; a third operator with
`--reconcile-all-at-start` runs everything, as the Go operator does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import (
    GROUP,
    VERSION,
    OperatorProcess,
    create_cr,
    custom,
    wait_condition,
    wait_for,
)

pytestmark = pytest.mark.cluster


@pytest.fixture
def namespace(api_client: Any, e2e_crds: list[str]) -> Iterator[str]:
    name = make_namespace(api_client, "e2e-restart")
    yield name
    drop_namespace(api_client, name)


def _runs_of(operator: OperatorProcess, name: str) -> int:
    """Runs of CR `name` that ended, as `operator` logged them."""
    ended = {"Ansible-runner exited successfully"}
    return len(
        operator.logged(
            lambda e: (
                e.get("name") == name
                and (
                    e.get("msg") in ended or str(e.get("msg", "")).startswith("Ansible run failed")
                )
            )
        )
    )


def _edit(api_client: Any, ns: str, name: str, spec: dict[str, Any]) -> None:
    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "widgets", name, {"spec": spec}
    )


def test_a_restart_runs_only_what_changed(
    api_client: Any, kubeconfig_path: Path, namespace: str, tmp_path: Path
) -> None:
    ns = namespace

    def operator(name: str, *args: str) -> OperatorProcess:
        return OperatorProcess(
            kubeconfig=kubeconfig_path,
            workdir=tmp_path,
            env={"WATCH_NAMESPACE": ns},
            args=[f"--runner-dir={tmp_path / 'runs'}", *args],
            name=name,
        )

    first, second = operator("first"), operator("second")
    third = operator("third", "--reconcile-all-at-start")
    try:
        first.start()
        for name, fail in (("same", False), ("failing", True), ("edited", False)):
            create_cr(api_client, ns, "widgets", "Widget", name, {"size": 1, "fail": fail})
        wait_condition(api_client, ns, "widgets", "same", "Successful")
        wait_condition(api_client, ns, "widgets", "edited", "Successful")
        wait_condition(api_client, ns, "widgets", "failing", "Failure")
        first.stop()
        _edit(api_client, ns, "edited", {"size": 3})  # while no operator runs

        second.start()
        wait_for("the edited CR ran", lambda: _runs_of(second, "edited") >= 1, timeout=90)
        wait_for("the failed CR ran again", lambda: _runs_of(second, "failing") >= 1, timeout=90)
        # Changed after the restart: runs at once, as always.
        _edit(api_client, ns, "failing", {"fail": False})
        wait_for("the fixed CR ran", lambda: _runs_of(second, "failing") >= 2, timeout=90)
        assert _runs_of(second, "same") == 0  # everything else ran meanwhile
        second.stop()

        third.start()  # the Go operator's behaviour: everything runs
        wait_for("the unchanged CR ran", lambda: _runs_of(third, "same") >= 1, timeout=90)
    finally:
        for each in (first, second, third):
            each.stop()
