"""The restart rule: which CRs run at once when the operator starts, and which wait for
their reconcile period (controller/restartrule.py, through the primary watch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_operator.config.watches import GVK, Finalizer, Watch
from ansible_operator.controller.contract import Key
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.controller.restartrule import DIGEST_KEY, RestartRule
from ansible_operator.controller.watching import PrimaryWatch
from ansible_operator.runner.fakerunner import FakeRunner
from tests.unit.controller.test_queue import FakeClock
from tests.unit.controller.test_reconcile_path import NAME, NS, WIDGETS, World, key_of

PERIOD = 600.0
KEY = Key("memcached-v1alpha1-controller", "ns", "m")
SUCCEEDED = [{"type": "Successful", "status": "True"}, {"type": "Failure", "status": "False"}]
FAILED = [{"type": "Successful", "status": "False"}, {"type": "Failure", "status": "True"}]


@pytest.fixture
def role(tmp_path: Path) -> Path:
    tasks = tmp_path / "roles" / "memcached" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text("- debug: msg=one\n")
    return tmp_path / "roles" / "memcached"


def watch_of(role: Path, **changes: Any) -> Watch:
    return Watch(gvk=GVK("cache.example.com", "v1alpha1", "Memcached"), role=role, **changes)


def rule(watch: Watch, **options: Any) -> RestartRule:
    return RestartRule(watch, ansible_args="", period=PERIOD, rand=lambda: 0.5, **options)


def cr(*, generation: int = 3, record: str | None, conditions: Any = SUCCEEDED, **ann: str) -> Any:
    status: dict[str, Any] = {"conditions": conditions}
    if record is not None:
        status[DIGEST_KEY] = record
    meta: dict[str, Any] = {"name": "m", "namespace": "ns", "generation": generation}
    if ann:
        meta["annotations"] = {f"ansible.sdk.operatorframework.io/{k}": v for k, v in ann.items()}
    return {"metadata": meta, "status": status}


def start(
    watch: Watch, restart: RestartRule, body: Any
) -> tuple[Priority | None, WorkQueue, FakeClock]:
    """The initial listing's event for `body`; what the queue holds afterwards."""
    clock = FakeClock()
    queue = WorkQueue(total_limit=4, backoff_base=1.0, backoff_max=10.0, clock=clock)
    priority = PrimaryWatch(watch, queue, restart=restart).handle(None, body)
    return priority, queue, clock


def test_an_unchanged_cr_waits_for_its_period_with_jitter(role: Path) -> None:
    restart = rule(watch_of(role))
    priority, queue, clock = start(watch_of(role), restart, cr(record=restart.record(3)))
    assert priority is Priority.RESYNC
    assert queue.get(timeout=0) is None  # not now
    clock.advance(PERIOD * 0.75 - 1)  # rand 0.5 and jitter 0.5: three quarters of the period
    assert queue.get(timeout=0) is None
    clock.advance(1)
    assert queue.get(timeout=0) == KEY


# (how it changed, the priority it runs with at once: new and changed specs first)
CHANGED = {
    "new CR (no record)": (lambda r, w: (w, cr(record=None)), Priority.CHANGE),
    "spec changed (generation)": (
        lambda r, w: (w, cr(generation=4, record=r.record(3))),
        Priority.CHANGE,
    ),
    "last run failed": (
        lambda r, w: (w, cr(record=r.record(3), conditions=FAILED)),
        Priority.RESYNC,
    ),
    "bad period annotation": (
        lambda r, w: (w, cr(record=r.record(3), **{"reconcile-period": "x"})),
        Priority.RESYNC,
    ),
    "watch settings changed": (
        lambda r, w: (Watch(gvk=w.gvk, role=w.role, vars={"size": 2}), cr(record=r.record(3))),
        Priority.RESYNC,
    ),
    "finalizer added": (
        lambda r, w: (
            Watch(gvk=w.gvk, role=w.role, finalizer=Finalizer(name="f", role=w.role)),
            cr(record=r.record(3)),
        ),
        Priority.RESYNC,
    ),
}


@pytest.mark.parametrize(("change", "expected"), CHANGED.values(), ids=CHANGED.keys())
def test_a_changed_or_unknown_cr_runs_at_once(role: Path, change: Any, expected: Priority) -> None:
    now_watch, body = change(rule(watch_of(role)), watch_of(role))
    priority, queue, _ = start(now_watch, rule(now_watch), body)
    assert priority is expected
    assert queue.get(timeout=0) == KEY  # at once


def test_a_changed_role_file_is_a_change(role: Path) -> None:
    record = rule(watch_of(role)).record(3)
    (role / "tasks" / "main.yml").write_text("- debug: msg=two\n")  # a new image's role
    assert not rule(watch_of(role)).unchanged(cr(record=record))
    (role / "tasks" / "main.yml").write_text("- debug: msg=one\n")
    assert rule(watch_of(role)).unchanged(cr(record=record))


def test_the_flag_restores_the_go_behaviour(role: Path) -> None:
    record = rule(watch_of(role)).record(3)
    assert not rule(watch_of(role), rerun_all=True).unchanged(cr(record=record))


def test_a_period_annotation_sets_the_delay(role: Path) -> None:
    restart = rule(watch_of(role))
    body = cr(record=restart.record(3), **{"reconcile-period": "1h"})
    assert restart.unchanged(body)
    assert restart.delay(body) == 3600 * 0.75


def test_a_zero_period_means_no_periodic_run_so_run_now(role: Path) -> None:
    restart = RestartRule(watch_of(role), ansible_args="", period=0, rand=lambda: 0.5)
    assert not restart.unchanged(cr(record=restart.record(3)))


def test_a_successful_reconcile_records_what_it_ran_and_a_failed_one_does_not_count(
    tmp_path: Path,
) -> None:
    """Through the real reconciler: the record the next start compares with."""
    world = World(tmp=tmp_path)
    reconciler = world.reconciler(FakeRunner([FakeRunner.successful(), FakeRunner.failed()]))
    restart = RestartRule(reconciler.watch, ansible_args="", period=PERIOD)
    reconciler.restart = restart
    world.create()
    reconciler.reconcile(key_of(reconciler))
    stored = world.stored()
    assert stored is not None
    assert stored["status"][DIGEST_KEY] == restart.record(stored["metadata"]["generation"])
    assert restart.unchanged(stored)
    reconciler.reconcile(key_of(reconciler))  # the next run fails
    failed = world.kube.stored(WIDGETS, namespace=NS, name=NAME)
    assert failed is not None
    assert not restart.unchanged(failed)  # the record stays, the Failure decides
