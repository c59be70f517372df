"""Build and pack one image of `images.specs()`: mmdebstrap, then an OCI archive.

Called by `testbed.cli` (`python -m testbed images`, run by `build.sh
images`). Needs root and mmdebstrap (the Debian package pinned in
versions.env). Every step that fails raises `ImageBuildError` naming the image
and the log file with mmdebstrap's output. Downloaded .deb files are kept per
suite under `$TESTBED_CACHE/images/debs/`, so rebuilding an image (after a pin
changed) downloads only what changed.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.images import (
    EXCLUDES,
    IMAGE_FILES,
    MIRRORS,
    SOURCE_DATE_EPOCH,
    TRIM,
    ImageBuildError,
    ImageSpec,
    pinned,
    spec_hash,
    specs,
)


@dataclass(frozen=True)
class Built:
    """A cached image: its OCI archive, manifest digest, layer size and build time."""

    spec: ImageSpec
    archive: Path
    digest: str
    size: int
    seconds: float


def image_dir(cache: Path, spec: ImageSpec) -> Path:
    return cache / "images" / spec.key


def cached(cache: Path, spec: ImageSpec, versions: dict[str, str]) -> Built | None:
    """The cached build of `spec`, if its record names the current spec hash."""
    record = image_dir(cache, spec) / "build.json"
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    archive = image_dir(cache, spec) / "image.oci.tar"
    if data.get("hash") != spec_hash(spec, versions) or not archive.is_file():
        return None
    if archive.stat().st_size != data.get("archive_size"):
        return None  # cut or damaged: rebuild rather than import it
    return Built(spec, archive, str(data["digest"]), int(data["size"]), float(data["seconds"]))


def _hooks(spec: ImageSpec, cache: Path, debs: Path) -> list[str]:
    args = [
        # Reuse and keep the suite's downloaded packages.
        f'--setup-hook=mkdir -p "$1/var/cache/apt/archives" && '
        f'find "{debs}" -name "*.deb" -exec cp -t "$1/var/cache/apt/archives/" {{}} +',
    ]
    if spec.account:
        # Before the packages' maintainer scripts run, which then keep it.
        user, uid, home = spec.account
        args.append(
            f'--essential-hook=echo "{user}:x:{uid}:" >>"$1/etc/group" && '
            f'echo "{user}:x:{uid}:{uid}::{home}:/bin/bash" >>"$1/etc/passwd"'
        )
    keep_debs = f'find "$1/var/cache/apt/archives" -name "*.deb" -exec cp -n -t "{debs}" {{}} +'
    args.append(f"--customize-hook={keep_debs}")
    for source, target in sorted(spec.files.items()):
        args.append(f'--customize-hook=install -D -m 755 "{IMAGE_FILES / source}" "$1{target}"')
    if spec.carries:
        carried = cache / "images" / spec.carries / "rootfs.tar"
        target = f"/opt/{spec.carries}"
        args.append(
            f'--customize-hook=mkdir -p "$1{target}" && tar -xf "{carried}" -C "$1{target}"'
        )
    trims = " ".join(f'"$1"/{pattern}' for pattern in TRIM)
    args.append(f"--customize-hook=rm -rf {trims}")
    if spec.customize:  # after the trim: it may make what the trim removed (in /var/log)
        args.append(f"--customize-hook={spec.customize}")
    return args


def _rootfs(spec: ImageSpec, cache: Path, versions: dict[str, str], out: Path, log: Path) -> None:
    debs = cache / "images" / "debs" / spec.suite
    debs.mkdir(parents=True, exist_ok=True)
    argv = [
        "mmdebstrap",
        "--variant=essential",
        "--mode=root",
        "--format=tar",
        "--include=" + ",".join(pinned(spec, versions)),
        *(f"--dpkgopt=path-exclude={pattern}" for pattern in EXCLUDES),
        *_hooks(spec, cache, debs),
        spec.suite,
        str(out),
        *MIRRORS[spec.suite],
    ]
    env = {
        **os.environ,
        "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH),
        "TESTBED_IMAGES": str(IMAGE_FILES),
    }
    with log.open("w") as sink:
        done = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise ImageBuildError(
            f"image {spec.ref}: mmdebstrap failed (exit {done.returncode}); "
            f"log {log}:\n{tail}\n(a pinned version no longer served by Debian needs a new "
            f"pin in testbed/versions.env)"
        )


def _blob(out: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    _add(out, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}", len(data)


def _add(
    out: tarfile.TarFile, name: str, data: bytes | None = None, path: Path | None = None
) -> None:
    info = tarfile.TarInfo(name)
    info.mtime, info.mode = SOURCE_DATE_EPOCH, 0o644
    if path is not None:
        info.size = path.stat().st_size
        with path.open("rb") as src:
            out.addfile(info, src)
        return
    assert data is not None
    info.size = len(data)
    out.addfile(info, io.BytesIO(data))


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pack(spec: ImageSpec, rootfs: Path, archive: Path) -> tuple[str, int]:
    """Write an OCI archive of one layer (`rootfs`, uncompressed); return (digest, size)."""
    layer = _sha256_file(rootfs)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(SOURCE_DATE_EPOCH)),
        "config": {
            "Env": list(spec.env)
            or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": list(spec.entrypoint) or None,
            "Cmd": list(spec.cmd) or None,
            "User": spec.user,
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer}"]},
    }
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as out:
        _add(out, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add(out, f"blobs/sha256/{layer}", path=rootfs)
        config_digest, config_size = _blob(out, json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config_size,
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{layer}",
                    "size": rootfs.stat().st_size,
                }
            ],
        }
        digest, size = _blob(out, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": digest,
                    "size": size,
                    "annotations": {"io.containerd.image.name": spec.ref},
                }
            ],
        }
        _add(out, "index.json", json.dumps(index, sort_keys=True).encode())
    return digest, rootfs.stat().st_size


def _keep_only(rootfs: Path, keep: tuple[str, ...]) -> None:
    """Rewrite `rootfs` with only the members named in `keep` (and their directories)."""
    wanted = {f"./{path}" for path in keep}
    parents = set()
    for path in keep:
        parts = Path(path).parts
        parents |= {"./" + "/".join(parts[:i]) for i in range(1, len(parts))}
    smaller = rootfs.with_suffix(".keep.tar")
    with tarfile.open(rootfs) as src, tarfile.open(smaller, "w", format=tarfile.PAX_FORMAT) as out:
        for member in src:
            if member.name in wanted or member.name in parents:
                out.addfile(member, src.extractfile(member) if member.isfile() else None)
    smaller.replace(rootfs)


def build(cache: Path, spec: ImageSpec, versions: dict[str, str]) -> Built:
    """Build `spec` unless its cached build is current; the carried image first.

    Two builds of one image (two checkouts' `make test` sharing the cache)
    take turns on a lock; the second then finds the first one's result."""
    found = cached(cache, spec, versions)
    if found:
        return found
    if spec.carries:
        build(cache, specs()[spec.carries], versions)
    if os.geteuid() != 0 or shutil.which("mmdebstrap") is None:
        raise ImageBuildError(f"image {spec.ref}: building needs root and mmdebstrap")
    directory = image_dir(cache, spec)
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return cached(cache, spec, versions) or _build_locked(cache, spec, versions, directory)


def _build_locked(cache: Path, spec: ImageSpec, versions: dict[str, str], directory: Path) -> Built:
    began = time.monotonic()
    rootfs = directory / "rootfs.tar"
    # The record goes first: a build cut short leaves no record that matches.
    (directory / "build.json").unlink(missing_ok=True)
    _rootfs(spec, cache, versions, rootfs, directory / "build.log")
    if spec.keep:
        _keep_only(rootfs, spec.keep)
    archive = directory / "image.oci.tar"
    digest, size = pack(spec, rootfs, archive)
    seconds = time.monotonic() - began
    record = {
        "ref": spec.ref,
        "hash": spec_hash(spec, versions),
        "digest": digest,
        "size": size,
        "archive_size": archive.stat().st_size,
        "seconds": round(seconds, 1),
        "packages": pinned(spec, versions),
    }
    (directory / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    return Built(spec, archive, digest, size, seconds)
