"""watches.yaml: which kinds the operator watches and which Ansible content reconciles them.

Called once at start-up by the controller (before anything is watched) and
by `ansible-operator validate`: :func:`load_watches` returns one frozen
:class:`Watch` per entry, or raises :class:`WatchesError` naming the file, the
entry, the key and the problem. The load follows the Go operator step by step:

1. read the file;
2. expand environment variables over the raw text (:mod:`.envexpand`);
3. parse it as go-yaml v2 does (:mod:`.goyaml`) and decode it onto the Go
   operator's struct (:data:`ALIAS`) as sigs.k8s.io/yaml + encoding/json do
   (:mod:`.gojson`);
4. per entry: defaults (:mod:`.defaults`), GVK check, per-GVK environment
   variables (:mod:`.envexpand`), role and playbook paths;
5. per entry again: duplicate GVK, then validation (paths, finalizer, selector
   via :mod:`.selectors`).

The values it returns are config/watchmodel.py's. Where we deliberately differ
from the Go operator is listed in docs/watches.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.config import defaults
from ansible_operator.config.ansiblepaths import Target, find_target
from ansible_operator.config.durations import format_go_duration
from ansible_operator.config.envexpand import (
    expand_env,
    gvk_ansible_verbosity,
    gvk_env_var,
    gvk_max_concurrent_reconciles,
)
from ansible_operator.config.gojson import (
    ALIAS,
    WATCHES_FILE,
    Note,
    Where,
    decode,
    describe,
    field_for,
    mismatch,
)
from ansible_operator.config.goyaml import DecodeFailure, parse_yaml
from ansible_operator.config.selectors import LabelSelector, SelectorError, selector_from_state
from ansible_operator.config.watchmodel import (
    GVK,
    Finalizer,
    Watch,
    WatchesError,
    entry_label,
    summarize,
)

# The loaded values live in config/watchmodel.py; importing them from here works too.
__all__ = ["GVK", "Finalizer", "Watch", "WatchesError", "load_watches", "summarize"]

log = logging.getLogger("ansible_operator.config")


_IGNORED_KEY_HINTS = {
    "maxconcurrentreconciles": ("MAX_CONCURRENT_RECONCILES", "--max-concurrent-reconciles"),
    "maxworkers": ("MAX_CONCURRENT_RECONCILES", "--max-concurrent-reconciles"),
    "ansibleverbosity": ("ANSIBLE_VERBOSITY", "--ansible-verbosity"),
}


@dataclass(frozen=True)
class _Load:
    """What one load_watches call works with, so helpers need not take ten arguments."""

    file: str
    cwd: Path
    environ: Mapping[str, str]
    max_concurrent_reconciles: int
    ansible_verbosity: int


@dataclass(frozen=True)
class _Draft:
    """An entry after the first pass: decoded, GVK checked, environment read, paths looked up."""

    index: int
    gvk: GVK
    state: Mapping[str, Any]
    max_concurrent_reconciles: int
    ansible_verbosity: int
    target: Target | None
    finalizer_target: Target | None


def _read(path: Path, load: _Load) -> str:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise WatchesError(load.file, f"cannot be read: {error.strerror or error}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise WatchesError(load.file, f"is not UTF-8 text (byte {error.start})") from None


def _entries(text: str, load: _Load) -> list[Any]:
    try:
        data = parse_yaml(text)
    except DecodeFailure as failure:
        raise WatchesError(load.file, failure.problem, reference=failure.reference) from None
    if data is None:
        return []  # an empty file: no watches, the operator idles
    if not isinstance(data, list):
        reference = mismatch(data, WATCHES_FILE, Where()).reference
        problem = f"the top level must be a list of watches, got {describe(data)}"
        raise WatchesError(load.file, problem, reference=reference)
    return data


def _peek_gvk(raw: Any) -> GVK | None:
    # For messages about an entry that failed to decode: its GVK if that much decodes.
    if not isinstance(raw, dict):
        return None
    wanted = {"group", "version", "kind"}
    part = {k: v for k, v in raw.items() if (f := field_for(ALIAS, k)) and f.key in wanted}
    try:
        state = decode(None, part, ALIAS, Where(), [])
    except DecodeFailure:
        return None
    return _gvk_of(state)


def _gvk_of(state: Mapping[str, Any]) -> GVK:
    return GVK(state.get("group") or "", state.get("version") or "", state.get("kind") or "")


def _log_notes(notes: list[Note], label: str, gvk: GVK) -> None:
    for note in notes:
        if note.kind == "duplicate":
            log.warning(
                "%s: keys %s both set %s; the last in byte order wins, as in the Go operator",
                label,
                note.detail,
                note.path,
            )
            continue
        hint = _IGNORED_KEY_HINTS.get(note.path.lower())
        extra = f" (set {gvk_env_var(hint[0], gvk)} or {hint[1]} instead)" if hint else ""
        log.warning("%s: unknown key %r is ignored%s", label, note.path, extra)


def _decode_entry(index: int, raw: Any, load: _Load) -> Mapping[str, Any]:
    notes: list[Note] = []
    try:
        state = decode(None, raw, ALIAS, Where(), notes) or {}
    except DecodeFailure as failure:
        raise WatchesError(
            load.file,
            failure.problem,
            entry=index,
            gvk=_peek_gvk(raw),
            key=failure.path or None,
            reference=failure.reference,
        ) from None
    gvk = _gvk_of(state)
    _log_notes(notes, entry_label(load.file, index, gvk), gvk)
    return dict(state)


def _prepare(index: int, state: Mapping[str, Any], load: _Load) -> _Draft:
    gvk = _gvk_of(state)
    for key in ("version", "kind"):
        if not getattr(gvk, key):
            problem = f"invalid GVK: {gvk}: {key} must not be empty"
            raise WatchesError(load.file, problem, entry=index, gvk=gvk, key=key)
    label = entry_label(load.file, index, gvk)
    finalizer = state.get("finalizer")

    def locate(part: Mapping[str, Any], prefix: str) -> Target | None:
        return find_target(part, prefix=prefix, label=label, cwd=load.cwd, environ=load.environ)

    return _Draft(
        index=index,
        gvk=gvk,
        state=state,
        max_concurrent_reconciles=gvk_max_concurrent_reconciles(
            gvk, default=load.max_concurrent_reconciles, environ=load.environ
        ),
        ansible_verbosity=gvk_ansible_verbosity(
            gvk, default=load.ansible_verbosity, environ=load.environ
        ),
        target=locate(state, ""),
        finalizer_target=locate(finalizer, "finalizer.") if finalizer else None,
    )


def _check(target: Target | None, draft: _Draft, load: _Load, *, key: str, missing: str) -> None:
    if target is None:
        problem = f"must specify Role or Playbook: {missing}"
        raise WatchesError(load.file, problem, entry=draft.index, gvk=draft.gvk, key=key)
    if target.found is None:
        raise WatchesError(
            load.file, target.problem(), entry=draft.index, gvk=draft.gvk, key=target.key
        )


def _finalizer(draft: _Draft, load: _Load) -> Finalizer | None:
    state = draft.state.get("finalizer")
    if state is None:
        return None
    if not state.get("name"):
        raise WatchesError(
            load.file,
            "finalizer must have name",
            entry=draft.index,
            gvk=draft.gvk,
            key="finalizer.name",
        )
    variables = dict(state.get("vars") or {})
    target = draft.finalizer_target
    # Unlike the Go operator, a role or playbook that does not exist is an
    # error even when vars are present: it would only fail at deletion time.
    if target is not None or not variables:
        missing = "a finalizer needs a role, a playbook or vars"
        _check(target, draft, load, key="finalizer", missing=missing)
    return Finalizer(
        name=state["name"],
        playbook=target.found if target and target.is_playbook else None,
        role=target.found if target and not target.is_playbook else None,
        vars=variables,
    )


def _selector(draft: _Draft, load: _Load) -> LabelSelector | None:
    try:
        return selector_from_state(draft.state.get("selector") or {})
    except SelectorError as error:
        key = f"selector.{error.path}"
        raise WatchesError(
            load.file, error.message, entry=draft.index, gvk=draft.gvk, key=key
        ) from None


def _flag(state: Mapping[str, Any], key: str, default: bool) -> bool:
    value = state.get(key)
    return default if value is None else bool(value)


def _drift(draft: _Draft, load: _Load) -> tuple[float, bool]:
    """driftCheckPeriod and observeOnly (ours): the period in seconds, and the flag.

    observeOnly without a period checks every OBSERVE_ONLY_DRIFT_CHECK_PERIOD.
    """
    period = draft.state.get("driftCheckPeriod")
    observe_only = _flag(draft.state, "observeOnly", False)
    if period is not None and period < 0:
        raise WatchesError(
            load.file,
            f"must not be negative, got {format_go_duration(period)}",
            entry=draft.index,
            gvk=draft.gvk,
            key="driftCheckPeriod",
        )
    if not period:
        period = defaults.OBSERVE_ONLY_DRIFT_CHECK_PERIOD if observe_only else 0.0
    return float(period), observe_only


def _finish(draft: _Draft, load: _Load) -> Watch:
    missing = "the entry has neither a role nor a playbook key"
    _check(draft.target, draft, load, key="role", missing=missing)
    assert draft.target is not None
    finalizer = _finalizer(draft, load)
    state = draft.state
    is_playbook = draft.target.is_playbook
    period = state.get("reconcilePeriod")
    drift_period, observe_only = _drift(draft, load)
    return Watch(
        gvk=draft.gvk,
        playbook=draft.target.found if is_playbook else None,
        role=None if is_playbook else draft.target.found,
        vars=dict(state.get("vars") or {}),
        # A literal 0 means the default too, as in the Go operator.
        max_runner_artifacts=state.get("maxRunnerArtifacts") or defaults.MAX_RUNNER_ARTIFACTS,
        reconcile_period=defaults.WATCH_RECONCILE_PERIOD if period is None else period,
        manage_status=_flag(state, "manageStatus", defaults.MANAGE_STATUS),
        watch_dependent_resources=_flag(
            state, "watchDependentResources", defaults.WATCH_DEPENDENT_RESOURCES
        ),
        watch_cluster_scoped_resources=_flag(
            state, "watchClusterScopedResources", defaults.WATCH_CLUSTER_SCOPED_RESOURCES
        ),
        snake_case_parameters=_flag(state, "snakeCaseParameters", defaults.SNAKE_CASE_PARAMETERS),
        watch_annotations_changes=_flag(
            state, "watchAnnotationsChanges", defaults.WATCH_ANNOTATIONS_CHANGES
        ),
        mark_unsafe=_flag(state, "markUnsafe", defaults.MARK_UNSAFE),
        selector=_selector(draft, load),
        blacklist=tuple(_gvk_of(item) for item in state.get("blacklist") or ()),
        finalizer=finalizer,
        max_concurrent_reconciles=draft.max_concurrent_reconciles,
        ansible_verbosity=draft.ansible_verbosity,
        drift_check_period=drift_period,
        observe_only=observe_only,
    )


def load_watches(
    path: str | os.PathLike[str],
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    max_concurrent_reconciles_default: int,
    ansible_verbosity_default: int,
) -> list[Watch]:
    """Load, check and resolve watches.yaml; raise WatchesError for the first problem.

    `cwd` stands for the process working directory everywhere the Go operator
    uses it (a relative `path`, playbooks, roles); `environ` for the process
    environment (never modified). The two defaults are the values of
    --max-concurrent-reconciles and --ansible-verbosity, which per-kind
    environment variables may override.
    """
    base = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    load = _Load(
        file=str(Path(path)),
        cwd=base,
        environ=os.environ if environ is None else environ,
        max_concurrent_reconciles=max_concurrent_reconciles_default,
        ansible_verbosity=ansible_verbosity_default,
    )
    text = expand_env(_read(base / path, load), load.environ)
    states = [_decode_entry(index, raw, load) for index, raw in enumerate(_entries(text, load))]
    drafts = [_prepare(index, state, load) for index, state in enumerate(states)]
    first_seen: dict[GVK, int] = {}
    watches = []
    for draft in drafts:
        if draft.gvk in first_seen:
            problem = (
                f"duplicate GVK: {draft.gvk} (entry {first_seen[draft.gvk]} watches it already)"
            )
            raise WatchesError(load.file, problem, entry=draft.index, gvk=draft.gvk)
        first_seen[draft.gvk] = draft.index
        watches.append(_finish(draft, load))
    return watches
