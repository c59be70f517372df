"""What one watches.yaml entry says, once loaded: `Watch`, its `Finalizer` and `GVK`.

Where this sits: config/watches.py's `load_watches` builds these frozen values
(or raises `WatchesError`) once at start-up; every other layer reads them
(the controller per watch, launch/request.py per run, plan for a CR's watch).
`summarize` is the one-line description `ansible-operator validate` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_operator.config import defaults
from ansible_operator.config.durations import format_go_duration
from ansible_operator.config.selectors import LabelSelector
from ansible_operator.errors import ConfigError

__all__ = ["GVK", "Finalizer", "Watch", "WatchesError", "entry_label", "summarize"]


@dataclass(frozen=True, order=True)
class GVK:
    """Group, version and kind of a watched resource; the core group is ""."""

    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        # apimachinery's GroupVersionKind.String(), used in Go's messages and metric labels.
        return f"{self.group}/{self.version}, Kind={self.kind}"


@dataclass(frozen=True)
class Finalizer:
    """What to run when a CR is deleted; with neither playbook nor role the watch's own runs."""

    name: str
    playbook: Path | None = None
    role: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Watch:
    """One watches.yaml entry, defaults applied and paths resolved.

    `reconcile_period` is in seconds; 0 means "use --reconcile-period".
    `playbook` and `role` are absolute; when both were written the playbook is
    kept and `role` is None, which is what the Go operator runs.
    """

    gvk: GVK
    playbook: Path | None = None
    role: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    max_runner_artifacts: int = defaults.MAX_RUNNER_ARTIFACTS
    reconcile_period: float = defaults.WATCH_RECONCILE_PERIOD
    manage_status: bool = defaults.MANAGE_STATUS
    watch_dependent_resources: bool = defaults.WATCH_DEPENDENT_RESOURCES
    watch_cluster_scoped_resources: bool = defaults.WATCH_CLUSTER_SCOPED_RESOURCES
    snake_case_parameters: bool = defaults.SNAKE_CASE_PARAMETERS
    watch_annotations_changes: bool = defaults.WATCH_ANNOTATIONS_CHANGES
    mark_unsafe: bool = defaults.MARK_UNSAFE
    selector: LabelSelector | None = None
    blacklist: tuple[GVK, ...] = ()
    finalizer: Finalizer | None = None
    max_concurrent_reconciles: int = defaults.MAX_CONCURRENT_RECONCILES
    ansible_verbosity: int = defaults.ANSIBLE_VERBOSITY
    # Ours (docs/plan.md, "Drift checks and observe-only"): seconds between drift
    # checks of each CR (0: none), and whether the role never runs for real.
    drift_check_period: float = defaults.WATCH_DRIFT_CHECK_PERIOD
    observe_only: bool = False

    @property
    def group(self) -> str:
        return self.gvk.group

    @property
    def version(self) -> str:
        return self.gvk.version

    @property
    def kind(self) -> str:
        return self.gvk.kind

    @property
    def controller_name(self) -> str:
        """The Go operator's controller name, e.g. `memcached-v1alpha1-controller`: the
        watch's work-queue name (contract.Key.controller) and metrics label."""
        return f"{self.gvk.kind.lower()}-{self.gvk.version.lower()}-controller"


def entry_label(file: str, index: int, gvk: GVK | None) -> str:
    """`<file>: entry N (<gvk>)`, how messages name a watches.yaml entry."""
    shown = gvk is not None and any((gvk.group, gvk.version, gvk.kind))
    return f"{file}: entry {index} ({gvk})" if shown else f"{file}: entry {index}"


class WatchesError(ConfigError):
    """watches.yaml cannot be used. The message reads `file: entry N (gvk): key: problem`.

    `reference` is the Go operator's own wording for the same failure when it
    differs from ours; it is appended so that people searching for it find it.
    """

    def __init__(
        self,
        file: str,
        problem: str,
        *,
        entry: int | None = None,
        gvk: GVK | None = None,
        key: str | None = None,
        reference: str | None = None,
    ) -> None:
        self.file, self.problem, self.entry = file, problem, entry
        self.gvk, self.key, self.reference = gvk, key, reference
        text = file if entry is None else entry_label(file, entry, gvk)
        text += f": {key}: {problem}" if key else f": {problem}"
        if reference and reference not in problem:
            text += f" [Go ansible-operator: {reference}]"
        super().__init__(text)


def summarize(watch: Watch) -> str:
    """One line describing `watch`, for `ansible-operator validate`."""
    runs = f"playbook {watch.playbook}" if watch.playbook else f"role {watch.role}"
    period = format_go_duration(watch.reconcile_period) if watch.reconcile_period else "flag"
    settings: dict[str, object] = {
        "reconcilePeriod": period,
        "maxRunnerArtifacts": watch.max_runner_artifacts,
        "manageStatus": watch.manage_status,
        "watchDependentResources": watch.watch_dependent_resources,
        "watchClusterScopedResources": watch.watch_cluster_scoped_resources,
        "snakeCaseParameters": watch.snake_case_parameters,
        "watchAnnotationsChanges": watch.watch_annotations_changes,
        "markUnsafe": watch.mark_unsafe,
        "maxConcurrentReconciles": watch.max_concurrent_reconciles,
        "ansibleVerbosity": watch.ansible_verbosity,
    }
    if watch.drift_check_period:
        settings["driftCheckPeriod"] = format_go_duration(watch.drift_check_period)
    if watch.observe_only:
        settings["observeOnly"] = True
    if watch.vars:
        settings["vars"] = ",".join(sorted(watch.vars))
    if watch.selector is not None:
        settings["selector"] = repr(watch.selector.to_query())
    if watch.blacklist:
        settings["blacklist"] = f"[{'; '.join(map(str, watch.blacklist))}]"
    if watch.finalizer is not None:
        fin = watch.finalizer
        settings["finalizer"] = f"{fin.name} ({fin.playbook or fin.role or 'own playbook/role'})"
    shown = (f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in settings.items())
    return f"{watch.gvk}: {runs}, " + ", ".join(shown)
