"""The seam between reconciling a custom resource and performing one Ansible run for it.

Where this sits: the controller's reconciler builds a `RunRequest` for one custom
resource (extra vars, kubeconfig path, verbosity, artifact retention ...), hands it to
a `Runner` from a worker thread and turns the returned `RunResult` into status
conditions, Events, metrics and a requeue decision. Nothing here talks to Kubernetes.

What the controller makes of a `RunResult` (the Failure condition's text, the
Events) is controller/reporting.py's. Two implementations ship with the package:

    runner.ansible.AnsibleRunner   runs ansible-runner in the calling thread
    runner.fakerunner.FakeRunner         scripted results, for tests of the layers above

Both take and return the frozen dataclasses below, so the controller never sees an
ansible-runner object.
"""

from __future__ import annotations

import enum
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ansible_operator.runner.jobevents import JobEvent

__all__ = [
    "EventCallback",
    "FailedTask",
    "RunOutcome",
    "RunRequest",
    "RunResult",
    "Runner",
    "Stats",
    "new_ident",
]

EventCallback = Callable[["JobEvent"], None]
"""Receives every job event of a run, in order, on the thread that performs the run."""


def new_ident() -> str:
    """A fresh run identifier shaped like the Go operator's: a random non-negative int63 in decimal.

    It names the artifacts directory of the run and is logged as the `job` field.
    """
    return str(secrets.randbits(63))


class RunOutcome(enum.StrEnum):
    """How a run ended, from the operator's point of view (not ansible-runner's `status`)."""

    SUCCESSFUL = "successful"
    """The playbook completed and no failure counted (ignored and rescued ones do not)."""
    FAILED = "failed"
    """The playbook completed (stats were reported) and at least one task failed or a host
    was unreachable; `RunResult.failures` says which."""
    TIMEOUT = "timeout"
    """`RunRequest.timeout` expired; every process of the run was killed."""
    CANCELED = "canceled"
    """`RunRequest.cancel` was set (operator shutdown); every process of the run was killed."""
    ERROR = "error"
    """Ansible ended without a recap (syntax error, role not found, missing binary ...);
    `RunResult.stdout_tail` carries what it printed."""


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """Everything needed to run Ansible once for one custom resource.

    `playbook` and `role` are absolute paths; exactly one of them is set. `extravars` are
    complete (built by the caller) and are written verbatim as `env/extravars`.
    """

    ident: str
    """Unique per run (see `new_ident`); names `artifacts/<ident>`."""
    group: str
    """API group of the custom resource; "" for the core group."""
    version: str
    kind: str
    namespace: str
    """"" for cluster-scoped resources."""
    name: str
    verbosity: int
    """Number of `-v` flags; 0 or less passes none (the Go operator's default is 2)."""
    max_artifacts: int
    """How many `artifacts/<ident>` directories to keep for this resource; 0 keeps all."""
    playbook: Path | None = None
    role: Path | None = None
    extravars: Mapping[str, Any] = field(default_factory=dict)
    ansible_args: str = ""
    """The `--ansible-args` text, e.g. "'--tags x'" (one pair of wrapping quotes is dropped)."""
    kubeconfig: Path | None = None
    """A file whose path (never its content) is exported as K8S_AUTH_KUBECONFIG and KUBECONFIG."""
    timeout: float | None = None
    """Seconds after which the run is killed (`RunOutcome.TIMEOUT`); None = no limit."""
    cancel: threading.Event = field(default_factory=threading.Event)
    """Set it (e.g. at shutdown) to kill the run promptly (`RunOutcome.CANCELED`)."""
    on_event: EventCallback | None = None
    """Optional hook for logging/metrics; exceptions it raises are logged and swallowed."""
    runner_root: Path | None = None
    """Parent of the private data dirs for this run; None uses the runner's own root."""

    @property
    def resource(self) -> str:
        """`namespace/name` (or `name` when cluster-scoped), for messages and log fields."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def gvk(self) -> str:
        """`group/version, Kind=kind` as Kubernetes prints a GroupVersionKind."""
        api_version = f"{self.group}/{self.version}" if self.group else self.version
        return f"{api_version}, Kind={self.kind}"


@dataclass(frozen=True, kw_only=True)
class FailedTask:
    """One failure that made a run fail: a task that failed for real or an unreachable host."""

    task: str
    """Task name as Ansible prints it (the action when the task has no name); "" if unknown."""
    action: str
    """Module/action, e.g. `kubernetes.core.k8s`; "" if unknown."""
    host: str
    message: str
    """The module's message (`res.msg`, else stderr, else "unknown playbook failure").
    Hidden when the task had `no_log: true`."""
    role: str = ""
    unreachable: bool = False

    def describe(self) -> str:
        """One line naming the task and carrying the message, for status and logs."""
        if not self.task:
            return self.message
        name = f"{self.role} : {self.task}" if self.role else self.task
        what = "unreachable" if self.unreachable else "failed"
        return f"task [{name}] {what} on {self.host}: {self.message}"


@dataclass(frozen=True, kw_only=True)
class Stats:
    """The recap of one host (the Go operator reports host `localhost` only)."""

    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    completion: str = ""
    """When the recap was emitted, in the Go layout `2006-01-02T15:04:05.99999999+00:00`."""
    unreachable: int = 0
    rescued: int = 0
    ignored: int = 0


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What one run did. Never carries secrets: no_log results stay hidden everywhere."""

    ident: str
    outcome: RunOutcome
    failures: tuple[FailedTask, ...] = ()
    stats: Stats | None = None
    """Recap for host `localhost`; None when Ansible never printed a recap."""
    requeue_after: float | None = None
    """Seconds requested by the first successful `requeue_after` task, if any."""
    rc: int | None = None
    """Exit code of ansible-playbook (254 when killed, 127 when it could not be started)."""
    duration: float = 0.0
    stdout_tail: str = ""
    """The end of Ansible's output (bounded, colour codes removed); empty on success."""
    artifacts_dir: Path | None = None
    """`<private data dir>/artifacts/<ident>`, kept until rotated away."""

    @property
    def succeeded(self) -> bool:
        return self.outcome is RunOutcome.SUCCESSFUL


@runtime_checkable
class Runner(Protocol):
    """Performs one Ansible run, synchronously, in the calling (worker) thread.

    Raises `ansible_operator.errors.RunSetupError` when the run could not even be
    prepared (bad request, unusable inventory, unwritable directory); every other way a
    run can end is described by the returned `RunResult`.
    """

    def run(self, request: RunRequest) -> RunResult: ...
