"""The reconcile path in memory: Reconciler with the shipped FakeKube, FakeEvents and FakeRunner.

Each test creates a CR in a FakeKube, reconciles its key once (or through a
real WorkQueue and WorkerPool on a fake clock) and checks what a user would
see: the stored status conditions, the Events, what the runner was asked,
and what the queue does next. The run's token and kubeconfig come from a
real RunAccess, so their clean-up is checked too.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.clocks import FakeClock
from ansible_operator.config.watches import GVK, Finalizer, Watch
from ansible_operator.controller.contract import Key, Outcome, run_label
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.controller.reconciler import Reconciler, RunFailed
from ansible_operator.controller.workers import WorkerPool
from ansible_operator.errors import Conflict, InvalidResource, Permanent, RetryLater, RunSetupError
from ansible_operator.kube.client import ResourceInfo
from ansible_operator.kube.fakekube import FakeEvents, FakeKube
from ansible_operator.launch import request as request_module
from ansible_operator.launch.access import RunAccess
from ansible_operator.launch.request import RunSettings
from ansible_operator.proxy import RunCredentials
from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.base import Runner, RunOutcome, RunRequest, RunResult
from ansible_operator.runner.fakerunner import FakeRunner, Script
from tests.unit.controller.test_workers import settle, tick, wait_until

WIDGETS = ResourceInfo(
    group="test.example.com",
    version="v1alpha1",
    kind="Widget",
    plural="widgets",
    namespaced=True,
    has_status=True,
)
GVK_ = GVK(WIDGETS.group, WIDGETS.version, WIDGETS.kind)
FINALIZER = "test.example.com/cleanup"
PERIOD = 3600.0
NS, NAME = "ns", "w"
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)

Conditions = list[tuple[str, str, str, str]]

SUCCEEDED: Conditions = [
    ("Running", "True", "Successful", "Awaiting next reconciliation"),
    ("Successful", "True", "Successful", "Last reconciliation succeeded"),
    ("Failure", "False", "", ""),
]


class Hooks:
    """RunMetrics and ReconcileMetrics that write down what metrics would have been told."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs: list[str] = []
        self.results: list[str] = []

    def run_finished(self, *, gvk: str, outcome: RunOutcome | None, seconds: float) -> None:
        with self._lock:
            self.runs.append(run_label(outcome))

    def reconciled(self, *, controller: str, result: str, seconds: float) -> None:
        with self._lock:
            self.results.append(result)

    def count(self) -> int:
        with self._lock:
            return len(self.results)


class RecordingAccess(RunAccess):
    """The real RunAccess, noting the path of every kubeconfig it hands out."""

    def __init__(self, *, credentials: RunCredentials, proxy_url: str) -> None:
        super().__init__(credentials=credentials, proxy_url=proxy_url)
        self.kubeconfigs: list[Path] = []

    @contextlib.contextmanager
    def kubeconfig_for(
        self, obj: Mapping[str, Any], *, controller: str, notes: Any = None
    ) -> Iterator[Path]:
        with super().kubeconfig_for(obj, controller=controller, notes=notes) as path:
            self.kubeconfigs.append(path)
            yield path


@dataclass
class World:
    """One operator's view of one fake cluster."""

    tmp: Path
    kube: FakeKube = field(default_factory=lambda: FakeKube(WIDGETS))
    events: FakeEvents = field(default_factory=FakeEvents)
    hooks: Hooks = field(default_factory=Hooks)
    credentials: RunCredentials = field(default_factory=RunCredentials)
    accesses: list[RecordingAccess] = field(default_factory=list)
    running_delay: float = 0.0

    def reconciler(
        self,
        runner: Runner,
        *,
        finalizer: bool = False,
        manage_status: bool = True,
        ansible_args: str = "",
    ) -> Reconciler:
        role = self.tmp / "roles" / "widget"
        role.mkdir(parents=True, exist_ok=True)
        watch = Watch(
            gvk=GVK_,
            role=role,
            manage_status=manage_status,
            finalizer=Finalizer(name=FINALIZER, role=self.tmp / "roles" / "cleanup")
            if finalizer
            else None,
        )
        access = RecordingAccess(credentials=self.credentials, proxy_url="http://127.0.0.1:1")
        self.accesses.append(access)
        return Reconciler(
            watch=watch,
            kube=self.kube,
            runner=runner,
            settings=RunSettings(
                reconcile_period=PERIOD,
                ansible_args=ansible_args,
                ansible_log_events="Nothing",
                runner_root=self.tmp / "runs",
                run_timeout=None,
                running_delay=self.running_delay,  # 0: Running before the run, as Go
            ),
            events=self.events,
            hooks=self.hooks,
            access=access,
            cancel=threading.Event(),
            now=lambda: NOW,
        )

    def create(self, spec: dict[str, Any] | None = None) -> dict[str, Any]:
        body = {"metadata": {"name": NAME}, "spec": spec or {"size": 3}}
        return self.kube.create(WIDGETS, namespace=NS, body=body)

    def stored(self) -> dict[str, Any] | None:
        return self.kube.stored(WIDGETS, namespace=NS, name=NAME)

    def conditions(self) -> Conditions:
        obj = self.stored()
        assert obj is not None
        return [
            (c["type"], c["status"], c["reason"], c["message"])
            for c in obj.get("status", {}).get("conditions", [])
        ]

    def condition(self, ctype: str) -> tuple[str, str, str, str]:
        [found] = [c for c in self.conditions() if c[0] == ctype]
        return found

    def events_seen(self) -> list[tuple[str, str, str]]:
        return [(e.type, e.reason, e.message) for e in self.events.events]


def key_of(reconciler: Reconciler) -> Key:
    return Key(controller=reconciler.watch.controller_name, namespace=NS, name=NAME)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp=tmp_path)
    yield made
    for access in made.accesses:
        access.close()


def assert_run_access_cleaned(world: World) -> None:
    """Every token revoked and every run kubeconfig deleted once the reconcile is over."""
    assert len(world.credentials) == 0
    kubeconfigs = [path for access in world.accesses for path in access.kubeconfigs]
    assert kubeconfigs
    assert not [path for path in kubeconfigs if path.exists()]


# -- one reconcile, table-driven by what the run does ----------------------------------


@dataclass(frozen=True)
class RunCase:
    script: Script
    conditions: Conditions
    events: list[tuple[str, str, str]]
    run_outcome: str
    error: type[BaseException] | None
    requeue_after: float | None


ROLE_EVENT = ("Normal", "Running", "Running role {role}")
RUN_CASES = {
    "success": RunCase(
        script=FakeRunner.successful(ok=4),
        conditions=SUCCEEDED,
        events=[
            ROLE_EVENT,
            ("Normal", "Successful", "Ansible run succeeded: ok=4 changed=0 skipped=0"),
        ],
        run_outcome="successful",
        error=None,
        requeue_after=PERIOD,
    ),
    "success with requeue_after from the role": RunCase(
        script=FakeRunner.successful(requeue_after=5.0),
        conditions=SUCCEEDED,
        events=[
            ROLE_EVENT,
            ("Normal", "Successful", "Ansible run succeeded: ok=1 changed=0 skipped=0"),
        ],
        run_outcome="successful",
        error=None,
        requeue_after=5.0,
    ),
    "failed task": RunCase(
        script=FakeRunner.failed("size must be odd", task="Check size"),
        conditions=[
            ("Running", "False", "Running", "Running reconciliation"),
            ("Failure", "True", "Failed", "size must be odd"),
            ("Successful", "False", "", ""),
        ],
        events=[ROLE_EVENT, ("Warning", "Failed", 'Task "Check size" failed: size must be odd')],
        run_outcome="failed",
        error=RunFailed,
        requeue_after=None,
    ),
    "timeout": RunCase(
        script=FakeRunner.timed_out(after=90.0),
        conditions=[
            ("Running", "False", "Running", "Running reconciliation"),
            ("Failure", "True", "Failed", "Ansible run timed out after 90s"),
        ],
        events=[ROLE_EVENT, ("Warning", "Failed", "Ansible run timed out after 90s")],
        run_outcome="timeout",
        error=RunFailed,
        requeue_after=None,
    ),
    "no recap (role not found)": RunCase(
        script=FakeRunner.errored("ERROR! the role 'widget' was not found"),
        conditions=[
            ("Running", "False", "Running", "Running reconciliation"),
            (
                "Failure",
                "True",
                "Failed",
                "Ansible run did not complete: ERROR! the role 'widget' was not found",
            ),
        ],
        events=[
            ROLE_EVENT,
            (
                "Warning",
                "Failed",
                "Ansible run did not complete: ERROR! the role 'widget' was not found",
            ),
        ],
        run_outcome="error",
        error=RunFailed,
        requeue_after=None,
    ),
    "run cannot be set up": RunCase(
        script=RunSetupError("cannot use ANSIBLE_INVENTORY='/nope': No such file"),
        conditions=[
            ("Running", "False", "Running", "Running reconciliation"),
            (
                "Failure",
                "True",
                "Failed",
                "Ansible run could not start: cannot use ANSIBLE_INVENTORY='/nope': No such file",
            ),
        ],
        events=[
            ROLE_EVENT,
            (
                "Warning",
                "Failed",
                "Ansible run could not start: cannot use ANSIBLE_INVENTORY='/nope': No such file",
            ),
        ],
        run_outcome="error",
        error=RunSetupError,
        requeue_after=PERIOD,
    ),
    "OS error while setting up": RunCase(
        script=OSError(28, "No space left on device"),
        conditions=[
            ("Running", "False", "Running", "Running reconciliation"),
            (
                "Failure",
                "True",
                "Failed",
                "Ansible run could not start: [Errno 28] No space left on device",
            ),
        ],
        events=[
            ROLE_EVENT,
            (
                "Warning",
                "Failed",
                "Ansible run could not start: [Errno 28] No space left on device",
            ),
        ],
        run_outcome="error",
        error=RetryLater,
        requeue_after=None,
    ),
}


@pytest.mark.parametrize("case", RUN_CASES.values(), ids=RUN_CASES.keys())
def test_one_reconcile_reports_what_the_run_did(world: World, case: RunCase) -> None:
    runner = FakeRunner([case.script])
    reconciler = world.reconciler(runner)
    world.create({"size": 3})

    outcome = reconciler.reconcile(key_of(reconciler))

    assert world.conditions() == case.conditions
    role = reconciler.watch.role
    assert world.events_seen() == [(t, r, m.format(role=role)) for t, r, m in case.events]
    assert world.hooks.runs == [case.run_outcome]
    assert outcome.requeue_after == case.requeue_after
    failure = outcome.terminal if outcome.terminal is not None else outcome.error
    if case.error is None:
        assert failure is None
    else:
        assert type(failure) is case.error
        assert (outcome.terminal is not None) is issubclass(case.error, Permanent)
    [request] = runner.requests
    assert request.extravars["size"] == 3
    assert request.role == role
    assert_run_access_cleaned(world)


# -- runs that cannot be set up --------------------------------------------------------


def test_a_missing_inventory_in_the_real_runner_ends_as_failure(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = world.tmp / "no-such-inventory"
    monkeypatch.setenv("ANSIBLE_INVENTORY", str(missing))
    reconciler = world.reconciler(AnsibleRunner(root=world.tmp / "runs"))
    world.create()

    outcome = reconciler.reconcile(key_of(reconciler))

    assert isinstance(outcome.terminal, RunSetupError)
    assert outcome.requeue_after == PERIOD
    failure = world.conditions()[-1]
    assert failure[:3] == ("Failure", "True", "Failed")
    assert failure[3].startswith(
        f"Ansible run could not start: cannot use ANSIBLE_INVENTORY='{missing}'"
    )
    assert "No such file or directory" in failure[3]
    assert world.events_seen()[-1] == ("Warning", "Failed", failure[3])
    assert_run_access_cleaned(world)


def test_unparsable_ansible_args_in_the_real_runner_end_as_failure(world: World) -> None:
    reconciler = world.reconciler(
        AnsibleRunner(root=world.tmp / "runs"), ansible_args="-e 'token=hunter2"
    )
    world.create()

    outcome = reconciler.reconcile(key_of(reconciler))

    assert isinstance(outcome.terminal, RunSetupError)
    failure = world.conditions()[-1]
    assert failure[:3] == ("Failure", "True", "Failed")
    assert "--ansible-args" in failure[3]
    assert "No closing quotation" in failure[3]
    # The text can hold credentials; status and Events are readable by CR readers.
    assert "hunter2" not in failure[3]
    assert all("hunter2" not in message for _, _, message in world.events_seen())
    assert [(t, r) for t, r, _ in world.events_seen()] == [
        ("Normal", "Running"),
        ("Warning", "Failed"),
    ]


def test_a_permanent_error_building_extra_vars_ends_as_failure_without_a_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any, **__: Any) -> dict[str, Any]:
        # What launch.extravars raises for a CR it cannot convert.
        raise InvalidResource("spec nested deeper than 100 levels")

    monkeypatch.setattr(request_module, "build_extravars", refuse)
    runner = FakeRunner()
    reconciler = world.reconciler(runner)
    world.create()

    outcome = reconciler.reconcile(key_of(reconciler))

    message = "Ansible run could not start: spec nested deeper than 100 levels"
    assert world.conditions()[-1] == ("Failure", "True", "Failed", message)
    assert world.events_seen() == [("Warning", "Failed", message)]
    assert runner.requests == []
    assert isinstance(outcome.terminal, InvalidResource)
    assert outcome.requeue_after == PERIOD
    assert_run_access_cleaned(world)


def test_without_managed_status_a_setup_error_is_an_event_only(world: World) -> None:
    runner = FakeRunner([RunSetupError("no inventory")])
    reconciler = world.reconciler(runner, manage_status=False)
    world.create()

    reconciler.reconcile(key_of(reconciler))

    assert world.conditions() == []
    assert world.events_seen()[-1] == (
        "Warning",
        "Failed",
        "Ansible run could not start: no inventory",
    )
    assert [c.verb for c in world.kube.calls if c.verb in ("replace_status", "patch")] == []


def test_a_permanent_setup_error_is_reported_once_and_not_retried_until_a_change_or_the_period(
    world: World,
) -> None:
    runner = FakeRunner(default=RunSetupError("no inventory"))
    reconciler = world.reconciler(runner)
    world.create()
    clock = FakeClock()
    queue = WorkQueue(total_limit=2, backoff_base=1.0, backoff_max=1000.0, clock=clock)
    pool = WorkerPool(queue, reconciler.reconcile, workers=1, metrics=world.hooks)
    key = key_of(reconciler)
    try:
        queue.add(key)
        wait_until(lambda: world.hooks.count() == 1)
        settle(queue)
        assert queue.failures(key) == 0
        # Far past every backoff the queue would use (max 1000 s): nothing comes back.
        tick(queue, clock, PERIOD - 1)
        assert queue.depth() == 0
        assert queue.in_flight() == 0
        assert world.hooks.count() == 1
        # The reconcile period comes: one more try, reported once more.
        tick(queue, clock, 1)
        wait_until(lambda: world.hooks.count() == 2)
        settle(queue)
        # A change of the CR (the watch adds its key) is tried at once.
        queue.add(key, priority=Priority.CHANGE)
        wait_until(lambda: world.hooks.count() == 3)
        settle(queue)
    finally:
        assert pool.stop(grace=5.0)
    reasons = [(t, r) for t, r, _ in world.events_seen()]
    assert reasons == [("Normal", "Running"), ("Warning", "Failed")] * 3
    assert len(runner.requests) == 3
    assert world.conditions()[-1][:3] == ("Failure", "True", "Failed")


# -- deletion --------------------------------------------------------------------------


def test_deletion_runs_the_finalizer_then_removes_it_and_the_cr_goes(world: World) -> None:
    runner = FakeRunner()
    reconciler = world.reconciler(runner, finalizer=True)
    world.create()
    first = reconciler.reconcile(key_of(reconciler))
    stored = world.stored()
    assert stored is not None
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert first.requeue_after == PERIOD

    left = world.kube.delete(WIDGETS, namespace=NS, name=NAME)
    assert left is not None  # held by our finalizer
    outcome = reconciler.reconcile(key_of(reconciler))

    assert outcome == Outcome(forget=True)
    assert world.stored() is None
    fin_request = runner.requests[-1]
    assert fin_request.role == world.tmp / "roles" / "cleanup"
    assert [(t, r) for t, r, _ in world.events_seen()][-2:] == [
        ("Normal", "Running"),
        ("Normal", "Finalized"),
    ]
    assert world.events_seen()[-2][2] == f"Running finalizer {fin_request.role}"
    assert_run_access_cleaned(world)


def test_a_failed_finalizer_run_keeps_the_finalizer(world: World) -> None:
    runner = FakeRunner([FakeRunner.successful(), FakeRunner.failed("cannot clean up")])
    reconciler = world.reconciler(runner, finalizer=True)
    world.create()
    reconciler.reconcile(key_of(reconciler))
    world.kube.delete(WIDGETS, namespace=NS, name=NAME)

    outcome = reconciler.reconcile(key_of(reconciler))

    assert isinstance(outcome.error, RunFailed)
    stored = world.stored()
    assert stored is not None
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert world.condition("Failure") == ("Failure", "True", "Failed", "cannot clean up")


def test_a_deleted_cr_without_our_finalizer_is_skipped(world: World) -> None:
    runner = FakeRunner()
    reconciler = world.reconciler(runner, finalizer=True)
    world.kube.create(
        WIDGETS,
        namespace=NS,
        body={"metadata": {"name": NAME, "finalizers": ["someone.else/keep"]}, "spec": {}},
    )
    world.kube.delete(WIDGETS, namespace=NS, name=NAME)

    assert reconciler.reconcile(key_of(reconciler)) == Outcome()
    assert runner.requests == []


# -- status conflicts ------------------------------------------------------------------


def _write_from_elsewhere(world: World) -> None:
    """What k8s_status in a role, or another controller, does: add a key of its own."""
    world.kube.edit(
        WIDGETS,
        namespace=NS,
        name=NAME,
        change=lambda obj: obj.setdefault("status", {}).update(fromRole="kept"),
        subresource="status",
    )


def _during_the_run(world: World) -> Script:
    def run(request: RunRequest) -> RunResult:
        _write_from_elsewhere(world)
        return FakeRunner.successful()

    return run


def _just_before_the_final_write(world: World) -> Script:
    def run(request: RunRequest) -> RunResult:
        world.kube.before_next("replace_status", lambda _: _write_from_elsewhere(world))
        return FakeRunner.successful()

    return run


def _just_before_the_running_write(world: World) -> Script:
    world.kube.before_next("replace_status", lambda _: _write_from_elsewhere(world))
    return FakeRunner.successful()


CONFLICTS: dict[str, Callable[[World], Script]] = {
    "the role writes status during the run": _during_the_run,
    "another client writes just before the final status write": _just_before_the_final_write,
    "another client writes just before the Running write": _just_before_the_running_write,
}


@pytest.mark.parametrize("make_script", CONFLICTS.values(), ids=CONFLICTS.keys())
def test_a_status_conflict_is_retried_on_the_freshest_object(
    world: World, make_script: Callable[[World], Script]
) -> None:
    world.create()
    reconciler = world.reconciler(FakeRunner([make_script(world)]))

    outcome = reconciler.reconcile(key_of(reconciler))

    assert outcome.error is None
    stored = world.stored()
    assert stored is not None
    assert stored["status"]["fromRole"] == "kept"
    assert world.conditions() == SUCCEEDED
    verbs = [c.verb for c in world.kube.calls if c.verb != "resource"]
    # The first GET, then one write refused as stale and re-read; nothing else.
    assert sorted(verbs) == ["create", "get_or_none", "get_or_none"] + ["replace_status"] * 3


def test_an_injected_conflict_is_retried_and_endless_ones_retry_later(world: World) -> None:
    runner = FakeRunner()
    reconciler = world.reconciler(runner)
    world.create()
    world.kube.fail_next("replace_status", Conflict(409, "injected"))

    assert reconciler.reconcile(key_of(reconciler)).error is None
    assert world.conditions() == SUCCEEDED

    world.kube.fail_next("replace_status", Conflict(409, "injected"), times=100)
    with pytest.raises(RetryLater, match="still conflicting"):
        reconciler.reconcile(key_of(reconciler))
    assert len(runner.requests) == 1  # the Running write failed: no run


def test_a_cr_gone_before_the_reconcile_is_forgotten(world: World) -> None:
    runner = FakeRunner()
    reconciler = world.reconciler(runner)

    assert reconciler.reconcile(key_of(reconciler)) == Outcome(forget=True)
    assert runner.requests == []
    assert world.events.events == []
