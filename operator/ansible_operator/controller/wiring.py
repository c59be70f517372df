"""The reconcile machinery of `ansible-operator run`: built after leadership, stopped in order.

Where it sits: controller/manager.py calls `build()` once this replica leads
(or once leader election is off), hands `Machinery.primaries` to
controller/kopfrun.py, and calls `Machinery.stop()` when the watches end.

Built in this order, each part using the ones before:

1. the work queue (controller/queue.py) and the dependent watches that feed it;
2. in sharded mode, this replica's shard (controller/sharding): its Lease exists
   and the members are known before the first event;
3. the API proxy every run talks to (proxy), and run access (launch/access.py),
   which gives each run a token for it, in the lifeline's private directory;
4. the warm Ansible servers (warm/supervisor.py) and the one Ansible runner that
   reconciles and drift checks share (runner/ansible.py);
5. one reconciler per watch (controller/reconciler.py) and the worker pool that
   calls them (controller/workers.py);
6. the drift-check scheduler (controller/driftchecks.py) with the planning engine
   (plan/engine.py), and the primary watches' predicates (controller/watching.py)
   with each watch's restart rule (controller/restartrule.py);
7. the sweep of runner directories of deleted resources (controller/rundirsweep.py).

Stopped in the reverse order of need: drift checks first (they change nothing),
then the worker pool (running Ansible gets the graceful-shutdown time, then is
cancelled), the shard Lease (released after the last run), dependent watches,
the proxy, run access and the warm servers.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ansible_operator.compat.mode import CompatMode
from ansible_operator.config import defaults
from ansible_operator.config.options import RunOptions
from ansible_operator.config.watches import Watch
from ansible_operator.controller.contract import Gate, Key, Outcome
from ansible_operator.controller.dependents import DependentWatches
from ansible_operator.controller.driftchecks import DriftScheduler, build_scheduler
from ansible_operator.controller.metricshooks import MetricsHooks
from ansible_operator.controller.queue import WorkQueue
from ansible_operator.controller.reconciler import Reconciler
from ansible_operator.controller.restartrule import RestartRule
from ansible_operator.controller.rundirsweep import start_sweep
from ansible_operator.controller.sharding.shard import Shard, make_shard
from ansible_operator.controller.sharding.shardoptions import ShardOptions
from ansible_operator.controller.watchbodies import WatchBodies
from ansible_operator.controller.watching import PrimaryWatch
from ansible_operator.controller.workers import WorkerPool
from ansible_operator.kube.client import Kube, ResourceInfo
from ansible_operator.launch.access import RunAccess
from ansible_operator.launch.request import RunSettings
from ansible_operator.observability.eventrecorder import EventRecorder
from ansible_operator.observability.metrics import OperatorMetrics
from ansible_operator.proxy import ApiProxy, RunCredentials
from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.lifeline import Lifeline
from ansible_operator.warm.supervisor import WarmServers, start_warm_servers

if TYPE_CHECKING:
    from ansible_operator.plan.engine import Findings

__all__ = ["Basics", "Machinery", "build"]

log = logging.getLogger("ansible_operator.manager")


@dataclass(frozen=True)
class Basics:
    """What the manager has before the machinery: flags, watches, clients, flags."""

    options: RunOptions
    watches: list[Watch]
    kube: Kube
    events: EventRecorder
    metrics: OperatorMetrics
    hooks: MetricsHooks
    lifeline: Lifeline
    election_namespace: Callable[[], str]
    stop_flag: threading.Event  # set to stop the operator
    cancel_runs: threading.Event  # set to kill running Ansible
    on_lost_shard: Callable[[], None]
    # The 2.18 compatibility mode, resolved and applied by the manager before the warm
    # servers start; the proxy and the drift checks' plans follow it (compat.mode).
    compat: CompatMode


@dataclass
class Machinery:
    queue: WorkQueue
    dependents: DependentWatches
    shard: Shard | None
    proxy: ApiProxy
    access: RunAccess
    warm: WarmServers | None
    pool: WorkerPool
    drift: DriftScheduler
    primaries: list[PrimaryWatch]

    def stop(self, *, grace: float, cancel_runs: threading.Event) -> None:
        """Stop everything, in the order the module docstring gives."""
        # Checks change nothing: cancel them now rather than wait for them.
        self.drift.stop(grace=defaults.DRIFT_CHECK_STOP_GRACE)
        log.info("Stopping: waiting up to %ss for running Ansible", grace)
        if not self.pool.stop(grace=grace, cancel=cancel_runs.set):
            log.warning("some Ansible runs did not stop in time")
        if self.shard is not None:
            self.shard.stop()  # after the last run: the others take over at once
        self.dependents.stop()
        self.proxy.stop()
        self.access.close()
        if self.warm is not None:
            self.warm.stop()


def build(basics: Basics) -> Machinery | None:
    """The machinery, started; None when the shard could not be joined before a stop."""
    opts = basics.options
    queue = WorkQueue(
        total_limit=opts.max_concurrent_reconciles_total,
        backoff_base=defaults.RETRY_BACKOFF_BASE,
        backoff_max=defaults.RETRY_BACKOFF_MAX,
        observer=basics.metrics,
    )
    dependents = DependentWatches(
        kube=basics.kube,
        queue=queue,
        namespaces=tuple(opts.namespaces),
        primaries={w.controller_name: w for w in basics.watches},
    )
    shard = _shard(basics, queue)
    if shard is not None and not shard.start(basics.stop_flag):
        return None
    proxy, access = _proxy_and_access(basics, dependents)
    # After leadership, before the first run; stopped after the last run.
    warm = start_warm_servers(
        enabled=opts.warm_ansible,
        runner_root=Path(opts.runner_dir),
        extra_env=basics.lifeline.env(),
        idle_timeout=opts.warm_idle_timeout,
    )
    runner = AnsibleRunner(root=Path(opts.runner_dir), warm=warm, extra_env=basics.lifeline.env())
    gate = shard.gate if shard is not None else None
    restarts = {w.controller_name: _restart_rule(basics, w) for w in basics.watches}
    bodies = {w.controller_name: WatchBodies() for w in basics.watches}
    reconcilers = _reconcilers(
        basics, queue, access, runner, gate=gate, restarts=restarts, bodies=bodies
    )
    pool = WorkerPool(
        queue,
        lambda key: _handle(reconcilers, key),
        workers=opts.max_concurrent_reconciles_total,
        metrics=basics.hooks,
    )
    drift = _drift(basics, queue, runner, gate=gate)
    primaries = [
        PrimaryWatch(
            w,
            queue,
            on_object=_object_hook(basics, w, shard, drift),
            restart=restarts[w.controller_name],
            bodies=bodies[w.controller_name],
        )
        for w in basics.watches
    ]
    start_sweep(basics.kube, basics.watches, root=Path(opts.runner_dir), namespaces=opts.namespaces)
    return Machinery(queue, dependents, shard, proxy, access, warm, pool, drift, primaries)


def _handle(reconcilers: Mapping[str, Reconciler], key: Key) -> Outcome:
    return reconcilers[key.controller].reconcile(key)


def _shard(basics: Basics, queue: WorkQueue) -> Shard | None:
    opts = basics.options
    if not opts.sharding:
        return None
    settings = ShardOptions(
        namespace=basics.election_namespace(),
        group=opts.leader_election_id,
        lease_duration=opts.leader_elect_lease_duration,
        renew_deadline=opts.leader_elect_renew_deadline,
        retry_period=opts.leader_elect_retry_period,
        load_factor=defaults.SHARDING_LOAD_FACTOR,
    )
    return make_shard(
        basics.kube,
        settings,
        queue=queue,
        registry=basics.metrics.registry,
        on_lost=basics.on_lost_shard,
    )


def _proxy_and_access(basics: Basics, dependents: DependentWatches) -> tuple[ApiProxy, RunAccess]:
    opts = basics.options
    credentials = RunCredentials()
    proxy = ApiProxy(
        upstream=basics.kube.login,
        credentials=credentials,
        kube=basics.kube,
        inject_owner_ref=opts.inject_owner_ref,
        # As in the Go operator, no owner injection also means no dependent watches.
        on_touch=dependents.touched if opts.inject_owner_ref else None,
        bind=f"127.0.0.1:{opts.proxy_port}",
        compat_restores=basics.compat.restores,
        # Warning Events of the requests proxy.screen refuses.
        events=basics.events,
    )
    proxy.start()
    if not opts.inject_owner_ref:
        log.warning("Warning: injection of owner references and dependent watches is turned off")
    access = RunAccess(
        credentials=credentials, proxy_url=proxy.url, parent=basics.lifeline.private_dir
    )
    return proxy, access


def _reconcilers(
    basics: Basics,
    queue: WorkQueue,
    access: RunAccess,
    runner: AnsibleRunner,
    *,
    gate: Gate | None,
    restarts: Mapping[str, RestartRule],
    bodies: Mapping[str, WatchBodies],
) -> dict[str, Reconciler]:
    opts = basics.options
    settings = RunSettings(
        reconcile_period=opts.reconcile_period,
        ansible_args=opts.ansible_args,
        ansible_log_events=opts.ansible_log_events,
        runner_root=Path(opts.runner_dir),
        run_timeout=opts.ansible_run_timeout or None,
        running_delay=opts.running_condition_delay,
        count_notice=basics.hooks.compat_deprecation,
    )
    reconcilers = {}
    for watch in basics.watches:
        name = watch.controller_name
        queue.set_limit(name, watch.max_concurrent_reconciles)
        basics.metrics.register_controller(
            controller=name,
            gvk=MetricsHooks.gvk_of(watch),
            max_concurrent_reconciles=watch.max_concurrent_reconciles,
        )
        reconcilers[name] = Reconciler(
            watch=watch,
            kube=basics.kube,
            runner=runner,
            settings=settings,
            events=basics.events,
            hooks=basics.hooks,
            access=access,
            cancel=basics.cancel_runs,
            gate=gate,
            restart=restarts[name],
            bodies=bodies[name],
        )
    return reconcilers


def _restart_rule(basics: Basics, watch: Watch) -> RestartRule:
    opts = basics.options
    return RestartRule(
        watch,
        ansible_args=opts.ansible_args,
        period=watch.reconcile_period or opts.reconcile_period,
        rerun_all=opts.reconcile_all_at_start,
    )


def _drift(
    basics: Basics, queue: WorkQueue, runner: AnsibleRunner, *, gate: Gate | None
) -> DriftScheduler:
    # Its own: drift checks are cancelled at shutdown before the grace reconciles
    # get (the scheduler's stop() sets it).
    cancel = threading.Event()
    planner = functools.partial(
        _plan_drift,
        kube=basics.kube,
        runner=runner,
        ansible_args=basics.options.ansible_args,
        inject_owner_ref=basics.options.inject_owner_ref,
        cancel=cancel,
        compat_restores=basics.compat.restores,
    )
    drift = build_scheduler(
        basics.watches,
        queue=queue,
        planner=planner,
        kube=basics.kube,
        events=basics.events,
        gauge=basics.metrics,
        gate=gate,
        cancel=cancel,
    )
    drift.start()
    return drift


def _plan_drift(
    watch: Watch,
    resource: ResourceInfo,
    obj: dict[str, Any],
    *,
    kube: Kube,
    runner: AnsibleRunner,
    ansible_args: str,
    inject_owner_ref: bool,
    cancel: threading.Event,
    compat_restores: bool,
) -> Findings:
    # The planning engine (plan/: the journal, difflib, report) is imported by the
    # first drift check, not at start-up: most operators never run one.
    from ansible_operator.plan.engine import drift_findings  # noqa: PLC0415

    return drift_findings(
        watch,
        resource,
        obj,
        kube=kube,
        runner=runner,
        ansible_args=ansible_args,
        inject_owner_ref=inject_owner_ref,
        cancel=cancel,
        compat_restores=compat_restores,
    )


def _object_hook(
    basics: Basics, watch: Watch, shard: Shard | None, drift: DriftScheduler
) -> Callable[[str, Mapping[str, Any]], None]:
    name = watch.controller_name

    def seen(event_type: str, body: Mapping[str, Any]) -> None:
        basics.hooks.object_seen(watch, event_type, body)
        if shard is not None:
            shard.observe(name, event_type, body)
        drift.observe(name, event_type, body)

    return seen
