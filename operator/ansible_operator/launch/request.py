"""The RunRequest of one run of a custom resource: the one place a run is put together.

Where this sits: the reconciler (controller/reconciler.py) and the planning engine
(plan/engine.py, for `ansible-operator plan` and the operator's drift checks) call
`build_run_request` with the object as it stands and the watch, so a plan runs with
exactly the extra vars, role or playbook, verbosity and Ansible arguments a
reconcile would. What goes into it, in order:

* the content: the watch's role or playbook, or the finalizer's when the object is
  being deleted (with the finalizer's `vars`);
* the extra vars (launch/extravars.py);
* the per-CR tuning annotations, verbosity and kept artifacts (launch/annotations.py),
  falling back to the watch's values;
* the `run` flags of `RunSettings` (Ansible arguments, timeout, runner root) and the
  task logger of `--ansible-log-events` (launch/tasklog.py);
* with the run's `RunNotes`, the observer of the 2.18 behaviours it relied on
  (launch/compatlog.py), chained after the task logger.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.compat.notices import Notice, RunNotes
from ansible_operator.config import defaults
from ansible_operator.config.watches import Watch
from ansible_operator.launch import crannotations
from ansible_operator.launch.compatlog import observing
from ansible_operator.launch.extravars import build_extravars
from ansible_operator.launch.tasklog import task_logger
from ansible_operator.observability.logging import ObjectLogger
from ansible_operator.runner.base import RunRequest

__all__ = ["RunSettings", "build_run_request"]


@dataclass(frozen=True)
class RunSettings:
    """The `run` flags a reconcile and its runs need (defaults live in config.defaults)."""

    reconcile_period: float
    ansible_args: str
    ansible_log_events: str
    runner_root: Path
    run_timeout: float | None
    # --running-condition-delay: Running written only if a run lasts this long
    # (controller/runningmark.py); 0 writes it before every run, as the Go operator.
    running_delay: float = defaults.RUNNING_CONDITION_DELAY
    # Told each 2.18 behaviour a run relied on (launch/compatlog.py): the metric.
    count_notice: Callable[[Watch, Notice], None] | None = None


def build_run_request(
    watch: Watch,
    obj: Mapping[str, Any],
    *,
    ident: str,
    deleting: bool,
    kubeconfig: Path,
    settings: RunSettings,
    cancel: threading.Event,
    log: ObjectLogger,
    notes: RunNotes | None = None,
) -> RunRequest:
    """The RunRequest of one reconcile (or finalizer run when `deleting`) of `obj`.

    With `notes` (the run's, also given to its proxy Owner) the run's 2.18 behaviours
    are logged and counted (launch/compatlog.py).
    """
    gvk, meta = watch.gvk, obj["metadata"]
    playbook, role = watch.playbook, watch.role
    fin = watch.finalizer
    finalizer_vars = None
    if deleting and fin is not None:
        finalizer_vars = fin.vars
        if fin.playbook or fin.role:
            playbook, role = fin.playbook, fin.role
    extravars = build_extravars(
        obj,
        group=gvk.group,
        kind=gvk.kind,
        snake_case=watch.snake_case_parameters,
        mark_unsafe=watch.mark_unsafe,
        watch_vars=watch.vars,
        finalizer_vars=finalizer_vars,
    )
    verbosity = crannotations.verbosity(obj, log)
    artifacts = crannotations.max_runner_artifacts(obj, log)
    on_event = task_logger(settings.ansible_log_events, log)
    if notes is not None:
        counter = settings.count_notice
        count = functools.partial(counter, watch) if counter is not None else None
        on_event = observing(on_event, notes=notes, log=log, count=count)
    return RunRequest(
        ident=ident,
        group=gvk.group,
        version=gvk.version,
        kind=gvk.kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta["name"]),
        playbook=playbook,
        role=role if playbook is None else None,
        extravars=extravars,
        verbosity=watch.ansible_verbosity if verbosity is None else verbosity,
        max_artifacts=watch.max_runner_artifacts if artifacts is None else artifacts,
        ansible_args=settings.ansible_args,
        kubeconfig=kubeconfig,
        timeout=settings.run_timeout,
        cancel=cancel,
        runner_root=settings.runner_root,
        on_event=on_event,
    )
