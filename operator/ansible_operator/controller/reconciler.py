"""One reconcile of one custom resource: read it, run its role or playbook, report.

Called by a `WorkerPool` worker thread (controller.workers) with a queue Key;
returns an `Outcome` that tells the queue when to come back. The steps follow
the Go operator's reconcile so roles and users see the same thing:

1. live GET of the CR; gone → clean up its run directory, forget it; in
   sharded mode the gate then decides whether this replica runs it
   (controller.sharding.shard);
2. the reconcile-period and drift annotations (a bad value → Failure status
   and a Warning Event, then retried with backoff); an observe-only CR
   (controller.driftsettings, ours) ends here: no run, no finalizer run (a
   deleting one loses our finalizer so it can go), no reconcile metrics;
   controller.driftchecks checks it instead;
3. finalizer: skip a deleting CR we hold no finalizer on; add ours before the
   first run;
4. status Running (when the watch manages status), whose response is the
   object the role sees as `_<group>_<kind>`;
5. the Ansible run (finalizer role/playbook when the CR is being deleted); a
   run that cannot be set up (extra vars, runner directory, inventory,
   --ansible-args: errors.Permanent, or an OSError) ends here with a Failure
   condition and a Warning Event, its token revoked and kubeconfig removed;
6. live GET again; on a successful finalizer run remove the finalizer;
7. status Successful / Failure, Kubernetes Events, metrics, and the next
   reconcile time (requeue_after from the role, else the reconcile period).

Status writes and Events are controller.reporting's. What the returned
Outcome's error makes the queue do is controller.workers' (see errors.py):
a Permanent error is reported once and waits for a change of the CR or its
reconcile period; a failed run is retried with backoff.

Improvements over the reference: a run error, timeout or set-up failure is
written to status (not left at "Running"), a CRD without a status
subresource gets an Event instead of an endless error loop, and a run that
started never leaves the status or finalizer half-applied.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_operator.compat.notices import RunNotes
from ansible_operator.config.watches import Watch
from ansible_operator.controller import finalizers, reporting
from ansible_operator.controller.contract import Gate, Key, Outcome, RunMetrics
from ansible_operator.controller.driftsettings import settings_for
from ansible_operator.controller.reporting import EventSink, Reporter
from ansible_operator.controller.restartrule import RestartRule
from ansible_operator.controller.runningmark import RunningMark
from ansible_operator.controller.watchbodies import WatchBodies
from ansible_operator.errors import BadAnnotation, Permanent, RetryLater
from ansible_operator.kube.client import KindResource, KubeApi, ResourceInfo
from ansible_operator.launch import crannotations
from ansible_operator.launch.access import RunAccess
from ansible_operator.launch.request import RunSettings, build_run_request
from ansible_operator.observability.logging import ObjectLogger, object_logger
from ansible_operator.observability.metrics import format_gvk
from ansible_operator.runner import privatedir
from ansible_operator.runner.base import Runner, RunOutcome, RunResult, new_ident

log = logging.getLogger("ansible_operator.reconciler")

#: After a CR was deleted while its run was in progress, come back this soon
#: so the finalizer runs (the reference's fix for SDK #4909 uses 5 s).
DELETED_DURING_RUN_REQUEUE = 1.0


class RunFailed(RetryLater):
    """The role or playbook failed; the queue retries with backoff."""


__all__ = [
    "EventSink",
    "Reconciler",
    "RunFailed",
]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Reconciler:
    def __init__(
        self,
        *,
        watch: Watch,
        kube: KubeApi,
        runner: Runner,
        settings: RunSettings,
        events: EventSink,
        hooks: RunMetrics,
        access: RunAccess,
        cancel: threading.Event,
        now: Callable[[], datetime.datetime] = _now,
        gate: Gate | None = None,
        restart: RestartRule | None = None,
        bodies: WatchBodies | None = None,
    ) -> None:
        self.restart = restart  # what a success records (controller/restartrule.py)
        self.bodies = bodies  # what the watch saw (controller/watchbodies.py)
        self.watch = watch
        self.gate = gate
        self.kube = kube
        self.runner = runner
        self.settings = settings
        self.hooks = hooks
        gvk = watch.gvk
        self._gvk = format_gvk(group=gvk.group, version=gvk.version, kind=gvk.kind)  # metrics
        self.access = access
        self.cancel = cancel
        self.now = now
        self.report = Reporter(kube=kube, events=events, now=now)
        self._kind = KindResource(
            kube, group=watch.gvk.group, version=watch.gvk.version, kind=watch.gvk.kind
        )
        self._warned_no_status = False

    @property
    def resource(self) -> ResourceInfo:
        return self._kind()

    # -- entry point ---------------------------------------------------------------

    def reconcile(self, key: Key) -> Outcome:
        """One reconcile of `key`; what the Outcome makes the queue do is contract.decide's."""
        res = self.resource
        obj = self.bodies.take(key) if self.bodies is not None else None
        if obj is None:  # nothing the watch just saw: read it live
            obj = self.kube.get_or_none(res, namespace=key.namespace, name=key.name)
        if obj is None:
            self._forget(key)
            return Outcome(forget=True)
        if self.gate is not None:
            gated = self.gate(key, res, obj)
            if isinstance(gated, Outcome):
                return gated
            obj = gated
        ident = new_ident()
        logger = object_logger(
            log, namespace=key.namespace, name=key.name, gvk=str(self.watch.gvk), job=ident
        )
        try:
            period = self._period(obj)
            observe_only = settings_for(self.watch, obj).observe_only
        except BadAnnotation as err:
            self.report.stopped(
                self._status_target(), obj, str(err), reason=reporting.RECONCILE_ERROR, log=logger
            )
            # Retried with backoff, as by the Go operator (errors.py says why).
            return Outcome(error=RetryLater(str(err)))
        deleting = bool(obj["metadata"].get("deletionTimestamp"))
        fin = self.watch.finalizer
        if observe_only:
            self._observe_only(obj, deleting=deleting, log=logger)
            return Outcome(counted=False)  # nothing was reconciled, nothing to count
        if deleting and (fin is None or not finalizers.has(obj, fin.name)):
            logger.info("Resource is terminated, skipping reconciliation")
            return Outcome()
        if fin is not None and not deleting and not finalizers.has(obj, fin.name):
            logger.debug("adding finalizer %s", fin.name)
            obj = finalizers.add(self.kube, res, obj, fin.name)
        return self._run_and_report(obj, ident=ident, deleting=deleting, period=period, log=logger)

    def _observe_only(self, obj: dict[str, Any], *, deleting: bool, log: ObjectLogger) -> None:
        """An observe-only CR is never run; a deleting one loses our finalizer unrun.

        Running the finalizer would change the cluster, which observe-only
        promises not to do; keeping the finalizer would make the CR
        undeletable. Its dependents go by their ownerReferences as usual.
        """
        fin = self.watch.finalizer
        if deleting and fin is not None and finalizers.has(obj, fin.name):
            log.info("Observe-only: removing finalizer %s without running it", fin.name)
            finalizers.remove(self.kube, self.resource, obj, fin.name)
            return
        log.debug("Observe-only: not reconciling; drift checks report instead")

    def _period(self, obj: Mapping[str, Any]) -> float:
        from_annotation = crannotations.reconcile_period(obj)
        if from_annotation is not None:
            return from_annotation
        return self._default_period()

    def _default_period(self) -> float:
        return float(self.watch.reconcile_period or self.settings.reconcile_period)

    def _forget(self, key: Key) -> None:
        self._forget_dir(namespace=key.namespace, name=key.name)

    def _forget_dir(self, *, namespace: str, name: str) -> None:
        gvk = self.watch.gvk
        privatedir.remove_cr_dir(
            root=self.settings.runner_root,
            group=gvk.group,
            version=gvk.version,
            kind=gvk.kind,
            namespace=namespace,
            name=name,
        )

    # -- the run -------------------------------------------------------------------

    def _status_target(self) -> ResourceInfo | None:
        """Where status is written: the kind's resource when the watch manages status
        and the CRD has the status subresource; else None (no status writes)."""
        res = self.resource
        return res if self.watch.manage_status and res.has_status else None

    def _status_managed(self, obj: Mapping[str, Any], logger: ObjectLogger) -> bool:
        """Whether this run writes status; says once why not when it should but cannot."""
        if self._status_target() is not None:
            return True
        if not self.watch.manage_status:
            return False
        if not self._warned_no_status:
            self._warned_no_status = True
            logger.warning(
                "the CRD of %s has no status subresource; status is not written", self.watch.gvk
            )
        self.report.event(
            obj,
            type="Warning",
            reason=reporting.NO_STATUS_SUBRESOURCE,
            message="The CRD has no status subresource, so the operator cannot report status. "
            "Add `subresources: {status: {}}` to the CRD or set `manageStatus: false`.",
        )
        return False

    def _run_and_report(
        self,
        obj: dict[str, Any],
        *,
        ident: str,
        deleting: bool,
        period: float,
        log: ObjectLogger,
    ) -> Outcome:
        managed = self._status_managed(obj, log)
        mark = RunningMark(
            self.report,
            self.resource if managed else None,
            obj,
            delay=self.settings.running_delay,
        )
        latest = mark.before_request()
        if latest is None:
            return Outcome(forget=True)
        obj = latest
        started = time.monotonic()
        try:
            result = self._run(obj, ident=ident, deleting=deleting, mark=mark, log=log)
        except (Permanent, OSError) as err:
            self.hooks.run_finished(gvk=self._gvk, outcome=None, seconds=time.monotonic() - started)
            return self._not_started(obj, err, managed=managed, period=period, log=log)
        finally:
            latest = mark.finish()
        self.hooks.run_finished(gvk=self._gvk, outcome=result.outcome, seconds=result.duration)
        if latest is None:  # gone at the Running write, during the run
            return Outcome(forget=True)
        return self._after_run(
            latest, result, deleting=deleting, managed=managed, period=period, log=log
        )

    def _not_started(
        self,
        obj: dict[str, Any],
        err: Permanent | OSError,
        *,
        managed: bool,
        period: float,
        log: ObjectLogger,
    ) -> Outcome:
        # Without this the CR would stay "Running" with nothing saying why.
        message = reporting.not_started_message(err)
        res = self.resource if managed else None
        self.report.stopped(res, obj, message, reason=reporting.FAILED, log=log)
        if isinstance(err, Permanent):
            # Reported already: the queue comes back only with the periodic reconcile.
            return Outcome(terminal=err, requeue_after=period if period > 0 else None)
        # An OSError (disk full, /tmp unwritable) may pass: retry with backoff.
        return Outcome(error=RetryLater(message))

    def _run(
        self,
        obj: dict[str, Any],
        *,
        ident: str,
        deleting: bool,
        mark: RunningMark,
        log: ObjectLogger,
    ) -> RunResult:
        """Prepare and perform the run with its own token; both are gone when this returns.

        Raises errors.Permanent (RunSetupError, or an invalid CR) or OSError when
        the run could not be set up.
        """
        notes = RunNotes()  # what the proxy did for the 2.18 compatibility mode
        controller = self.watch.controller_name
        with self.access.kubeconfig_for(obj, controller=controller, notes=notes) as kubeconfig:
            request = build_run_request(
                self.watch,
                obj,
                ident=ident,
                deleting=deleting,
                kubeconfig=kubeconfig,
                settings=self.settings,
                cancel=self.cancel,
                log=log,
                notes=notes,
            )
            what = "finalizer" if deleting else ("playbook" if request.playbook else "role")
            path = request.playbook or request.role
            mark.start(f"Running {what} {path}")
            return self.runner.run(request)

    def _after_run(
        self,
        obj: dict[str, Any],
        result: RunResult,
        *,
        deleting: bool,
        managed: bool,
        period: float,
        log: ObjectLogger,
    ) -> Outcome:
        if result.outcome is RunOutcome.CANCELED:
            log.info("Ansible run canceled; the CR is reconciled again after restart")
            return Outcome(error=RetryLater("run canceled"))
        if result.outcome is RunOutcome.SUCCESSFUL:
            log.info("Ansible-runner exited successfully")
            if deleting and self.watch.finalizer is not None:
                return self._finalized(obj)
            return self._succeeded(obj, result, managed=managed, period=period)
        message = self.report.run_failed(self.resource if managed else None, obj, result)
        log.error("Ansible run %s: %s", result.outcome, message)
        return Outcome(error=RunFailed(message))

    def _finalized(self, obj: dict[str, Any]) -> Outcome:
        fin = self.watch.finalizer
        assert fin is not None
        meta = obj["metadata"]
        fresh = self.kube.get_or_none(
            self.resource, namespace=meta.get("namespace", ""), name=meta["name"]
        )
        if fresh is not None and finalizers.has(fresh, fin.name):
            finalizers.remove(self.kube, self.resource, fresh, fin.name)
        self.report.event(
            obj, type="Normal", reason=reporting.FINALIZED, message="Finalizer run succeeded"
        )
        # The CR goes now: its directory (extra vars = its content) goes with it, not
        # only when a later reconcile finds it gone, which a kill right now would skip.
        self._forget_dir(namespace=meta.get("namespace", ""), name=meta["name"])
        return Outcome(forget=True)

    def _succeeded(
        self, obj: dict[str, Any], result: RunResult, *, managed: bool, period: float
    ) -> Outcome:
        # The object from the Running write is current unless something wrote
        # to it during the run; then the status write conflicts and re-reads,
        # so no extra GET is spent on the common path.
        meta = obj["metadata"]
        fin = self.watch.finalizer
        fresh: dict[str, Any] | None = obj
        if managed:
            record = None if self.restart is None else self.restart.record(meta.get("generation"))
            fresh = self.report.succeeded(self.resource, obj, result, record=record)
        elif fin is not None:
            fresh = self.kube.get_or_none(
                self.resource, namespace=meta.get("namespace", ""), name=meta["name"]
            )
        if fresh is None:
            return Outcome(forget=True)
        self.report.event(
            fresh,
            type="Normal",
            reason=reporting.SUCCESSFUL,
            message=reporting.success_event(result),
        )
        if fresh["metadata"].get("deletionTimestamp") and fin is not None:
            return Outcome(requeue_after=DELETED_DURING_RUN_REQUEUE)
        requeue = result.requeue_after if result.requeue_after is not None else period
        return Outcome(requeue_after=requeue if requeue > 0 else None)
