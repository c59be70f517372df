"""Install Ansible collections from PyPI wheels, without Ansible Galaxy.

Called by `make venv` (so by `make test` and `make run`) and by the Dockerfile.
Galaxy is unreachable from our build machines, but the `ansible` community
wheel on PyPI ships most collections. For each line of the lock file this
script downloads that wheel once into a cache outside the repository, checks
its sha256, extracts only the named collection, and copies it into the
`ansible_collections/` folder of the target Python's site-packages, where
ansible-core finds collections without any ANSIBLE_COLLECTIONS_PATH setting.

It also links the project's own collections (under `collections/` in the
repository) there, so roles use `operator_sdk.util` exactly as they would with
the Go operator's image.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class LockedCollection:
    name: str  # namespace.collection
    requirement: str  # e.g. ansible==12.3.0
    sha256: str


def read_lock(path: Path) -> list[LockedCollection]:
    entries = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or parts[0].count(".") != 1 or "==" not in parts[1]:
            raise SystemExit(
                f"{path}:{number}: expected '<namespace.collection> <pkg==version> <sha256>'"
            )
        entries.append(LockedCollection(*parts))
    return entries


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_wheel(entry: LockedCollection, cache: Path) -> Path:
    package, version = entry.requirement.split("==", 1)
    wheels = cache / "wheels"
    found = sorted(wheels.glob(f"{package}-{version}-*.whl"))
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "-d",
                str(wheels),
                entry.requirement,
            ],
            check=True,
        )
        found = sorted(wheels.glob(f"{package}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip did not produce a wheel for {entry.requirement}")
    wheel = found[0]
    actual = sha256_of(wheel)
    if actual != entry.sha256:
        wheel.unlink()
        raise SystemExit(
            f"{wheel.name}: sha256 {actual} does not match the lock ({entry.sha256}); "
            "the cached file was removed"
        )
    return wheel


def extract(entry: LockedCollection, wheel: Path, cache: Path) -> Path:
    namespace, collection = entry.name.split(".")
    target = cache / "extracted" / entry.sha256[:16] / "ansible_collections"
    done = target / namespace / collection / "MANIFEST.json"
    if done.exists():
        return target / namespace / collection
    prefix = f"ansible_collections/{namespace}/{collection}/"
    with zipfile.ZipFile(wheel) as archive:
        members = [name for name in archive.namelist() if name.startswith(prefix)]
        if not members:
            raise SystemExit(f"{wheel.name} does not contain {entry.name}")
        archive.extractall(target.parent, members=members)
    return target / namespace / collection


def install_into(source: Path, site: Path, name: str, *, link: bool) -> None:
    namespace, collection = name.split(".")
    dest = site / "ansible_collections" / namespace / collection
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if link:
        dest.symlink_to(source, target_is_directory=True)
    else:
        shutil.copytree(source, dest)


def own_collections() -> list[tuple[str, Path]]:
    root = REPO / "collections" / "ansible_collections"
    if not root.is_dir():
        return []
    return [
        (f"{ns.name}.{coll.name}", coll)
        for ns in sorted(root.iterdir())
        if ns.is_dir()
        for coll in sorted(ns.iterdir())
        if (coll / "galaxy.yml").exists()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=Path, default=REPO / "requirements" / "collections.txt")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument(
        "--site-packages",
        type=Path,
        default=Path(sysconfig.get_paths()["purelib"]),
        help="where to install (default: this interpreter's site-packages)",
    )
    parser.add_argument(
        "--copy-own",
        action="store_true",
        help="copy the project's own collections instead of linking them (images)",
    )
    args = parser.parse_args(argv)
    for entry in read_lock(args.lock):
        wheel = fetch_wheel(entry, args.cache)
        source = extract(entry, wheel, args.cache)
        install_into(source, args.site_packages, entry.name, link=False)
        print(f"installed {entry.name} from {wheel.name}")
    for name, path in own_collections():
        install_into(path, args.site_packages, name, link=not args.copy_own)
        print(f"installed {name} from {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
