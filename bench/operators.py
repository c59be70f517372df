"""Start and stop the two operators under test, identically configured.

Used by `bench.run`. Both get bench/project as working directory and
watches.yaml, `WATCH_NAMESPACE` set to the scenario's fresh namespace, the
same concurrency, `ANSIBLE_GATHERING=explicit` (the scaffold's Dockerfile sets
it for the Go operator; ours defaults to it), a private `TMPDIR` (so temporary
kubeconfigs that are not cleaned up show as leaks), health probes on a free
loopback port, metrics off, leader election off. Output (stdout and stderr)
goes to a log file.

* `python` - ours, `.venv/bin/ansible-operator run`, with `.venv/bin` first on PATH
  and `--runner-dir` in the work dir; its API proxy and user-metrics API on free
  loopback ports.
* `go` - the reference built by `bench.reference`, with the reference venv's
  `bin` first on PATH (its `ansible-runner`) and `VIRTUAL_ENV` pointing at it
  (the Go operator then writes that interpreter into each run's inventory). Its
  runner dir is fixed at /tmp/ansible-operator/runner and its API proxy at
  localhost:8888, so only one runs at a time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench import procs
from bench.cluster import GROUP, KINDS, PROJECT, VERSION
from bench.reference import Reference

REPO = Path(__file__).resolve().parent.parent
OUR_BIN = Path(sys.executable).parent
GO_RUNNER_ROOT = Path("/tmp/ansible-operator/runner")
GO_FIXED_PORTS = (8888, 5050)  # its API proxy and its user-metrics API, both hard-coded


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for_free_ports(ports: tuple[int, ...], timeout: float) -> list[int]:
    """Wait until nothing listens on `ports` (other people's operators may, briefly);
    return those still taken at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        busy = [p for p in ports if port_in_use(p)]
        if not busy or time.monotonic() > deadline:
            return busy
        time.sleep(2)


class OperatorExited(RuntimeError):
    """The operator process ended before it became ready."""


@dataclass
class OperatorRun:
    """One started operator process, watching one namespace."""

    name: str
    argv: list[str]
    env: dict[str, str]
    workdir: Path
    namespace: str
    runner_root: Path
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ready_after: float = 0.0
    health_port: int = 0

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def tmpdir(self) -> Path:
        return Path(self.env["TMPDIR"])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def runner_dirs(self) -> list[Path]:
        """This namespace's per-CR runner directories, one per kind."""
        return [
            self.runner_root / GROUP / VERSION / kind / self.namespace for kind in sorted(KINDS)
        ]

    def start(self, timeout: float = 90, poll: float = 0.1) -> float:
        """Start; seconds until /readyz answered 200, probed every `poll` seconds."""
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        env = {**self.env, procs.TOKEN_VAR: self.token}
        with self.log.open("ab") as out:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(
                self.argv,
                cwd=PROJECT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = self.started + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise OperatorExited(f"{self.name} operator exited; see {self.log}")
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200:
                        self.ready_after = time.monotonic() - self.started
                        return self.ready_after
            except OSError:
                pass
            time.sleep(poll)
        raise TimeoutError(f"{self.name} operator not ready after {timeout:.0f}s; see {self.log}")

    def successful_runs(self) -> int:
        """Runs the operator itself logged as successful (both log the Go message)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return 0
        return text.count("Ansible-runner exited successfully")

    def stop(self, timeout: float = 40) -> dict[str, object]:
        """SIGTERM; SIGKILL after `timeout`. Returns what was left behind."""
        assert self.proc is not None
        before = time.monotonic()
        code: int | None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait(5)
        else:
            code = self.proc.returncode
        took = time.monotonic() - before
        # descendants that outlived the operator (re-parented to init)
        survivors = procs.wait_gone(procs.processes_with_token(self.token), 5)
        left = [procs.command_line(p)[:160] for p in survivors]
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return {"exit_code": code, "stop_seconds": round(took, 2), "leftover_processes": left}

    def cleanup(self) -> None:
        """Remove what this run left on disk outside its work dir (the Go runner dirs)."""
        for path in self.runner_dirs():
            shutil.rmtree(path, ignore_errors=True)
            parent = path.parent
            while parent != self.runner_root.parent and parent.exists():
                try:
                    parent.rmdir()  # only when empty
                except OSError:
                    break
                parent = parent.parent


def _common_env(kubeconfig: Path, namespace: str, tmpdir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANSIBLE_", "K8S_AUTH_", "RUNNER_", "MAX_CONCURRENT_", "WORKER_"))
        and k not in {"VIRTUAL_ENV", "WATCH_NAMESPACE", "OPERATOR_NAME", "KUBECONFIG"}
    }
    env.update(
        KUBECONFIG=str(kubeconfig),
        WATCH_NAMESPACE=namespace,
        ANSIBLE_GATHERING="explicit",
        TMPDIR=str(tmpdir),
    )
    return env


def python_operator(
    *,
    kubeconfig: Path,
    namespace: str,
    workdir: Path,
    concurrency: int,
    warm: bool = True,
    compat: bool = True,
) -> OperatorRun:
    """Ours; `warm=False` runs today's cold path (--warm-ansible=false), named python-cold;
    `compat=False` turns the 2.18 compatibility mode off (docs/porting.md), named
    python-compat-off: what the mode costs is python / python-compat-off."""
    port = free_port()
    runner_root = workdir / "runner"
    env = _common_env(kubeconfig, namespace, workdir / "tmp")
    env["PATH"] = f"{OUR_BIN}:{env.get('PATH', '')}"
    env["ANSIBLE_OPERATOR_ANSIBLE_COMPAT"] = "2.18" if compat else "off"
    argv = [
        str(OUR_BIN / "ansible-operator"),
        "run",
        "--watches-file=./watches.yaml",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{port}",
        "--leader-elect=false",
        f"--max-concurrent-reconciles={concurrency}",
        f"--max-concurrent-reconciles-total={concurrency}",
        f"--runner-dir={runner_root}",
        # any free port: unlike the Go operator, ours writes the real one into the
        # runs' kubeconfig, so it never collides with a Go operator on 8888/5050
        "--proxy-port=0",
        "--user-metrics-bind-address=127.0.0.1:0",
        f"--warm-ansible={'true' if warm else 'false'}",
    ]
    name = "python" if warm else "python-cold"
    return OperatorRun(
        name=name if compat else "python-compat-off",
        argv=argv,
        env=env,
        workdir=workdir,
        namespace=namespace,
        runner_root=runner_root,
        health_port=port,
    )


def go_operator(
    *, kubeconfig: Path, namespace: str, workdir: Path, concurrency: int, reference: Reference
) -> OperatorRun:
    busy = wait_for_free_ports(GO_FIXED_PORTS, timeout=300)
    if busy:
        raise RuntimeError(
            f"localhost port(s) {busy} still in use after 5 min: the Go operator hard-codes "
            "its proxy on 8888 and its user-metrics API on 5050"
        )
    port = free_port()
    env = _common_env(kubeconfig, namespace, workdir / "tmp")
    env["PATH"] = f"{reference.venv_bin}:{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(reference.venv)
    argv = [
        str(reference.binary),
        "run",
        "--watches-file=./watches.yaml",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{port}",
        "--leader-elect=false",
        f"--max-concurrent-reconciles={concurrency}",
    ]
    return OperatorRun(
        name="go",
        argv=argv,
        env=env,
        workdir=workdir,
        namespace=namespace,
        runner_root=GO_RUNNER_ROOT,
        health_port=port,
    )
