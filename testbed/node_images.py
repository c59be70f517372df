"""Import the images built by `image_build` into the real node's containerd.

Called by `node.RealNode.start` (once containerd answers) and by
`node.unavailable` (are they all built?). An image is imported when the node's
containerd does not already hold its reference at the recorded digest: the
containerd root is kept per checkout between `down` and `up`, so a warm `up`
imports nothing. Images are never pulled: the kubelet's image GC is off and
the examples use references that only exist here (`testbed.local/...`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from testbed.image_build import cached
from testbed.images import specs
from testbed.layout import Layout, read_versions
from testbed.node_config import PAUSE_IMAGE as PAUSE

IMPORT_TIMEOUT = 300


class ImportError_(RuntimeError):
    """An image could not be imported; the message names it and ctr's output."""


def missing(cache: Path) -> list[str]:
    versions = read_versions()
    return [key for key, spec in specs().items() if cached(cache, spec, versions) is None]


def ctr_ok(ctr: list[str]) -> bool:
    done = subprocess.run([*ctr, "version"], capture_output=True, check=False, timeout=10)
    return done.returncode == 0


def present(ctr: list[str]) -> dict[str, str]:
    """Reference -> manifest digest of the images containerd holds."""
    done = subprocess.run(
        [*ctr, "images", "ls"], capture_output=True, text=True, check=True, timeout=30
    )
    found = {}
    for line in done.stdout.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            found[fields[0]] = fields[2]
    return found


def import_all(layout: Layout, ctr: list[str], keys: tuple[str, ...] | None = None) -> list[str]:
    """Import the images `keys` (all by default; always the sandbox image) not
    yet present at their digest; return the references imported."""
    versions = read_versions()
    have = present(ctr)
    imported = []
    wanted = {k: s for k, s in specs().items() if keys is None or k in keys or k == PAUSE}
    for spec in wanted.values():
        built = cached(layout.cache_dir, spec, versions)
        if built is None:
            raise ImportError_(f"image {spec.ref} is not built (`make testbed-build`)")
        if have.get(spec.ref) == built.digest:
            continue
        done = subprocess.run(
            [*ctr, "images", "import", str(built.archive)],
            capture_output=True,
            text=True,
            check=False,
            timeout=IMPORT_TIMEOUT,
        )
        if done.returncode != 0:
            raise ImportError_(f"importing {spec.ref} from {built.archive}: {done.stderr.strip()}")
        imported.append(spec.ref)
    return imported
