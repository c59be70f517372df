"""`ansible-operator plan`: run a CR's role in check mode against a read-only proxy.

Where it sits: cli.py adds the parser (`add_plan_parser`) and calls
`run_plan(args)`. The flow, reusing the operator's own layers:

1. config.watches loads watches.yaml; plan.target resolves the CR (a file,
   dry-run against the API server, or KIND NAME read live);
2. an ApiProxy (proxy) on loopback with a Journal as its `on_dry_run` hook,
   and a RunAccess (controller.runaccess) that issues the run a read-only
   token and writes its kubeconfig: the run can reach the cluster only
   through the proxy, which sends every write as a dry run;
3. controller.reconciler.build_run_request builds the reconcile's own
   RunRequest; `--check --diff` are added to its Ansible arguments and the
   Journal observes its events; runner.ansible.AnsibleRunner runs it in a
   private runner directory, removed afterwards;
4. plan.changes reads the journal, plan.report prints the plan and gives the
   exit code (0 no change, 2 changes, 1 error).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import logging
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ansible_operator.compat import mode as compat_mode
from ansible_operator.compat.notices import Notice, RunNotes
from ansible_operator.config import defaults
from ansible_operator.config.options import add_compat_argument, ansible_compat
from ansible_operator.config.watches import Watch, load_watches
from ansible_operator.controller.compatlog import observing
from ansible_operator.controller.reconciler import ReconcileSettings, build_run_request
from ansible_operator.controller.runaccess import RunAccess
from ansible_operator.controller.watching import controller_name
from ansible_operator.errors import OperatorError
from ansible_operator.kube.client import Kube, load_api_client
from ansible_operator.observability.logging import object_logger
from ansible_operator.plan import changes, report, target
from ansible_operator.plan.journal import Journal
from ansible_operator.proxy import ApiProxy, RunCredentials
from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.base import Runner, RunResult, new_ident
from ansible_operator.warm.supervisor import WarmServers, start_warm_servers

log = logging.getLogger("ansible_operator.plan")

CHECK_ARGS = "--check --diff"


def add_plan_parser(sub: Any) -> None:
    plan = sub.add_parser(
        "plan",
        help="show what a CR's role or playbook would change, without changing anything",
        description="Run the watch's role or playbook for one custom resource in check "
        "and diff mode; every write goes to the API server as a dry run. Exit code: "
        "0 no change, 2 changes, 1 error.",
    )
    plan.add_argument("kind", nargs="?", help="kind of an existing CR (or KIND.GROUP)")
    plan.add_argument("name", nargs="?", help="name of an existing CR")
    plan.add_argument("-f", "--filename", help="a CR file (the CR may not exist yet)")
    plan.add_argument("-n", "--namespace", help="namespace of the CR (default: default)")
    plan.add_argument("--watches-file", default=defaults.WATCHES_FILE)
    plan.add_argument("--delete", action="store_true", help="plan the finalizer instead")
    plan.add_argument("-o", "--output", choices=("text", "json"), default="text")
    plan.add_argument("--ansible-args", default=defaults.ANSIBLE_ARGS)
    plan.add_argument(
        "--warm-ansible",
        choices=("true", "false"),
        default=str(defaults.WARM_ANSIBLE).lower(),
        help="fork Ansible from warm interpreters, as the operator does (default true)",
    )
    add_compat_argument(plan)


def _usage_error(args: argparse.Namespace) -> str:
    if args.filename and (args.kind or args.name):
        return "give either -f FILE or KIND NAME, not both"
    if not args.filename and not (args.kind and args.name):
        return "give -f FILE, or KIND NAME of an existing CR"
    return ""


def run_plan(args: argparse.Namespace) -> int:
    """The `plan` sub-command; returns the exit code."""
    problem = _usage_error(args)
    try:
        if problem:
            raise target.PlanInputError(problem)
        watches = load_watches(
            args.watches_file,
            max_concurrent_reconciles_default=defaults.MAX_CONCURRENT_RECONCILES,
            ansible_verbosity_default=defaults.ANSIBLE_VERBOSITY,
        )
        kube = Kube(load_api_client())
        found = _target(args, watches, kube)
        # As `run` does, before the warm servers start.
        compat = compat_mode.resolve(ansible_compat(args, os.environ))
        compat_mode.apply(compat, os.environ)
        plan = make_plan(
            found,
            kube=kube,
            ansible_args=args.ansible_args,
            deleting=args.delete,
            warm=args.warm_ansible == "true",
            compat_restores=compat.restores,
        )
    except OperatorError as err:
        print(f"ansible-operator plan: {' '.join(str(err).split())}", file=sys.stderr)
        return report.ERROR
    print(report.to_json(plan) if args.output == "json" else report.text(plan), end="")
    if args.output == "json":
        print()
    return report.exit_code(plan)


def _target(args: argparse.Namespace, watches: list[Watch], kube: Kube) -> target.Target:
    if args.filename:
        found = target.from_file(
            Path(args.filename), watches=watches, kube=kube, namespace=args.namespace
        )
    else:
        found = target.from_cluster(
            args.kind, args.name, watches=watches, kube=kube, namespace=args.namespace
        )
    if args.delete:
        found = target.deleting(found, now=datetime.datetime.now(datetime.UTC))
    return found


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
    """The plan of `found`, run by `runner` (the operator's own for drift checks,
    plan.drift) in a private runner directory, through a proxy of its own."""
    journal = Journal(kube)
    credentials = RunCredentials()
    proxy = ApiProxy(
        upstream=kube.api_client.configuration,
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
    meta = found.obj["metadata"]
    watch = found.watch
    runs = _runs(watch, deleting=deleting)
    return report.Plan(
        resource={
            "apiVersion": found.obj.get("apiVersion"),
            "kind": found.obj.get("kind"),
            "namespace": meta.get("namespace") or "",
            "name": meta.get("name"),
            "exists": found.exists,
        },
        mode="finalizer" if deleting else "reconcile",
        runs=runs,
        analysis=changes.analyze(journal.entries, cr=found.obj),
        error=_error(result),
        run_seconds=result.duration,
        deprecations=tuple(deprecations),
    )


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
    settings = ReconcileSettings(
        reconcile_period=0,
        ansible_args=f"{args} {CHECK_ARGS}".strip(),
        ansible_log_events="nothing",
        runner_root=root,
        run_timeout=None,
    )
    deleting = bool(meta.get("deletionTimestamp"))
    notes = RunNotes()
    with access.kubeconfig_for(
        found.obj, controller=controller_name(watch), read_only=True, notes=notes
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
    if result.outcome == "successful":
        return None
    if result.failures:
        return "; ".join(f.describe() for f in result.failures)
    tail = result.stdout_tail.strip().splitlines()[-3:]
    return f"Ansible run {result.outcome}: {' '.join(tail) or 'no output'}"
