"""`AnsibleRunner`: one Ansible run through ansible-runner's Python API, in the calling thread.

Where this sits: the controller's reconciler calls `AnsibleRunner.run(request)` from a
worker thread (see runner/base.py for the contract). This module is the only one that
imports `ansible_runner`. A run goes:

1. privatedir.prepare()  - refresh the resource's private data dir (extra vars, inventory ...);
   scratch.scratch_dir() - the run's own TMPDIR, seeded with the shared discovery cache
2. ansible_runner.run() - role mode (generated play, roles_path, hosts localhost, no facts)
   or playbook mode (absolute path, ANSIBLE_GATHERING=explicit unless the operator's
   environment sets it). Events arrive in-process through `event_handler`, one at a
   time; a RunObserver keeps the little the verdict needs, so memory stays bounded.
3. cancel/timeout      - `cancel_callback` polls the request's Event and deadline every
   `pexpect_timeout` seconds. ansible-runner then SIGKILLs only its child's process
   group, but ansible-core (2.19) puts every forked worker in a session of its own
   (WorkerProcess._detach calls setsid), so workers and the modules they run (a
   `sleep 60`, a kubectl ...) would survive as orphans. Every process of a run carries
   a unique marker (environment variable, or for processes forked from a warm server
   their process name); before ansible-runner's kill and again after the run we kill
   every process that carries it, plus the rest of those processes' sessions
   (runner/sweep.py), and remove the temporary directories the killed left behind.
   Warm runs (see the warm package): ansible-playbook and the modules are forked from
   the operator's warm servers; `warm.run_env()` and `warm.interpreter` put the shim
   first on PATH and the interpreter client into the inventory. A run whose helper
   died mid-run (client exit HELPER_DIED_EXIT) is swept like a killed one.
4. privatedir.finish_run() - keep the discovery cache, drop the TMPDIR, rotate artifacts,
   refresh `artifacts/latest`.

Credentials: ansible-runner copies the whole process environment into
`artifacts/<ident>/command`; the status hook rewrites that file before
ansible-playbook starts, keeping the values of well-known harmless variables only.
The kubeconfig reaches Ansible as a path. no_log results are censored by Ansible
before they reach us, and nothing here uncensors them.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.config import defaults
from ansible_operator.errors import RunSetupError
from ansible_operator.runner import nolog, privatedir, ptyreap, scratch, tempdirs
from ansible_operator.runner.base import FailedTask, RunOutcome, RunRequest, RunResult
from ansible_operator.runner.jobevents import JobEvent, RunObserver, RunSummary
from ansible_operator.runner.sweep import MARKER_ENV, kill_run_processes, remove_ansible_temp
from ansible_operator.warm.protocol import HELPER_DIED_EXIT
from ansible_operator.warm.supervisor import WarmServers

__all__ = ["MARKER_ENV", "AnsibleRunner", "kill_run_processes"]

log = logging.getLogger(__name__)

# MARKER_ENV (from runner/sweep.py): a per-run random value in the environment of
# every process of the run; it is how a timed-out or canceled run's processes are found.
_KEEP_ENV = frozenset({MARKER_ENV})
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _stdout_tail(path: Path, limit: int) -> str:
    """The last `limit` characters of Ansible's output, without colour codes."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 4 * limit))  # UTF-8: at most 4 bytes a character
            raw = handle.read()
    except OSError:
        return ""
    text = _ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r\n", "\n").strip()
    if len(text) > limit:
        text = text[-limit:]
        text = text.split("\n", 1)[-1] if "\n" in text else text  # drop the cut line
    return text


class _RunWatch:
    """The per-run state ansible-runner's callbacks share: verdict, cancel, timeout."""

    def __init__(self, request: RunRequest, *, marker: str, artifact_dir: Path) -> None:
        self.request = request
        self.observer = RunObserver()
        self.stop_reason: RunOutcome | None = None
        self._marker = marker
        self._artifact_dir = artifact_dir
        self._deadline = None if request.timeout is None else time.monotonic() + request.timeout
        self._killed = False
        self.killed_pids: set[int] = set()

    def on_event(self, raw: Any) -> bool:
        # Raising here would abort ansible-runner mid-run and orphan ansible-playbook.
        try:
            if isinstance(raw, MutableMapping):
                # Before ansible-runner writes the event and its stdout (runner/nolog.py).
                nolog.censor_event_output(raw)
            event = JobEvent.from_runner(raw if isinstance(raw, Mapping) else {})
            self.observer.observe(event)
        except Exception:
            log.exception("cannot interpret an ansible-runner event of job %s", self.request.ident)
            return True
        if self.request.on_event is not None:
            try:
                self.request.on_event(event)
            except Exception:
                log.exception("on_event hook failed for job %s", self.request.ident)
        return True  # keep writing artifacts/<ident>/job_events, as the Go operator does

    def on_status(self, data: Any, runner_config: Any = None) -> None:
        # "running" comes right after ansible-runner wrote the command file, before the spawn.
        if isinstance(data, Mapping) and data.get("status") == "running":
            privatedir.redact_command_file(self._artifact_dir / "command", keep=_KEEP_ENV)

    def should_stop(self) -> bool:
        if self.stop_reason is None:
            if self.request.cancel.is_set():
                self.stop_reason = RunOutcome.CANCELED
            elif self._deadline is not None and time.monotonic() >= self._deadline:
                self.stop_reason = RunOutcome.TIMEOUT
            else:
                return False
        if not self._killed:
            self._killed = True
            try:
                self.killed_pids.update(kill_run_processes(self._marker))
            except OSError as error:
                log.warning("cannot kill the processes of job %s: %s", self.request.ident, error)
        return True


@dataclass(frozen=True)
class _Finished:
    status: str
    rc: int | None


def _call_ansible_runner(kwargs: dict[str, Any]) -> _Finished:
    """`ansible_runner.run`, typed: only the status and the exit code matter afterwards."""
    # Imported by the first run, not with this module: ansible-runner brings pexpect,
    # ptyprocess and its config classes (about 40 modules), which an operator that
    # only watches never needs (tests/unit/test_startup_imports.py).
    import ansible_runner  # noqa: PLC0415
    from ansible_runner.exceptions import ConfigurationError  # noqa: PLC0415

    ptyreap.install()  # no fixed 0.1 s sleep after each run (see runner/ptyreap.py)
    try:
        finished = ansible_runner.run(**kwargs)
    except ConfigurationError as error:
        raise RunSetupError(f"ansible-runner rejected the run: {error}") from error
    rc = getattr(finished, "rc", None)
    return _Finished(str(getattr(finished, "status", "")), rc if isinstance(rc, int) else None)


def _validate(request: RunRequest) -> None:
    if (request.playbook is None) == (request.role is None):
        raise RunSetupError("a run needs exactly one of a playbook and a role")
    target = request.playbook or request.role
    assert target is not None
    if not target.is_absolute():
        raise RunSetupError(f"playbook/role path must be absolute: {target}")
    ident = request.ident
    if not ident or ident.startswith(".") or "/" in ident or ident == privatedir.LATEST:
        raise RunSetupError(f"invalid run ident {ident!r}")
    if request.timeout is not None and request.timeout <= 0:
        raise RunSetupError(f"run timeout must be positive, got {request.timeout}")


def _verdict(
    stop_reason: RunOutcome | None, finished: _Finished, summary: RunSummary
) -> tuple[RunOutcome, tuple[FailedTask, ...]]:
    if stop_reason is not None:
        return stop_reason, summary.failures
    if not summary.saw_stats:
        return RunOutcome.ERROR, ()
    if summary.failures:
        return RunOutcome.FAILED, summary.failures
    if finished.rc not in (0, None):
        # Never seen in practice; a silent success would be worse than this message.
        message = f"ansible-playbook exited with code {finished.rc} although no task failed"
        return RunOutcome.FAILED, (FailedTask(task="", action="", host="", message=message),)
    return RunOutcome.SUCCESSFUL, ()


class AnsibleRunner:
    """Runs Ansible through ansible-runner, synchronously, in the calling thread.

    `root` is the parent of every resource's private data dir (default
    `config.defaults.RUNNER_DIR_ROOT`, the Go operator's `/tmp/ansible-operator/runner`;
    a request's `runner_root` overrides it); `python` is the interpreter the default
    inventory pins and whose bin/ directory goes first on PATH. With `warm` (the warm
    package's servers, started by the caller) the run's PATH starts with the warm
    `ansible-playbook` shim and the default inventory names the warm interpreter
    client; without it every run is cold. `extra_env` goes into every run's
    environment (the lifeline's owner value, runner/lifeline.py).
    """

    def __init__(
        self,
        *,
        root: Path | None = None,
        python: str = sys.executable,
        pexpect_timeout: float = 0.25,
        stdout_tail_chars: int = 8192,
        warm: WarmServers | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self._root = Path(defaults.RUNNER_DIR_ROOT) if root is None else root
        self._python = python
        self._warm = warm
        self._extra_env = dict(extra_env or {})
        self._settings = {"pexpect_timeout": pexpect_timeout}
        self._tail_chars = stdout_tail_chars

    def run(self, request: RunRequest) -> RunResult:
        _validate(request)
        if request.cancel.is_set():  # shutting down already: do not even start
            return RunResult(ident=request.ident, outcome=RunOutcome.CANCELED)
        if self._warm is None:
            return self._run(request, warm_env={})
        # The warm servers start with the first run and stop when idle: held meanwhile.
        warm_env = self._warm.acquire()
        try:
            return self._run(request, warm_env=warm_env)
        finally:
            self._warm.release()

    def _run(self, request: RunRequest, *, warm_env: Mapping[str, str]) -> RunResult:
        started = time.monotonic()
        environ = dict(os.environ)
        root = request.runner_root or self._root
        data_dir = privatedir.prepare(
            request,
            root=root,
            environ=environ,
            python=self._python if self._warm is None else self._warm.interpreter,
            settings=self._settings,
        )
        artifact_dir = data_dir / "artifacts" / request.ident
        if artifact_dir.exists():
            raise RunSetupError(f"run ident {request.ident} was already used: {artifact_dir}")
        marker = uuid.uuid4().hex
        watch = _RunWatch(request, marker=marker, artifact_dir=artifact_dir)
        kwargs = self._runner_kwargs(request, data_dir, environ, watch, marker=marker)
        kwargs["envvars"] |= warm_env
        tmpdir = scratch.scratch_dir(data_dir, request.ident, root=root)
        kwargs["envvars"] |= tempdirs.run_temp_env(tmpdir, environ)
        finished: _Finished | None = None
        killed = True
        try:
            finished = _call_ansible_runner(kwargs)
            # A warm helper that died mid-run left the run's forked processes behind.
            killed = watch.stop_reason is not None or finished.rc == HELPER_DIED_EXIT
        finally:
            if killed:
                # Stragglers forked during the first sweep, then what the dead left behind.
                watch.killed_pids.update(kill_run_processes(marker))
                remove_ansible_temp(watch.killed_pids, environ)
            privatedir.finish_run(
                data_dir,
                ident=request.ident,
                max_artifacts=request.max_artifacts,
                root=root,
                completed=not killed,
                alias=tmpdir,
            )
        return self._result(request, watch, finished, artifact_dir, time.monotonic() - started)

    def _runner_kwargs(
        self,
        request: RunRequest,
        data_dir: Path,
        environ: Mapping[str, str],
        watch: _RunWatch,
        *,
        marker: str,
    ) -> dict[str, Any]:
        bin_dir = os.path.dirname(self._python)  # where ansible-playbook lives
        path = [bin_dir, environ.get("PATH", "")]
        env = {**self._extra_env, MARKER_ENV: marker}
        if self._warm is not None:
            path.insert(0, str(self._warm.bin_dir))  # the warm ansible-playbook shim
        env["PATH"] = os.pathsep.join(filter(None, path))
        gathering = environ.get("ANSIBLE_GATHERING", "")
        if not gathering:
            env["ANSIBLE_GATHERING"] = "explicit"  # facts cost ~1.1 s per run
        kwargs: dict[str, Any] = {
            "private_data_dir": str(data_dir),
            "ident": request.ident,
            "envvars": env,
            "verbosity": max(request.verbosity, 0) or None,
            "quiet": True,  # output goes to artifacts and to on_event, not our stdout
            "suppress_env_files": True,  # privatedir owns env/*
            "rotate_artifacts": 0,  # privatedir rotates (ansible-runner trips on `latest`)
            "event_handler": watch.on_event,
            "status_handler": watch.on_status,
            "cancel_callback": watch.should_stop,  # also stops runner's signal handlers
        }
        if request.role is not None:
            # A colon-joined string: ansible-runner 2.4.3 mangles a list here. The
            # operator's own ANSIBLE_ROLES_PATH stays reachable for role dependencies.
            roles_path = [str(request.role.parent), environ.get("ANSIBLE_ROLES_PATH", "")]
            kwargs |= {
                "role": request.role.name,
                "roles_path": ":".join(filter(None, roles_path)),
                "hosts": "localhost",
                "role_skip_facts": gathering.lower() in {"", "explicit"},
            }
        else:
            kwargs["playbook"] = str(request.playbook)
        return kwargs

    def _result(
        self,
        request: RunRequest,
        watch: _RunWatch,
        finished: _Finished,
        artifact_dir: Path,
        duration: float,
    ) -> RunResult:
        summary = watch.observer.summary()
        outcome, failures = _verdict(watch.stop_reason, finished, summary)
        tail = ""
        if outcome is not RunOutcome.SUCCESSFUL:
            tail = _stdout_tail(artifact_dir / "stdout", self._tail_chars)
        log.debug(
            "job %s for %s %s ended %s (ansible-runner %s, rc %s, %d events, %.2fs)",
            request.ident,
            request.gvk,
            request.resource,
            outcome,
            finished.status,
            finished.rc,
            watch.observer.events_seen,
            duration,
        )
        return RunResult(
            ident=request.ident,
            outcome=outcome,
            failures=failures,
            stats=summary.stats,
            requeue_after=summary.requeue_after,
            rc=finished.rc,
            duration=duration,
            stdout_tail=tail,
            artifacts_dir=artifact_dir,
        )
