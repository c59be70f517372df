"""The operator's drift-check planner: `ansible-operator plan KIND NAME`, inside the operator.

Where it sits: the cli hands `make_planner` to controller.manager, which
builds one planner at start-up with the operator's client and Ansible runner
(its warm servers included) and gives it to controller.drift. The controller
layer cannot import this one (plan sits above it), hence the injection.

A drift check is exactly the plan of the existing CR as it is
(plan.command.plan_with: the reconcile's run request, check and diff mode,
a read-only proxy of its own, a private runner directory): the objects the
role would create, update or delete are the drift; the CR's own status and
the Events the role would write are not.
"""

from __future__ import annotations

import threading
from typing import Any

from ansible_operator.config.watches import Watch
from ansible_operator.controller.drift import Findings, Planner
from ansible_operator.errors import OperatorError
from ansible_operator.kube.client import Kube, ResourceInfo
from ansible_operator.plan import target
from ansible_operator.plan.changes import Analysis
from ansible_operator.plan.command import plan_with
from ansible_operator.runner.base import Runner

DRIFT_ACTIONS = frozenset({"create", "update", "delete"})


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


def make_planner(
    *,
    kube: Kube,
    runner: Runner,
    ansible_args: str,
    inject_owner_ref: bool,
    cancel: threading.Event,
    compat_restores: bool = False,
) -> Planner:
    """A Planner for controller.drift, running plans with the operator's `runner`."""

    def plan(watch: Watch, resource: ResourceInfo, obj: dict[str, Any]) -> Findings:
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

    return plan
