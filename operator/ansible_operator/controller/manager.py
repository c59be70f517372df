"""`ansible-operator run`: wire watches.yaml, kopf, the work queue, reconcilers and servers.

Called by the cli module with parsed `RunOptions`. Start-up order: logging,
watches.yaml (a bad file exits 1 before anything is watched), the Kubernetes
client, health and metrics servers (a port in use exits 1), leader election
(when enabled: nothing is reconciled until this replica leads), then, with
`--sharding`, joining the shard group (controller.sharding: the queue admits
and the reconciler runs only this replica's CRs), then the reconcile
machinery (controller/wiring.py: queue, proxy, warm servers, reconcilers, worker
pool, drift checks) and the watches (controller/kopfrun.py: kopf in the main
thread's event loop; SIGTERM and SIGINT set the stop flag). When the watches
end, the machinery stops in order: running Ansible gets
`--graceful-shutdown-timeout` to finish, then is cancelled, the shard member
Lease (if any) is released, and the process exits 0. Losing the leader lease or
the member Lease exits 1. The lifeline (runner/lifeline.py) is started first and
closed last: nothing started for a run outlives the process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

from ansible_operator import __version__
from ansible_operator.compat import mode as compat_mode
from ansible_operator.config.options import RunOptions
from ansible_operator.config.watches import Watch, load_watches
from ansible_operator.controller import wiring
from ansible_operator.controller.kopfrun import run_watches
from ansible_operator.controller.leader import ElectionConfig, LeaderElector, default_identity
from ansible_operator.controller.metricshooks import MetricsHooks
from ansible_operator.controller.wiring import Basics
from ansible_operator.errors import ConfigError
from ansible_operator.kube.client import Kube, load_login
from ansible_operator.kube.eventposter import KubeEventPoster
from ansible_operator.observability.eventrecorder import EventRecorder
from ansible_operator.observability.health import HealthServer
from ansible_operator.observability.metrics import MetricsServer, OperatorMetrics
from ansible_operator.observability.usermetrics import UserMetricsServer
from ansible_operator.runner.lifeline import Lifeline

log = logging.getLogger("ansible_operator.manager")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


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
    def __init__(self, options: RunOptions) -> None:
        self.options = options
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
        kube = Kube(load_login())
        health = HealthServer(bind=self.options.health_probe_bind_address, ready=self._readiness)
        metrics_server = MetricsServer(self.metrics, bind=self.options.metrics_bind_address)
        health.start()
        metrics_server.start()
        user_metrics = self._start_user_metrics()
        events = EventRecorder(KubeEventPoster(kube))
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

    def _serve(self, watches: list[Watch], kube: Kube, events: EventRecorder) -> None:
        """Build the reconcile machinery, watch until stopped, stop it in order."""
        basics = Basics(
            options=self.options,
            watches=watches,
            kube=kube,
            events=events,
            metrics=self.metrics,
            hooks=self.hooks,
            lifeline=self.lifeline,
            election_namespace=lambda: _election_namespace(self.options),
            stop_flag=self.stop_flag,
            cancel_runs=self.cancel_runs,
            on_lost_shard=self._lost_shard,
            compat=self.compat,
        )
        machinery = wiring.build(basics)
        if machinery is None:
            return
        try:
            run_watches(
                machinery.primaries,
                kube=kube,
                namespaces=self.options.namespaces,
                stop_flag=self.stop_flag,
                ready=self.ready,
            )
        finally:
            machinery.stop(
                grace=self.options.graceful_shutdown_timeout, cancel_runs=self.cancel_runs
            )

    def _readiness(self) -> tuple[bool, str]:
        if self.ready.is_set():
            return True, "ok"
        return False, "not watching yet (waiting for leadership or the API server)"


def run(options: RunOptions) -> int:
    try:
        return Manager(options).run()
    except ConfigError as err:
        log.error("Failed to start: %s", str(err))
        return 1
