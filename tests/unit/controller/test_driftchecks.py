"""Drift checks in memory: the checker (condition, Events on transitions only, gauge),
the scheduler's exclusion against reconciles, observe-only in the reconciler, and the
watch predicate that turns observe-only off at once. Fakes: FakeKube, FakeEvents, a
planner that answers from a list, the real WorkQueue on a fake clock."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ansible_operator.clocks import FakeClock
from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller.contract import Key, Outcome
from ansible_operator.controller.driftchecks import DriftChecker, DriftScheduler
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.controller.watching import PrimaryWatch
from ansible_operator.errors import KubeUnavailable
from ansible_operator.kube.client import ResourceInfo
from ansible_operator.kube.fakekube import FakeEvents, FakeKube
from ansible_operator.plan.engine import Findings
from ansible_operator.runner.fakerunner import FakeRunner
from tests.unit.controller.test_queue import Recorder
from tests.unit.controller.test_reconcile_path import FINALIZER, NAME, NS, WIDGETS, World
from tests.unit.controller.test_reconcile_path import world as world  # noqa: PLC0414
from tests.unit.controller.test_workers import wait_until

PREFIX = "ansible.sdk.operatorframework.io/"
WATCH = Watch(gvk=GVK(WIDGETS.group, WIDGETS.version, WIDGETS.kind), drift_check_period=5.0)
KEY = Key(controller=WATCH.controller_name, namespace=NS, name=NAME)
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
DRIFTED = Findings(drifted=("Deployment ns/w",))
IN_SYNC = Findings(drifted=())
FAILED = Findings(drifted=(), error="task [x] failed on localhost: boom")


class Planner:
    """Answers plans from a list, noting what it was asked."""

    def __init__(self, *answers: Findings) -> None:
        self.answers = list(answers)
        self.planned: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def __call__(self, watch: Watch, resource: ResourceInfo, obj: dict[str, Any]) -> Findings:
        self.planned.append(obj["metadata"]["name"])
        self.started.set()
        assert self.release.wait(5)
        return self.answers.pop(0)


class Gauge:
    def __init__(self) -> None:
        self.values: list[int] = []

    def drifted_resources(self, *, gvk: str, count: int) -> None:
        self.values.append(count)


def checker(kube: FakeKube, planner: Planner, events: FakeEvents, gauge: Gauge) -> DriftChecker:
    return DriftChecker(
        watch=WATCH,
        gvk="g",
        kube=kube,
        planner=planner,
        events=events,
        gauge=gauge,
        now=lambda: NOW,
    )


@pytest.fixture
def kube() -> FakeKube:
    made = FakeKube(WIDGETS)
    made.create(WIDGETS, namespace=NS, body={"metadata": {"name": NAME}, "spec": {"size": 1}})
    return made


def drifted_condition(kube: FakeKube) -> dict[str, Any]:
    obj = kube.stored(WIDGETS, namespace=NS, name=NAME)
    assert obj is not None
    [found] = [c for c in obj["status"]["conditions"] if c["type"] == "Drifted"]
    return dict(found)


def test_events_only_when_drift_appears_or_goes(kube: FakeKube) -> None:
    events, gauge = FakeEvents(), Gauge()
    planner = Planner(IN_SYNC, DRIFTED, DRIFTED, FAILED, DRIFTED, IN_SYNC, IN_SYNC)
    check = checker(kube, planner, events, gauge)
    seen = []
    for _ in range(7):
        assert check.check(KEY) == 5.0
        seen.append(drifted_condition(kube)["status"])
    assert seen == ["False", "True", "True", "Unknown", "True", "False", "False"]
    assert [(e.type, e.reason, e.message) for e in events.events] == [
        ("Warning", "Drifted", "Drifted: Deployment ns/w"),
        ("Normal", "DriftResolved", "No drift: the role would change nothing"),
    ]
    assert gauge.values == [0, 1, 1, 1, 0, 0]  # an Unknown check leaves the gauge
    assert drifted_condition(kube)["observedGeneration"] == 1


def test_a_failed_plan_says_why_and_never_drifted(kube: FakeKube) -> None:
    check = checker(kube, Planner(FAILED), FakeEvents(), Gauge())
    check.check(KEY)
    condition = drifted_condition(kube)
    assert (condition["status"], condition["reason"]) == ("Unknown", "DriftCheckFailed")
    assert condition["message"] == "Drift check failed: task [x] failed on localhost: boom"


def test_no_check_for_a_gone_deleting_or_switched_off_cr(kube: FakeKube) -> None:
    planner = Planner()
    check = checker(kube, planner, FakeEvents(), Gauge())
    kube.edit(WIDGETS, namespace=NS, name=NAME, change=_annotate({"drift-check-period": "0"}))
    assert check.check(KEY) is None
    kube.edit(WIDGETS, namespace=NS, name=NAME, change=_annotate({"drift-check-period": "bad"}))
    assert check.check(KEY) is None
    kube.delete(WIDGETS, namespace=NS, name=NAME)
    assert check.check(KEY) is None
    assert planner.planned == []


def _annotate(annotations: dict[str, str]) -> Any:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"] = {PREFIX + k: v for k, v in annotations.items()}

    return change


# -- the scheduler: never beside a reconcile of the same CR ---------------------------


@pytest.fixture
def scheduled(kube: FakeKube) -> Iterator[tuple[WorkQueue, Planner, DriftScheduler, FakeClock]]:
    clock = FakeClock()
    queue = WorkQueue(total_limit=2, backoff_base=1.0, backoff_max=10.0, clock=clock)
    planner = Planner(IN_SYNC, IN_SYNC, IN_SYNC)
    check = checker(kube, planner, FakeEvents(), Gauge())
    scheduler = DriftScheduler(
        queue=queue, checkers={KEY.controller: check}, clock=clock, jitter=lambda: 1.0
    )
    scheduler.start()
    yield queue, planner, scheduler, clock
    scheduler.stop(grace=5)


def _wake(scheduler: DriftScheduler) -> None:
    # The fake clock moved: wake the threads waiting for the next due check.
    with scheduler._cond:
        scheduler._cond.notify_all()


def test_no_drift_check_while_a_reconcile_of_the_cr_runs(
    kube: FakeKube, scheduled: tuple[WorkQueue, Planner, DriftScheduler, FakeClock]
) -> None:
    queue, planner, scheduler, clock = scheduled
    scheduler.observe(KEY.controller, "ADDED", kube.stored(WIDGETS, namespace=NS, name=NAME) or {})
    assert scheduler.due(KEY) == clock() + 5.0
    queue.add(KEY)
    assert queue.get(timeout=0) == KEY  # a reconcile holds the key
    clock.advance(5.0)
    _wake(scheduler)
    wait_until(lambda: (due := scheduler.due(KEY)) is not None and due > clock())
    assert planner.planned == []  # it tried, could not claim, and waits a retry
    queue.done(KEY)
    clock.advance(5.0)
    _wake(scheduler)
    wait_until(lambda: planner.planned == [NAME])


def test_a_reconcile_asked_for_during_a_check_waits_for_it(
    kube: FakeKube, scheduled: tuple[WorkQueue, Planner, DriftScheduler, FakeClock]
) -> None:
    queue, planner, scheduler, clock = scheduled
    planner.release.clear()
    scheduler.observe(KEY.controller, "ADDED", kube.stored(WIDGETS, namespace=NS, name=NAME) or {})
    clock.advance(5.0)
    _wake(scheduler)
    assert planner.started.wait(5)
    queue.add(KEY, priority=Priority.CHANGE)
    assert queue.get(timeout=0.2) is None  # held by the drift check
    assert queue.in_flight() == 1  # and counted against the limits
    planner.release.set()
    assert queue.get(timeout=5) == KEY


def test_claims_respect_the_limits_and_keep_delayed_adds() -> None:
    clock = FakeClock()
    queue = WorkQueue(total_limit=1, backoff_base=1.0, backoff_max=10.0, clock=clock)
    other = Key(KEY.controller, NS, "other")
    queue.add_after(KEY, 10.0)
    assert queue.claim(KEY)
    assert not queue.claim(other)  # the total limit is reached
    queue.release(KEY)
    assert queue.claim(other)
    queue.release(other)
    clock.advance(10.0)
    assert queue.get(timeout=0) == KEY  # the periodic reconcile was not dropped


# -- observe-only in the reconciler, and switching it off ----------------------------


def test_an_observe_only_cr_is_never_run_nor_counted(world: World) -> None:
    runner = FakeRunner()
    reconciler = world.reconciler(runner, finalizer=True)
    world.create()
    world.kube.edit(WIDGETS, namespace=NS, name=NAME, change=_annotate({"observe-only": "true"}))
    outcome = reconciler.reconcile(Key(reconciler.watch.controller_name, NS, NAME))
    assert (outcome.requeue_after, outcome.error, outcome.forget) == (None, None, False)
    assert runner.requests == []
    assert world.hooks.count() == 0
    assert world.events.events == []
    stored = world.stored()
    assert stored is not None
    assert "finalizers" not in stored["metadata"]


def test_a_deleting_observe_only_cr_loses_the_finalizer_unrun(world: World) -> None:
    runner = FakeRunner()
    reconciler = world.reconciler(runner, finalizer=True)
    world.create()

    def observed(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"] = {PREFIX + "observe-only": "true"}
        obj["metadata"]["finalizers"] = [FINALIZER]

    world.kube.edit(WIDGETS, namespace=NS, name=NAME, change=observed)
    world.kube.delete(WIDGETS, namespace=NS, name=NAME)  # held by the finalizer
    stored = world.stored()
    assert stored is not None
    assert stored["metadata"]["deletionTimestamp"]
    reconciler.reconcile(Key(reconciler.watch.controller_name, NS, NAME))
    assert runner.requests == []
    stored = world.stored()
    assert stored is None or not stored["metadata"].get("finalizers")


def test_a_bad_observe_only_annotation_runs_nothing_and_is_reported(world: World) -> None:
    runner = FakeRunner()
    reconciler = world.reconciler(runner)
    world.create()
    world.kube.edit(WIDGETS, namespace=NS, name=NAME, change=_annotate({"observe-only": "yes"}))
    outcome = reconciler.reconcile(Key(reconciler.watch.controller_name, NS, NAME))
    assert outcome.error is not None
    assert runner.requests == []
    assert world.condition("Failure")[1] == "True"
    assert world.events_seen() == [
        (
            "Warning",
            "ReconcileError",
            'Unable to parse observe-only annotation: \'yes\' is not "true" or "false"',
        )
    ]


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ({PREFIX + "observe-only": "true"}, {}, Priority.CHANGE),
        ({PREFIX + "observe-only": "true"}, {PREFIX + "observe-only": "false"}, Priority.CHANGE),
        ({}, {PREFIX + "drift-check-period": "1m"}, Priority.CHANGE),
        ({}, {"other": "x"}, None),  # other annotations only with watchAnnotationsChanges
    ],
)
def test_drift_annotations_changes_trigger_without_watch_annotations_changes(
    before: dict[str, str], after: dict[str, str], expected: Priority | None
) -> None:
    queue = WorkQueue(total_limit=2, backoff_base=1.0, backoff_max=10.0)
    primary = PrimaryWatch(WATCH, queue)
    meta = {"name": NAME, "namespace": NS, "generation": 1}
    primary.handle("ADDED", {"metadata": {**meta, "annotations": before}})
    assert queue.get(timeout=0) == KEY
    queue.done(KEY)
    assert primary.handle("MODIFIED", {"metadata": {**meta, "annotations": after}}) == expected


def test_in_sharded_mode_only_the_gates_crs_are_planned(kube: FakeKube) -> None:
    planner = Planner(IN_SYNC)
    asked: list[Key] = []

    def not_mine(key: Key, res: ResourceInfo, obj: dict[str, Any]) -> Outcome:
        asked.append(key)
        return Outcome()

    check = DriftChecker(
        watch=WATCH,
        gvk="g",
        kube=kube,
        planner=planner,
        events=FakeEvents(),
        gauge=Gauge(),
        gate=not_mine,
    )
    assert check.check(KEY) == 5.0  # looked at again a period later
    assert asked == [KEY]
    assert planner.planned == []
    stored = kube.stored(WIDGETS, namespace=NS, name=NAME)
    assert stored is not None
    assert "status" not in stored


# -- the gauge: a CR no longer checked is no longer counted ---------------------------


def test_a_cr_deleted_during_its_check_leaves_the_gauge(
    kube: FakeKube, scheduled: tuple[WorkQueue, Planner, DriftScheduler, FakeClock]
) -> None:
    queue, planner, scheduler, clock = scheduled
    gauge = scheduler._checkers[KEY.controller].gauge
    assert isinstance(gauge, Gauge)
    planner.answers[:] = [DRIFTED]
    planner.release.clear()
    body = kube.stored(WIDGETS, namespace=NS, name=NAME) or {}
    scheduler.observe(KEY.controller, "ADDED", body)
    clock.advance(5.0)
    _wake(scheduler)
    assert planner.started.wait(5)
    kube.delete(WIDGETS, namespace=NS, name=NAME)
    scheduler.observe(KEY.controller, "DELETED", body)
    planner.release.set()
    wait_until(lambda: not queue.in_flight())  # the check ended
    wait_until(lambda: KEY not in scheduler._running)
    assert not gauge.values or gauge.values[-1] == 0  # never left counted


def test_a_cr_whose_checks_are_switched_off_leaves_the_gauge(
    kube: FakeKube, scheduled: tuple[WorkQueue, Planner, DriftScheduler, FakeClock]
) -> None:
    _, planner, scheduler, clock = scheduled
    gauge = scheduler._checkers[KEY.controller].gauge
    assert isinstance(gauge, Gauge)
    planner.answers[:] = [DRIFTED]
    scheduler.observe(KEY.controller, "ADDED", kube.stored(WIDGETS, namespace=NS, name=NAME) or {})
    clock.advance(5.0)
    _wake(scheduler)
    wait_until(lambda: gauge.values == [1])
    wait_until(lambda: KEY not in scheduler._running)
    kube.edit(WIDGETS, namespace=NS, name=NAME, change=_annotate({"drift-check-period": "0"}))
    scheduler.observe(
        KEY.controller, "MODIFIED", kube.stored(WIDGETS, namespace=NS, name=NAME) or {}
    )
    assert scheduler.due(KEY) is None
    assert gauge.values[-1] == 0


def test_a_cr_of_another_replica_is_not_counted_here(kube: FakeKube) -> None:
    gauge = Gauge()
    mine = [True]

    def gate(key: Key, res: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any] | Outcome:
        return obj if mine[0] else Outcome()

    check = DriftChecker(
        watch=WATCH,
        gvk="g",
        kube=kube,
        planner=Planner(DRIFTED),
        events=FakeEvents(),
        gauge=gauge,
        gate=gate,
    )
    check.check(KEY)
    assert gauge.values == [1]
    mine[0] = False  # handed over: the new owner counts it
    check.check(KEY)
    assert gauge.values[-1] == 0


# -- shutdown: running checks are cancelled, write nothing and free their key ------------


def test_stopping_cancels_a_running_check_which_writes_nothing(kube: FakeKube) -> None:
    clock = FakeClock()
    queue = WorkQueue(total_limit=2, backoff_base=1.0, backoff_max=10.0, clock=clock)
    cancel = threading.Event()
    started = threading.Event()

    def planner(watch: Watch, resource: ResourceInfo, obj: dict[str, Any]) -> Findings:
        started.set()
        assert cancel.wait(10), "the running plan was not cancelled"
        return Findings(drifted=(), error="Ansible run canceled: killed")

    check = DriftChecker(
        watch=WATCH,
        gvk="g",
        kube=kube,
        planner=planner,
        events=FakeEvents(),
        gauge=Gauge(),
        cancel=cancel,
    )
    scheduler = DriftScheduler(
        queue=queue,
        checkers={KEY.controller: check},
        clock=clock,
        jitter=lambda: 1.0,
        cancel=cancel,
    )
    scheduler.start()
    scheduler.observe(KEY.controller, "ADDED", kube.stored(WIDGETS, namespace=NS, name=NAME) or {})
    clock.advance(5.0)
    _wake(scheduler)
    assert started.wait(5)
    scheduler.stop(grace=5)
    assert not any(thread.is_alive() for thread in scheduler._threads)
    assert queue.in_flight() == 0  # the key is free again
    stored = kube.stored(WIDGETS, namespace=NS, name=NAME)
    assert stored is not None
    assert "status" not in stored  # no Drifted=Unknown from a cancelled check


def test_a_failed_status_write_is_logged_by_name_not_with_the_crs_metadata(
    kube: FakeKube, caplog: pytest.LogCaptureFixture
) -> None:
    applied = '{"spec":{"password":"hunter2"}}'  # kubectl apply keeps the whole CR here

    def annotated(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"] = {
            "kubectl.kubernetes.io/last-applied-configuration": applied
        }

    kube.edit(WIDGETS, namespace=NS, name=NAME, change=annotated)

    def refuse(res: ResourceInfo, obj: Any) -> dict[str, Any]:
        raise KubeUnavailable("the API server is away")

    kube.replace_status = refuse  # type: ignore[method-assign]
    check = checker(kube, Planner(DRIFTED), FakeEvents(), Gauge())
    assert check.check(KEY) == 5.0
    [warning] = [r for r in caplog.records if "Drifted condition" in r.getMessage()]
    assert "hunter2" not in warning.getMessage()
    assert str(KEY) in warning.getMessage()


def test_claims_are_not_counted_as_active_reconcile_workers() -> None:
    seen = Recorder()
    queue = WorkQueue(total_limit=3, backoff_base=1.0, backoff_max=10.0, observer=seen)
    other = Key(KEY.controller, NS, "other")
    assert queue.claim(KEY)  # a drift check
    queue.add(other)
    assert queue.get(timeout=0) == other  # a reconcile beside it
    queue.done(other)
    queue.release(KEY)
    # Else the gauge stays at 1 with nothing running once the check has ended.
    assert seen.of("active") == [(KEY.controller, 1), (KEY.controller, 0)]
