"""The Running condition and Event only for runs that last (controller/runningmark.py),
through the real reconciler on FakeKube."""

from __future__ import annotations

import threading
from pathlib import Path

from ansible_operator.runner.fakerunner import FakeRunner
from tests.unit.controller.test_reconcile_path import World, key_of
from tests.unit.controller.test_workers import wait_until


def status_writes(world: World) -> int:
    return sum(1 for call in world.kube.calls if call.verb == "replace_status")


def test_a_short_run_goes_straight_to_successful(tmp_path: Path) -> None:
    world = World(tmp=tmp_path, running_delay=30.0)
    reconciler = world.reconciler(FakeRunner([FakeRunner.successful()]))
    world.create()
    reconciler.reconcile(key_of(reconciler))
    assert status_writes(world) == 1  # Successful only
    assert [r for _t, r, _m in world.events_seen()] == ["Successful"]
    assert world.condition("Successful")[1] == "True"
    assert world.condition("Running")[2] == "Successful"  # as after any successful run


def test_a_run_that_lasts_shows_running_while_it_runs(tmp_path: Path) -> None:
    world = World(tmp=tmp_path, running_delay=0.05)
    runner = FakeRunner([FakeRunner.successful()])
    reconciler = world.reconciler(runner)
    world.create()
    runner.hold()
    done = threading.Event()
    worker = threading.Thread(target=lambda: (reconciler.reconcile(key_of(reconciler)), done.set()))
    worker.start()
    try:
        wait_until(lambda: ("Running", "True", "Running") in [c[:3] for c in world.conditions()])
        assert [r for _t, r, _m in world.events_seen()] == ["Running"]
    finally:
        runner.release()
        worker.join(30)
    assert done.is_set()
    assert status_writes(world) == 2  # Running, then Successful from its response
    assert [r for _t, r, _m in world.events_seen()] == ["Running", "Successful"]
    assert world.condition("Successful")[1] == "True"
