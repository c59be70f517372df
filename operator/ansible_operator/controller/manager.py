"""`ansible-operator run`: wire watches.yaml, kopf, the work queue, reconcilers and servers.

Called by the cli module with parsed `RunOptions`. Start-up order: logging,
watches.yaml (a bad file exits 1 before anything is watched), the Kubernetes
client, health and metrics servers (a port in use exits 1), leader election
(when enabled: nothing is reconciled until this replica leads), then, with
`--sharding`, joining the shard group (controller.sharding: the queue admits
and the reconciler runs only this replica's CRs), then the worker pool and
kopf. kopf runs in the main thread's event loop; SIGTERM and SIGINT set the
stop flag kopf watches (see `_take_over_signals`). When kopf
returns, the pool stops taking work, running Ansible gets
`--graceful-shutdown-timeout` to finish, then is cancelled (its process group
killed), the shard member Lease (if any) is released, and the process exits 0.
Losing the leader lease or the member Lease exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kopf

from ansible_operator import __version__
from ansible_operator.compat import mode as compat_mode
from ansible_operator.compat.notices import Notice
from ansible_operator.config import defaults
from ansible_operator.config.options import RunOptions
from ansible_operator.config.watches import Watch, load_watches
from ansible_operator.controller.dependents import DependentWatches
from ansible_operator.controller.drift import DriftScheduler, PlannerFactory, build_scheduler
from ansible_operator.controller.leader import ElectionConfig, LeaderElector, default_identity
from ansible_operator.controller.queue import Key, WorkQueue
from ansible_operator.controller.reconciler import Reconciler, ReconcileSettings
from ansible_operator.controller.runaccess import RunAccess
from ansible_operator.controller.rundirsweep import start_sweep
from ansible_operator.controller.sharding.shard import Shard, ShardOptions, make_shard
from ansible_operator.controller.watching import PrimaryWatch, controller_name, register
from ansible_operator.controller.workers import Outcome, WorkerPool
from ansible_operator.errors import ConfigError
from ansible_operator.kube.client import Kube, load_api_client
from ansible_operator.observability.events import EventRecorder
from ansible_operator.observability.health import HealthServer
from ansible_operator.observability.metrics import MetricsServer, OperatorMetrics, format_gvk
from ansible_operator.observability.usermetrics import UserMetricsServer
from ansible_operator.proxy import ApiProxy, RunCredentials
from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.lifeline import Lifeline
from ansible_operator.warm.supervisor import WarmServers, start_warm_servers

log = logging.getLogger("ansible_operator.manager")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class MetricsHooks:
    """Adapts the reconciler's reports to the Prometheus metrics."""

    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics

    @staticmethod
    def _gvk(watch: Watch) -> str:
        return format_gvk(group=watch.gvk.group, version=watch.gvk.version, kind=watch.gvk.kind)

    def run_finished(self, *, watch: Watch, outcome: str, seconds: float) -> None:
        gvk = self._gvk(watch)
        self.metrics.run_finished(gvk=gvk, outcome=outcome, seconds=seconds)  # type: ignore[arg-type]
        if outcome != "canceled":
            self.metrics.reconcile_result(gvk=gvk, succeeded=outcome == "successful")

    def reconciled(self, *, watch: Watch, result: str, seconds: float) -> None:
        self.metrics.reconcile_finished(
            controller=controller_name(watch),
            result=result,  # type: ignore[arg-type]
            seconds=seconds,
        )

    def compat_deprecation(self, watch: Watch, notice: Notice) -> None:
        self.metrics.compat_deprecation(gvk=self._gvk(watch), what=notice.what)

    def object_seen(self, watch: Watch, event_type: str, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        labels = {
            "name": str(meta.get("name", "")),
            "namespace": str(meta.get("namespace", "")),
            "group": watch.gvk.group,
            "version": watch.gvk.version,
            "kind": watch.gvk.kind,
        }
        if event_type == "DELETED":
            self.metrics.resource_deleted(**labels)
            return
        created = str(meta.get("creationTimestamp") or "")
        try:
            stamp = datetime.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return
        self.metrics.resource_created(**labels, created_at=stamp)


def _apply_ansible_paths(options: RunOptions) -> None:
    # As in the Go operator, the flags are the same knob as the env vars: they
    # overwrite them before watches.yaml is resolved, and roles inherit them.
    if options.ansible_roles_path:
        os.environ["ANSIBLE_ROLES_PATH"] = options.ansible_roles_path
        log.info("Set the environment variable ANSIBLE_ROLES_PATH=%s", options.ansible_roles_path)
    if options.ansible_collections_path:
        os.environ["ANSIBLE_COLLECTIONS_PATH"] = options.ansible_collections_path
        log.info(
            "Set the environment variable ANSIBLE_COLLECTIONS_PATH=%s",
            options.ansible_collections_path,
        )


def _election_namespace(options: RunOptions) -> str:
    if options.leader_election_namespace:
        return options.leader_election_namespace
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        raise ConfigError(
            "unable to find leader election namespace: not running in-cluster, "
            "please specify --leader-election-namespace"
        ) from None


class Manager:
    def __init__(self, options: RunOptions, *, planner: PlannerFactory | None = None) -> None:
        self.options = options
        # Drift checks (controller.drift) plan CRs with this; None: no drift checks.
        self.planner = planner
        self.exit_code = 0
        self.stop_flag = threading.Event()
        self.cancel_runs = threading.Event()
        self.ready = threading.Event()
        self.metrics = OperatorMetrics()
        self.hooks = MetricsHooks(self.metrics)
        self.compat = compat_mode.resolve(options.ansible_compat)
        self.lifeline: Lifeline  # set first thing in run()

    # -- set-up ------------------------------------------------------------------

    def _load(self) -> list[Watch]:
        _apply_ansible_paths(self.options)
        # Before the warm servers start: every run inherits the mode's settings.
        compat_mode.apply(self.compat, os.environ)
        watches = load_watches(
            self.options.watches_file,
            max_concurrent_reconciles_default=self.options.max_concurrent_reconciles,
            ansible_verbosity_default=self.options.ansible_verbosity,
        )
        for watch in watches:
            log.info("Watching resource %s", str(watch.gvk))
        if self.options.namespaces:
            log.info("Watching namespaces %s", ",".join(self.options.namespaces))
        else:
            log.info("Watching all namespaces")
        return watches

    def _reconcilers(
        self,
        watches: list[Watch],
        kube: Kube,
        events: EventRecorder,
        queue: WorkQueue,
        access: RunAccess,
        *,
        warm: WarmServers | None,
        shard: Shard | None = None,
    ) -> dict[str, Reconciler]:
        runner = AnsibleRunner(
            root=Path(self.options.runner_dir), warm=warm, extra_env=self.lifeline.env()
        )
        settings = ReconcileSettings(
            reconcile_period=self.options.reconcile_period,
            ansible_args=self.options.ansible_args,
            ansible_log_events=self.options.ansible_log_events,
            runner_root=Path(self.options.runner_dir),
            run_timeout=self.options.ansible_run_timeout or None,
            count_notice=self.hooks.compat_deprecation,
        )
        reconcilers = {}
        for watch in watches:
            name = controller_name(watch)
            queue.set_limit(name, watch.max_concurrent_reconciles)
            self.metrics.register_controller(
                controller=name,
                gvk=MetricsHooks._gvk(watch),
                max_concurrent_reconciles=watch.max_concurrent_reconciles,
            )
            reconcilers[name] = Reconciler(
                watch=watch,
                kube=kube,
                runner=runner,
                settings=settings,
                events=events,
                hooks=self.hooks,
                access=access,
                cancel=self.cancel_runs,
                gate=shard.gate if shard is not None else None,
            )
        return reconcilers

    def _elect(self, kube: Kube) -> LeaderElector | None:
        opts = self.options
        if not opts.leader_elect:
            return None
        if opts.sharding:
            log.info("--sharding is set: the member Leases replace leader election")
            return None
        if not opts.leader_election_id:
            raise ConfigError("LeaderElectionID must be configured")
        config = ElectionConfig(
            namespace=_election_namespace(opts),
            name=opts.leader_election_id,
            identity=default_identity(),
            lease_duration=opts.leader_elect_lease_duration,
            renew_deadline=opts.leader_elect_renew_deadline,
            retry_period=opts.leader_elect_retry_period,
        )
        return LeaderElector(kube, config, on_lost=self._lost_leadership)

    def _shard(self, kube: Kube, queue: WorkQueue) -> Shard | None:
        opts = self.options
        if not opts.sharding:
            return None
        settings = ShardOptions(
            namespace=_election_namespace(opts),
            group=opts.leader_election_id,
            lease_duration=opts.leader_elect_lease_duration,
            renew_deadline=opts.leader_elect_renew_deadline,
            retry_period=opts.leader_elect_retry_period,
            load_factor=defaults.SHARDING_LOAD_FACTOR,
        )
        return make_shard(
            kube, settings, queue=queue, registry=self.metrics.registry, on_lost=self._lost_shard
        )

    def _lost_shard(self) -> None:
        # Stop starting runs (the gate already refuses) and kill running ones
        # now, before the others judge this member dead and take its CRs.
        self.cancel_runs.set()
        self.exit_code = 1
        self.stop_flag.set()

    def _lost_leadership(self) -> None:
        self.metrics.leader_status(name=self.options.leader_election_id, leading=False)
        self.exit_code = 1
        self.stop_flag.set()

    # -- running -----------------------------------------------------------------

    def run(self) -> int:
        watches = self._load()
        # First: nothing is started for a run before the lifeline that ends it.
        self.lifeline = Lifeline.start(
            runner_root=Path(self.options.runner_dir),
            log_args=[
                f"--zap-encoder={self.options.zap_encoder}",
                f"--zap-time-encoding={self.options.zap_time_encoding}",
            ],
        )
        try:
            return self._run(watches)
        finally:
            self.lifeline.close()

    def _run(self, watches: list[Watch]) -> int:
        self.metrics.set_build_info(version=__version__, commit="unknown")
        api_client = load_api_client()
        kube = Kube(api_client)
        health = HealthServer(bind=self.options.health_probe_bind_address, ready=self._readiness)
        metrics_server = MetricsServer(self.metrics, bind=self.options.metrics_bind_address)
        health.start()
        metrics_server.start()
        user_metrics = self._start_user_metrics()
        events = EventRecorder(api_client)
        elector = self._elect(kube)
        try:
            if elector is not None:
                if not self._wait_for_leadership(elector):
                    return 0
                self.metrics.leader_status(name=self.options.leader_election_id, leading=True)
            self._serve(watches, kube, events)
        finally:
            if elector is not None:
                elector.release()
            events.stop(5.0)
            if user_metrics is not None:
                user_metrics.stop()
            metrics_server.stop()
            health.stop()
        log.info("Exiting.")
        return self.exit_code

    def _start_user_metrics(self) -> UserMetricsServer | None:
        # Unlike the probe and metrics ports, a busy user-metrics port is not
        # fatal: only roles calling osdk_metric need it, and they get a clear
        # error from the module instead of the whole operator crash-looping.
        server = UserMetricsServer(
            registry=self.metrics.registry, bind=self.options.user_metrics_bind_address
        )
        try:
            server.start()
        except ConfigError as err:
            log.error("user metrics API not started: %s", str(err))
            return None
        return server

    def _wait_for_leadership(self, elector: LeaderElector) -> bool:
        # kopf has not installed its signal handlers yet: a SIGTERM while we
        # wait for the lease must still stop us cleanly.
        previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, lambda *_: self.stop_flag.set())
        try:
            return elector.acquire(self.stop_flag)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _readiness(self) -> tuple[bool, str]:
        if self.ready.is_set():
            return True, "ok"
        return False, "not watching yet (waiting for leadership or the API server)"

    def _serve(self, watches: list[Watch], kube: Kube, events: EventRecorder) -> None:
        queue = WorkQueue(
            total_limit=self.options.max_concurrent_reconciles_total,
            backoff_base=defaults.RETRY_BACKOFF_BASE,
            backoff_max=defaults.RETRY_BACKOFF_MAX,
            observer=self.metrics,
        )
        dependents = DependentWatches(
            kube=kube,
            queue=queue,
            namespaces=tuple(self.options.namespaces),
            primaries={controller_name(w): w for w in watches},
        )
        shard = self._shard(kube, queue)
        # Before the first event: our Lease exists and the members are known.
        if shard is not None and not shard.start(self.stop_flag):
            return
        credentials = RunCredentials()
        proxy = ApiProxy(
            upstream=kube.api_client.configuration,
            credentials=credentials,
            kube=kube,
            inject_owner_ref=self.options.inject_owner_ref,
            # As in the Go operator, no owner injection also means no dependent watches.
            on_touch=dependents.touched if self.options.inject_owner_ref else None,
            bind=f"127.0.0.1:{self.options.proxy_port}",
            compat_restores=self.compat.restores,
            events=events,
        )
        proxy.start()
        if not self.options.inject_owner_ref:
            log.warning(
                "Warning: injection of owner references and dependent watches is turned off"
            )
        access = RunAccess(
            credentials=credentials, proxy_url=proxy.url, parent=self.lifeline.private_dir
        )
        # After leadership, before the first run; stopped after the last run below.
        warm = start_warm_servers(
            enabled=self.options.warm_ansible,
            runner_root=Path(self.options.runner_dir),
            extra_env=self.lifeline.env(),
        )
        reconcilers = self._reconcilers(
            watches, kube, events, queue, access, warm=warm, shard=shard
        )

        def handle(key: Key) -> Outcome:
            return reconcilers[key.queue].reconcile(key)

        pool = WorkerPool(queue, handle, workers=self.options.max_concurrent_reconciles_total)
        drift = self._drift(watches, kube, events, queue, warm=warm, shard=shard)
        registry = kopf.OperatorRegistry()
        for watch in watches:
            hook = self._object_hook(watch, shard, drift)
            register(registry, PrimaryWatch(watch, queue, on_object=hook))
        _register_kopf_basics(registry, kube)
        start_sweep(
            kube, watches, root=Path(self.options.runner_dir), namespaces=self.options.namespaces
        )
        try:
            asyncio.run(self._kopf(registry))
        finally:
            if drift is not None:
                # Checks change nothing: cancel them now rather than wait for them.
                drift.stop(grace=defaults.DRIFT_CHECK_STOP_GRACE)
            log.info(
                "Stopping: waiting up to %ss for running Ansible",
                self.options.graceful_shutdown_timeout,
            )
            finished = pool.stop(
                grace=self.options.graceful_shutdown_timeout, cancel=self.cancel_runs.set
            )
            if not finished:
                log.warning("some Ansible runs did not stop in time")
            if shard is not None:
                # After the last run: release our Lease so the others take over at once.
                shard.stop()
            dependents.stop()
            proxy.stop()
            access.close()
            if warm is not None:
                warm.stop()

    def _drift(
        self,
        watches: list[Watch],
        kube: Kube,
        events: EventRecorder,
        queue: WorkQueue,
        *,
        warm: WarmServers | None,
        shard: Shard | None,
    ) -> DriftScheduler | None:
        if self.planner is None:
            return None
        # Its own: drift checks are cancelled at shutdown before the grace
        # reconciles get (the scheduler's stop() sets it).
        cancel = threading.Event()
        planner = self.planner(
            kube=kube,
            runner=AnsibleRunner(
                root=Path(self.options.runner_dir), warm=warm, extra_env=self.lifeline.env()
            ),
            ansible_args=self.options.ansible_args,
            inject_owner_ref=self.options.inject_owner_ref,
            cancel=cancel,
            compat_restores=self.compat.restores,
        )
        gate = shard.gate if shard is not None else None
        drift = build_scheduler(
            watches,
            queue=queue,
            planner=planner,
            kube=kube,
            events=events,
            gauge=self.metrics,
            gate=gate,
            cancel=cancel,
        )
        drift.start()
        return drift

    def _object_hook(
        self, watch: Watch, shard: Shard | None, drift: DriftScheduler | None
    ) -> Callable[[str, Mapping[str, Any]], None]:
        name = controller_name(watch)

        def seen(event_type: str, body: Mapping[str, Any]) -> None:
            self.hooks.object_seen(watch, event_type, body)
            if shard is not None:
                shard.observe(name, event_type, body)
            if drift is not None:
                drift.observe(name, event_type, body)

        return seen

    async def _kopf(self, registry: kopf.OperatorRegistry) -> None:
        kwargs: dict[str, Any] = {"clusterwide": True}
        if self.options.namespaces:
            kwargs = {"namespaces": list(self.options.namespaces)}
        # kopf waits for a threading.Event in an executor thread that cannot be
        # cancelled, and gives such "hung" tasks 5 s at shutdown; an asyncio
        # flag, set from our threading flag by a small bridge thread, stops it
        # at once.
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def bridge() -> None:
            self.stop_flag.wait()
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=bridge, name="stop-bridge", daemon=True).start()
        _take_over_signals(registry, stop_flag=self.stop_flag, stop=stop)
        try:
            await kopf.operator(
                registry=registry,
                standalone=True,
                stop_flag=stop,
                ready_flag=self.ready,
                **kwargs,
            )
        finally:
            # Ends the bridge thread when kopf stopped on a signal.
            self.stop_flag.set()


def _take_over_signals(
    registry: kopf.OperatorRegistry, *, stop_flag: threading.Event, stop: asyncio.Event
) -> None:
    """Replace kopf's SIGTERM/SIGINT handlers, once installed, by ours.

    kopf stops on a signal through its own flag and then finds the waiter of our
    stop flag still pending; it treats that as a hung task and waits 5 s for it
    before exiting. Setting our flag instead stops kopf at once: an idle
    operator exits in well under a second, which rolling updates and leader
    hand-over feel.
    """

    def on_signal(sig: signal.Signals) -> None:
        log.info("Signal %s received: stopping", sig.name)
        stop_flag.set()
        stop.set()

    @kopf.on.startup(registry=registry)
    async def take_signals(**_: Any) -> None:
        # Startup handlers run after kopf has installed its handlers, so ours
        # replace them; kopf installs none outside the main thread, nor do we.
        if threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, on_signal, sig)


def _register_kopf_basics(registry: kopf.OperatorRegistry, kube: Kube) -> None:
    @kopf.on.login(registry=registry)
    def login(settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo:
        # Our own client's login, not kopf.login_via_client: that one loads the
        # kubeconfig again and leaves its embedded keys in $TMPDIR (kube/login.py).
        return kopf.ConnectionInfo(
            **kube.login_fields(),
            trust_env=settings.networking.trust_env,
        )

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # We post our own Events with our own reasons; kopf's would duplicate them.
        settings.posting.enabled = False
        # kopf's per-event logging is noise next to our JSON lines, unless
        # the user asked for debug output.
        if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
            logging.getLogger("kopf").setLevel(logging.WARNING)


def run(options: RunOptions, *, planner: PlannerFactory | None = None) -> int:
    try:
        return Manager(options, planner=planner).run()
    except ConfigError as err:
        log.error("Failed to start: %s", str(err))
        return 1
