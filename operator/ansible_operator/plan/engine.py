"""The planning engine: a CR's run in check and diff mode through a read-only proxy.

Where it sits: below the controller, beside nothing that changes the cluster. The
`plan` sub-command (plan/command.py) calls `make_plan` for one CR; the operator's
drift checks (controller/driftchecks.py) call `drift_findings` with the operator's own
Ansible runner. The flow of one plan:

1. an ApiProxy (proxy) on loopback with a Journal (plan/journal.py) as its
   `on_dry_run` hook, and a RunAccess (launch/access.py) that issues the run a
   read-only token and writes its kubeconfig: the run reaches the cluster only
   through the proxy, which sends every write as a server-side dry run;
2. launch/request.py's `build_run_request` builds the reconcile's own RunRequest;
   `--check --diff` are added to its Ansible arguments and the Journal observes
   its events, and so does the observer of the 2.18 behaviours the run relied on
   (launch/compatlog.py, listed in the plan); the runner runs it in a private
   runner directory, removed after;
3. plan/changes.py reads the journal back as object changes.

A drift check is exactly the plan of the existing CR as it is: the objects the
role would create, update or delete are the drift; the CR's own status and the
Events the role would write are not.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.compat.notices import Notice, RunNotes
from ansible_operator.config.watches import Watch
from ansible_operator.errors import OperatorError
from ansible_operator.kube.client import Kube, ResourceInfo
from ansible_operator.launch.access import RunAccess
from ansible_operator.launch.compatlog import observing
from ansible_operator.launch.request import RunSettings, build_run_request
from ansible_operator.observability.logging import object_logger
from ansible_operator.plan import changes, report, target
from ansible_operator.plan.changes import Analysis
from ansible_operator.plan.journal import Journal
from ansible_operator.proxy import ApiProxy, RunCredentials
from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.base import Runner, RunOutcome, RunResult, new_ident
from ansible_operator.warm.supervisor import WarmServers, start_warm_servers

__all__ = ["CHECK_ARGS", "DRIFT_ACTIONS", "Findings", "drift_findings", "make_plan", "plan_with"]

log = logging.getLogger("ansible_operator.plan")

CHECK_ARGS = "--check --diff"
DRIFT_ACTIONS = frozenset({"create", "update", "delete"})


def make_plan(
    found: target.Target,
    *,
    kube: Kube,
    ansible_args: str,
    deleting: bool,
    warm: bool,
    compat_restores: bool = False,
) -> report.Plan:
    """Run the plan of `found` (see the module docstring) and read it back."""
    root = Path(tempfile.mkdtemp(prefix="ansible-operator-plan-"))
    servers = start_warm_servers(enabled=warm, runner_root=root)
    try:
        runner = AnsibleRunner(root=root, warm=servers)
        return plan_with(
            found,
            kube=kube,
            runner=runner,
            ansible_args=ansible_args,
            deleting=deleting,
            compat_restores=compat_restores,
        )
    finally:
        _stop(servers)
        shutil.rmtree(root, ignore_errors=True)


def plan_with(
    found: target.Target,
    *,
    kube: Kube,
    runner: Runner,
    ansible_args: str,
    deleting: bool,
    inject_owner_ref: bool = True,
    cancel: threading.Event | None = None,
    compat_restores: bool = False,
) -> report.Plan:
    """The plan of `found`, run by `runner` (the operator's own for drift checks)
    in a private runner directory, through a proxy of its own."""
    journal = Journal(kube)
    credentials = RunCredentials()
    proxy = ApiProxy(
        upstream=kube.login,
        credentials=credentials,
        kube=kube,
        inject_owner_ref=inject_owner_ref,
        on_dry_run=journal.record,
        quiet=True,
        # As the operator's proxy: a plan must see what a run would send.
        compat_restores=compat_restores,
    )
    proxy.start()
    # No sweep: inside the operator it would take the operator's own directory.
    access = RunAccess(credentials=credentials, proxy_url=proxy.url, sweep=False)
    root = Path(tempfile.mkdtemp(prefix="ansible-operator-plan-"))
    deprecations: list[Notice] = []
    try:
        result = _run(
            found,
            access=access,
            runner=runner,
            root=root,
            journal=journal,
            args=ansible_args,
            cancel=cancel or threading.Event(),
            deprecations=deprecations,
        )
    finally:
        proxy.stop()
        access.close()
        shutil.rmtree(root, ignore_errors=True)
    return report.Plan(
        resource=_resource(found),
        mode="finalizer" if deleting else "reconcile",
        runs=_runs(found.watch, deleting=deleting),
        analysis=changes.analyze(journal.entries, cr=found.obj),
        error=_error(result),
        run_seconds=result.duration,
        deprecations=tuple(deprecations),
    )


def _resource(found: target.Target) -> dict[str, Any]:
    """Which object the plan is about, as the report names it."""
    meta = found.obj["metadata"]
    return {
        "apiVersion": found.obj.get("apiVersion"),
        "kind": found.obj.get("kind"),
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name"),
        "exists": found.exists,
    }


def _runs(watch: Watch, *, deleting: bool) -> str:
    playbook, role = watch.playbook, watch.role
    fin = watch.finalizer
    if deleting and fin is not None and (fin.playbook or fin.role):
        playbook, role = fin.playbook, fin.role
    return f"playbook {playbook}" if playbook else f"role {role}"


def _stop(servers: WarmServers | None) -> None:
    if servers is not None:
        servers.stop()


def _run(
    found: target.Target,
    *,
    access: RunAccess,
    runner: Runner,
    root: Path,
    journal: Journal,
    args: str,
    cancel: threading.Event,
    deprecations: list[Notice],
) -> RunResult:
    watch = found.watch
    meta = found.obj["metadata"]
    logger = object_logger(
        log, namespace=meta.get("namespace", ""), name=meta["name"], gvk=str(watch.gvk), job="plan"
    )
    settings = RunSettings(
        reconcile_period=0,
        ansible_args=f"{args} {CHECK_ARGS}".strip(),
        ansible_log_events="nothing",
        runner_root=root,
        run_timeout=None,
    )
    deleting = bool(meta.get("deletionTimestamp"))
    notes = RunNotes()
    with access.kubeconfig_for(
        found.obj, controller=watch.controller_name, read_only=True, notes=notes
    ) as kubeconfig:
        request = build_run_request(
            watch,
            found.obj,
            ident=new_ident(),
            deleting=deleting,
            kubeconfig=kubeconfig,
            settings=settings,
            cancel=cancel,
            log=logger,
        )
        on_event = observing(journal.observe, notes=notes, log=logger, count=deprecations.append)
        request = dataclasses.replace(request, on_event=on_event)
        return runner.run(request)


def _error(result: RunResult) -> str | None:
    """Why the run failed, on one line per failed task; None when it succeeded."""
    if result.outcome is RunOutcome.SUCCESSFUL:
        return None
    if result.failures:
        return "; ".join(f.describe() for f in result.failures)
    tail = result.stdout_tail.strip().splitlines()[-3:]
    return f"Ansible run {result.outcome}: {' '.join(tail) or 'no output'}"


@dataclass(frozen=True, slots=True)
class Findings:
    """One plan, as far as drift goes."""

    drifted: tuple[str, ...]  # "Kind namespace/name" the role would create, update or delete
    error: str | None = None  # why the plan failed; None when it finished


def drifted_objects(analysis: Analysis) -> tuple[str, ...]:
    """`Kind namespace/name` (or `Kind name`) of each object the plan would change, once."""
    names: list[str] = []
    for change in analysis.objects:
        if change.action not in DRIFT_ACTIONS:
            continue
        ref = change.ref
        where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
        name = f"{ref.kind} {where}"
        if name not in names:
            names.append(name)
    return tuple(names)


def drift_findings(
    watch: Watch,
    resource: ResourceInfo,
    obj: dict[str, Any],
    *,
    kube: Kube,
    runner: Runner,
    ansible_args: str,
    inject_owner_ref: bool,
    cancel: threading.Event,
    compat_restores: bool = False,
) -> Findings:
    """The drift of an existing CR: its plan, run with the operator's `runner`."""
    found = target.Target(watch=watch, resource=resource, obj=obj, exists=True)
    try:
        result = plan_with(
            found,
            kube=kube,
            runner=runner,
            ansible_args=ansible_args,
            deleting=False,
            inject_owner_ref=inject_owner_ref,
            cancel=cancel,
            compat_restores=compat_restores,
        )
    except (OperatorError, OSError) as err:
        return Findings(drifted=(), error=" ".join(str(err).split()) or type(err).__name__)
    return Findings(drifted=drifted_objects(result.analysis), error=result.error)
