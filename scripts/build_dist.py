"""Build the wheel and sdist of `ansible-operator`, then check them.

Called by `make dist` (and so by `make test`) and by tests/deploy/test_wheel.py,
which installs the wheel into a fresh virtualenv. Steps:

1. copy the files of a clean checkout (tracked, or untracked and not ignored)
   to a temporary directory, so nothing local (.venv, egg-info, caches) leaks
   into the sdist and the work tree gets no build/ or egg-info;
2. `python -m build` there: the sdist, then the wheel built from that sdist
   (so the sdist is proven complete), with `build` and `twine` from a
   virtualenv of their own in the cache, pinned below;
3. `twine check --strict` (metadata and the README as PyPI renders it);
4. our own checks of the contents: the wheel holds the operator, the
   `ansible-operator` command only, and the operator_sdk.util collection as
   `ansible_collections/operator_sdk/util/`; nothing of the testbed, the tests
   or the example project.

Prints the paths of the two files; exits non-zero with one line per problem.
"""

from __future__ import annotations

import argparse
import configparser
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("build==1.6.1", "twine==7.0.0")
COLLECTION = "ansible_collections/operator_sdk/util/"
# Every file the collection needs at run time, relative to COLLECTION.
COLLECTION_FILES = (
    "galaxy.yml",
    "meta/runtime.yml",
    "plugins/module_utils/kube.py",
    "plugins/modules/k8s_status.py",
    "plugins/modules/k8s_event.py",
    "plugins/modules/osdk_metric.py",
    "plugins/modules/requeue_after.py",
)
WHEEL_TOP_LEVEL = {"ansible_operator", "ansible_collections"}


def tools_python(cache: Path) -> Path:
    """The interpreter of the tools virtualenv, created (or completed) on first use."""
    python = cache / "bin" / "python"
    stamp = cache / ".installed"
    if not stamp.exists() or stamp.read_text() != " ".join(TOOLS):
        subprocess.run([sys.executable, "-m", "venv", str(cache)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *TOOLS], check=True)
        stamp.write_text(" ".join(TOOLS))
    return python


def copy_checkout(into: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def wheel_problems(wheel: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = configparser.ConfigParser()
        entry_points.read_string(archive.read(info).decode())
    tops = {
        name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")
    }
    if tops != WHEEL_TOP_LEVEL:
        problems.append(
            f"{wheel.name}: top-level entries {sorted(tops)}, expected {sorted(WHEEL_TOP_LEVEL)}"
        )
    scripts = dict(entry_points["console_scripts"]) if "console_scripts" in entry_points else {}
    if scripts != {"ansible-operator": "ansible_operator.cli:main"}:
        problems.append(f"{wheel.name}: console scripts {scripts}, expected only ansible-operator")
    for relative in COLLECTION_FILES:
        if COLLECTION + relative not in names:
            problems.append(f"{wheel.name}: {COLLECTION}{relative} is missing")
    collections = {
        "/".join(n.split("/")[:3]) for n in names if n.startswith("ansible_collections/")
    }
    if collections != {COLLECTION.rstrip("/")}:
        problems.append(
            f"{wheel.name}: collections {sorted(collections)}, expected operator_sdk/util"
        )
    if not any(n.startswith("ansible_operator/") and n.endswith("/py.typed") for n in names):
        problems.append(f"{wheel.name}: ansible_operator/py.typed is missing")
    if any("__pycache__" in n or n.endswith(".pyc") for n in names):
        problems.append(f"{wheel.name}: holds compiled bytecode")
    return problems


def sdist_problems(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = ["pyproject.toml", "README.md", "operator/ansible_operator/cli.py"]
    needed += [f"collections/{COLLECTION}{relative}" for relative in COLLECTION_FILES]
    problems = [f"{sdist.name}: {name} is missing" for name in needed if name not in names]
    stray = sorted({n.split("/", 1)[0] for n in names} & {"tests", "testbed", "bench", "roles"})
    if stray:
        problems.append(f"{sdist.name}: holds {', '.join(stray)}")
    return problems


def build(*, out: Path, cache: Path) -> tuple[Path, Path]:
    python = tools_python(cache)
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("ansible_operator-*.whl"), *out.glob("ansible_operator-*.tar.gz")]:
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="ao-dist-") as scratch:
        source = Path(scratch) / "src"
        copy_checkout(source)
        result = subprocess.run(
            [str(python), "-m", "build", "--outdir", str(out), str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr)[-4000:]
            raise SystemExit(f"python -m build failed ({result.returncode}):\n{output}")
    wheels, sdists = (
        sorted(out.glob("ansible_operator-*.whl")),
        sorted(out.glob("ansible_operator-*.tar.gz")),
    )
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit(f"{out}: expected one wheel and one sdist, found {wheels + sdists}")
    return wheels[0], sdists[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="where to put the files")
    parser.add_argument("--cache", type=Path, required=True, help="the tools virtualenv")
    args = parser.parse_args(argv)
    wheel, sdist = build(out=args.out, cache=args.cache)
    twine = args.cache / "bin" / "twine"
    checked = subprocess.run(
        [str(twine), "check", "--strict", str(wheel), str(sdist)],
        capture_output=True,
        text=True,
        check=False,
    )
    problems = [] if checked.returncode == 0 else [f"twine check: {checked.stdout.strip()}"]
    problems += wheel_problems(wheel) + sdist_problems(sdist)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(wheel)
    print(sdist)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
