"""A reconcile the watch caused starts from the body the watch saw: no GET
(controller/watchbodies.py, through the primary watch and the reconciler)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible_operator.controller.queue import WorkQueue
from ansible_operator.controller.watchbodies import WatchBodies
from ansible_operator.controller.watching import PrimaryWatch
from ansible_operator.runner.fakerunner import FakeRunner
from tests.unit.controller.test_reconcile_path import NAME, NS, WIDGETS, World, key_of


def setup(tmp_path: Path) -> tuple[World, Any, PrimaryWatch, WatchBodies]:
    world = World(tmp=tmp_path)
    bodies = WatchBodies()
    reconciler = world.reconciler(FakeRunner(default=FakeRunner.successful()))
    reconciler.bodies = bodies
    queue = WorkQueue(total_limit=2, backoff_base=1.0, backoff_max=10.0)
    primary = PrimaryWatch(reconciler.watch, queue, bodies=bodies)
    return world, reconciler, primary, bodies


def gets(world: World) -> int:
    return sum(1 for call in world.kube.calls if call.verb in {"get", "get_or_none"})


def test_a_reconcile_the_watch_caused_needs_no_get(tmp_path: Path) -> None:
    world, reconciler, primary, bodies = setup(tmp_path)
    created = world.create()
    primary.handle("ADDED", created)
    assert len(bodies) == 1
    before = gets(world)
    outcome = reconciler.reconcile(key_of(reconciler))
    assert outcome.error is None
    assert outcome.terminal is None
    assert gets(world) == before  # the watch's body, not a live read
    assert len(bodies) == 0  # taken
    assert world.condition("Successful")[1] == "True"


def test_later_events_refresh_the_kept_body_and_a_deletion_drops_it(tmp_path: Path) -> None:
    world, reconciler, primary, bodies = setup(tmp_path)
    created = world.create()
    primary.handle("ADDED", created)
    newer = world.kube.edit(WIDGETS, namespace=NS, name=NAME, change=lambda o: None)
    primary.handle("MODIFIED", newer)  # no new generation: not queued again, but fresher
    taken = bodies.take(key_of(reconciler))
    assert taken is not None
    assert taken["metadata"]["resourceVersion"] == newer["metadata"]["resourceVersion"]
    primary.handle("MODIFIED", {**newer, "metadata": {**newer["metadata"], "generation": 9}})
    primary.handle("DELETED", newer)
    assert bodies.take(key_of(reconciler)) is None  # the reconcile must see it live


def test_a_periodic_reconcile_reads_live(tmp_path: Path) -> None:
    world, reconciler, _primary, bodies = setup(tmp_path)
    world.create()
    before = gets(world)
    reconciler.reconcile(key_of(reconciler))  # nothing kept: a resync
    assert gets(world) == before + 1
    assert len(bodies) == 0
