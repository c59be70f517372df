"""End to end: the README's commands, typed as a new user types them, in a clean copy.

`test_every_readme_command_is_exercised` reads every `sh` block of README.md
and fails when a command is neither run here nor named with the test (or the
CI step) that runs it, so a command added to the README gets a test.

`test_a_new_user_runs_the_readme` copies the repository (the files git
tracks, and new files it does not ignore) to a fresh directory with no
.venv and no .testbed, then runs, with KUBECONFIG unset: `make run` (which
sets up the virtualenv, starts the copy's own testbed, applies the CRDs and
runs the operator), the commands that inspect the samples, the commands of
"Adding a kind" (with the hypothetical Redis replaced by Memcached), Ctrl-C,
and the testbed's status and down. Heavy caches (pip's, the testbed
binaries, the collection wheel) are shared with the main checkout, as on a
user's machine after a first build.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testbed.probes import wait_until

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

# README command -> where it is exercised. "here": by test_a_new_user_runs_the_readme.
COVERAGE = {
    # "Start a new operator": tests/scaffold/test_project_e2e.py runs the README's own
    # init line in a temporary directory, then these commands in the project it wrote.
    "mkdir memcached-operator && cd memcached-operator": "tests/scaffold/test_project_e2e.py",
    "ansible-operator init --domain example.com --group cache --version v1alpha1 "
    "--kind Memcached --generate-role": "tests/scaffold/test_project_e2e.py",
    "make install run": "tests/scaffold/test_project_e2e.py",
    # "Images and installing": no Docker here; the install steps of both Dockerfiles
    # are replayed, base image first, and the result run against the testbed.
    "docker build -f operator/Dockerfile -t ansible-operator-base:v0.1.0 .": (
        "tests/deploy/test_dockerfile_install.py"
    ),
    "docker build -t registry.example.com/example-operator:0.1.0 .": (
        "tests/deploy/test_dockerfile_install.py"
    ),
    "kubectl apply -k config/samples": "tests/scaffold/test_project_e2e.py",
    "molecule test": "tests/scaffold/test_project_e2e.py",
    "make run": "here",
    "make test": "CI: .ci/run runs it in a fresh clone",
    "make testbed-up": "here",
    "export KUBECONFIG=$PWD/.testbed/kubeconfig": "here",
    "make testbed-status": "here",
    "make testbed-down": "here",
    "TESTBED_KUBECONFIG=~/.kube/config make test": "needs another cluster; the variable is "
    "used by tests/testbed/test_lifecycle.py and testbed/pytest_plugin.py",
    "kubectl apply -k config/samples/": "here",
    "kubectl get examples": "here",
    "kubectl get memcacheds -o yaml": "here",
    "kubectl get events": "here",
    # With the testbed's real node (make test runs the main suite without one).
    "kubectl get pods -o wide": "tests/testbed/test_real_node.py (pods on real-node)",
    "kubectl exec sampledb-sample-0 -- psql -U postgres -c 'select version()'": (
        "tests/realnode/test_sampledb.py (psql in the database pod through kubectl exec)"
    ),
    ".venv/bin/ansible-operator validate": "here",
    ".venv/bin/ansible-operator version": "here",
    "kubectl apply -k crds": "here",
    "kubectl create namespace demo": "here",
    "WATCH_NAMESPACE=demo .venv/bin/ansible-operator run": "here, with Memcached for Redis",
    "kubectl -n demo apply -f config/samples/examples_v1alpha1_redis.yaml": "here, as memcached",
    "kubectl -n demo get redis -w": "here, as memcached",
    "cd <repository root>": "the commands below run from the repository root",
    "PATH=$PWD/.venv/bin:$PATH KUBECONFIG=.testbed/kubeconfig molecule test": (
        "tests/examples/test_molecule.py"
    ),
}

SAMPLE_PLURALS = ("memcacheds", "webservers", "sampledbs", "replicateddbs", "backups")
# The samples' roles share two CPUs with everything else here.
SAMPLES_TIMEOUT = 300


def readme_commands() -> list[str]:
    """Every command line of the README's sh blocks, comments after two spaces dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL):
        for raw in block.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            command = re.split(r"\s{2,}#", line, maxsplit=1)[0].strip()
            commands.append(command if command in COVERAGE else line)
    return commands


def test_every_readme_command_is_exercised() -> None:
    commands = readme_commands()
    missing = [c for c in commands if c not in COVERAGE]
    assert not missing, f"README commands without a test (add them to COVERAGE): {missing}"
    stale = set(COVERAGE) - set(commands)
    assert not stale, f"COVERAGE names commands the README no longer has: {stale}"


# -- the clean copy ---------------------------------------------------------------------


def clean_copy(target: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        source = ROOT / raw.decode()
        if not source.is_file():  # deleted in the work tree, not yet committed
            continue
        dest = target / raw.decode()
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest, follow_symlinks=False)
    return target


def user_env(copy: Path) -> dict[str, str]:
    """The environment of a user's shell: none of the test session's cluster settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"KUBECONFIG", "TESTBED_KUBECONFIG", "TESTBED_STATE_DIR", "VIRTUAL_ENV"}
        and not k.startswith(("PYTEST", "MAKE", "MFLAGS"))
    }
    # Drop the session's virtualenv from PATH: the copy makes its own. kubectl
    # stays whatever the machine has; the testbed's is the fallback.
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
    kubectl_dir = Path(env.get("TESTBED_CACHE", Path.home() / ".cache/ansible-operator-testbed"))
    path.append(str(kubectl_dir / "bin"))
    env["PATH"] = os.pathsep.join(path)
    env["HOME"] = os.environ.get("HOME", str(Path.home()))
    return env


class Shell:
    """Runs README lines in the copy, as `bash -c` from the repository root."""

    def __init__(self, copy: Path, env: dict[str, str]) -> None:
        self.copy = copy
        self.env = env

    def run(self, line: str, *, timeout: float = 120) -> str:
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=self.copy,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"{line!r} exited {done.returncode}:\n{done.stderr[-3000:]}"
        return done.stdout

    def start(self, line: str, log: Path) -> subprocess.Popen[bytes]:
        # A session of its own, as a terminal's foreground job: Ctrl-C reaches
        # every process of the job, and only those.
        with log.open("wb") as out:
            return subprocess.Popen(
                ["bash", "-c", line],
                cwd=self.copy,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def ctrl_c(proc: subprocess.Popen[bytes], *, timeout: float = 60) -> int:
    os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        raise


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return int(resp.status) == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    target = clean_copy(tmp_path_factory.mktemp("readme") / "repo")
    yield target
    # Whatever happened, stop the copy's testbed (README: make testbed-down).
    subprocess.run(
        ["make", "testbed-down"],
        cwd=target,
        env=user_env(target),
        capture_output=True,
        timeout=120,
        check=False,
    )


def all_successful(shell: Shell, namespace: str | None = None) -> bool:
    where = f"-n {namespace}" if namespace else ""
    listed = yaml.safe_load(shell.run(f"kubectl {where} get examples -o yaml"))
    items = listed.get("items") or []
    if not items:
        return False
    for item in items:
        conditions = (item.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Successful" and c.get("status") == "True" for c in conditions):
            return False
    return True


def test_a_new_user_runs_the_readme(copy: Path, tmp_path: Path) -> None:
    env = user_env(copy)
    shell = Shell(copy, env)
    make_run = shell.start("make run", tmp_path / "make-run.log")
    try:
        wait_until(
            "make run: operator ready on :6789",
            lambda: ready(6789),
            timeout=600,  # includes creating the copy's virtualenv
            alive=lambda: make_run.poll() is None,
        )
        kubeconfig = copy / ".testbed" / "kubeconfig"
        assert kubeconfig.is_file(), "make run did not start the copy's own testbed"
        up_again = shell.run("make testbed-up")  # README: "start (or reuse)"
        assert "already running" in up_again.lower() or "reus" in up_again.lower(), up_again

        env["KUBECONFIG"] = str(kubeconfig)  # README: export KUBECONFIG=$PWD/.testbed/kubeconfig
        shell.run("kubectl apply -k config/samples/")
        wait_until(
            "every sample Successful",
            lambda: all_successful(shell, "default"),
            timeout=SAMPLES_TIMEOUT,
            alive=lambda: make_run.poll() is None,
        )
        listing = shell.run("kubectl get examples")
        for plural in SAMPLE_PLURALS:
            assert plural.rstrip("s") in listing.lower(), listing
        assert "Successful" in shell.run("kubectl get memcacheds -o yaml")
        assert "Successful" in shell.run("kubectl get events")
        assert "valid" in shell.run(".venv/bin/ansible-operator validate")
        assert "ansible-core" in shell.run(".venv/bin/ansible-operator version")
    finally:
        code = ctrl_c(make_run) if make_run.poll() is None else make_run.returncode
    log = (tmp_path / "make-run.log").read_text(errors="replace")
    assert "ansible-operator stopped with exit code 0" in log, log[-3000:]
    # make itself reports the interrupt (exit status 2, or killed by SIGINT).
    assert code in {0, 2, -signal.SIGINT}, (code, log[-3000:])
    assert "Traceback" not in log, log[-3000:]

    adding_a_kind(shell, tmp_path)

    status = shell.run("make testbed-status")
    assert "kube-apiserver" in status
    down = shell.run("make testbed-down")
    assert "stopped" in down
    assert not (copy / ".testbed" / "kubeconfig").exists()


def adding_a_kind(shell: Shell, tmp_path: Path) -> None:
    """README "Adding a kind", step 6, with the Memcached sample for the hypothetical Redis."""
    shell.run("kubectl apply -k crds")
    shell.run("kubectl create namespace demo")
    operator = shell.start(
        "WATCH_NAMESPACE=demo .venv/bin/ansible-operator run", tmp_path / "demo.log"
    )
    try:
        wait_until(
            "operator ready", lambda: ready(6789), timeout=60, alive=lambda: operator.poll() is None
        )
        shell.run("kubectl -n demo apply -f config/samples/examples_v1alpha1_memcached.yaml")
        watcher = shell.start("kubectl -n demo get memcached -w", tmp_path / "watch.log")
        try:
            wait_until(
                "kubectl get -w shows the sample Successful",
                lambda: (
                    re.search(r"memcached-sample\s.*True", (tmp_path / "watch.log").read_text())
                    is not None
                ),
                timeout=SAMPLES_TIMEOUT,
            )
        finally:
            ctrl_c(watcher)
    finally:
        code = ctrl_c(operator) if operator.poll() is None else operator.returncode
    assert code == 0, (tmp_path / "demo.log").read_text(errors="replace")[-3000:]
