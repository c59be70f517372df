"""A local stand-in for Ansible Galaxy, so `ansible-galaxy collection install -r
requirements.yml` runs unchanged in tests although galaxy.ansible.com is unreachable.

Used by tests/deploy/test_sdk_project.py (the SDK project's Dockerfile step)
and tests/deploy/test_wheel.py (the install step docs/migrating.md documents).
`ansible-galaxy` is pointed at it with ANSIBLE_GALAXY_SERVER, exactly as a user
behind a Galaxy mirror would; the project's requirements.yml is not touched.

What it serves, as collection artifacts (the tar.gz Galaxy serves, files at
the archive's root, MANIFEST.json and FILES.json included):

* operator_sdk.util: built from our collections/ with `ansible-galaxy
  collection build`;
* kubernetes.core and cloud.common: the installed copies that the `ansible`
  community wheel named in SOURCES carries (downloaded once into the
  collections cache and sha256-checked by scripts/install_collections.py),
  packed as they are. kubernetes.core there is 5.4.1, older than the 6.x the
  base image ships: a project that pins it must get its own version.

The server answers the few Galaxy v3 API calls `ansible-galaxy collection
install` makes: the API root, a collection, its version list, one version's
metadata (download URL, sha256, dependencies), and the download.
"""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# collection -> (the PyPI wheel that carries it, that wheel's sha256)
ANSIBLE_11 = (
    "ansible==11.13.0",
    "7f1c9c6a6026ff214d9240647e4d2b019b2a9d4c7a2bc733932bcf92af80ab04",
)
SOURCES = {"kubernetes.core": ANSIBLE_11, "cloud.common": ANSIBLE_11}


@dataclass(frozen=True)
class Artifact:
    namespace: str
    name: str
    version: str
    path: Path
    sha256: str
    dependencies: dict[str, str]


def _install_collections() -> ModuleType:
    """scripts/install_collections.py as a module (loaded once per process)."""
    name = "install_collections"
    if name in sys.modules:
        return sys.modules[name]
    script = REPO / "scripts" / "install_collections.py"
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def collections_cache() -> Path:
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(
        os.environ.get("COLLECTIONS_CACHE") or Path(cache_home, "ansible-operator-collections")
    )


def _artifact(path: Path) -> Artifact:
    with tarfile.open(path) as archive:
        member = archive.extractfile("MANIFEST.json")
        assert member is not None, f"{path}: no MANIFEST.json"
        info = json.load(member)["collection_info"]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Artifact(
        info["namespace"], info["name"], info["version"], path, digest, info["dependencies"] or {}
    )


def _pack(installed: Path, out: Path) -> Path:
    """An installed collection as an artifact.

    The `ansible` wheel leaves out some files its collections' FILES.json lists
    (`.github/` and the like, never code), and `ansible-galaxy` refuses an
    artifact without every listed entry: FILES.json is cut down to what is
    there, and MANIFEST.json's checksum of it updated.
    """
    manifest = json.loads((installed / "MANIFEST.json").read_text())
    files = json.loads((installed / "FILES.json").read_text())
    files["files"] = [f for f in files["files"] if (installed / f["name"]).exists()]
    files_data = json.dumps(files, indent=2).encode()
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_data).hexdigest()
    manifest_data = json.dumps(manifest, indent=2).encode()
    info = manifest["collection_info"]
    path = out / f"{info['namespace']}-{info['name']}-{info['version']}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, data in (("MANIFEST.json", manifest_data), ("FILES.json", files_data)):
            member = tarfile.TarInfo(name)
            member.size, member.mode = len(data), 0o644
            archive.addfile(member, io.BytesIO(data))
        for entry in files["files"]:
            if entry["name"] != ".":
                archive.add(installed / entry["name"], arcname=entry["name"], recursive=False)
    return path


def build_artifacts(out: Path, *, ansible_galaxy: str) -> list[Artifact]:
    """Every collection the local Galaxy serves, as artifacts in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    own = REPO / "collections" / "ansible_collections" / "operator_sdk" / "util"
    subprocess.run(
        [ansible_galaxy, "collection", "build", "--force", "--output-path", str(out), str(own)],
        check=True,
        capture_output=True,
    )
    paths = sorted(out.glob("operator_sdk-util-*.tar.gz"))
    tool = _install_collections()
    cache = collections_cache()
    for collection, (requirement, sha256) in SOURCES.items():
        entry = tool.LockedCollection(collection, requirement, sha256)
        wheel = tool.fetch_wheel(entry, cache)
        paths.append(_pack(tool.extract(entry, wheel, cache), out))
    return [_artifact(path) for path in paths]


_ROUTE = re.compile(r"/api/v3/collections/(\w+)/(\w+)/(?:versions/(?:([^/]+)/)?)?")
_NOT_FOUND = (404, "application/json", b'{"detail": "not found"}')


def _json(body: object) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(body).encode()


def _version(artifact: Artifact, *, host: str) -> dict[str, Any]:
    base = f"/api/v3/collections/{artifact.namespace}/{artifact.name}/versions/"
    return {
        "namespace": {"name": artifact.namespace},
        "collection": {"name": artifact.name},
        "version": artifact.version,
        "href": f"{base}{artifact.version}/",
        # absolute: ansible-core 2.18 does not resolve a relative one
        "download_url": f"http://{host}/download/{artifact.path.name}",
        "artifact": {"sha256": artifact.sha256},
        "metadata": {"dependencies": artifact.dependencies},
        "signatures": [],
    }


def answer(path: str, *, host: str, artifacts: list[Artifact]) -> tuple[int, str, bytes]:
    """Status, content type and body of the Galaxy v3 answer to GET `path`."""
    path = path.split("?", 1)[0]
    if path in ("/api/", "/api"):
        return _json({"available_versions": {"v3": "v3/"}})
    if path.startswith("/download/"):
        files = [a for a in artifacts if a.path.name == path.rsplit("/", 1)[1]]
        return (200, "application/gzip", files[0].path.read_bytes()) if files else _NOT_FOUND
    match = _ROUTE.fullmatch(path)
    if match is None:
        return _NOT_FOUND
    namespace, name, version = match.groups()
    versions = [a for a in artifacts if (a.namespace, a.name) == (namespace, name)]
    if not versions:
        return _NOT_FOUND
    if "/versions/" not in path:
        return _json({"namespace": namespace, "name": name, "updated_at": "2026-01-01T00:00:00Z"})
    if version is None:
        listed = [_version(a, host=host) for a in versions]
        return _json({"meta": {"count": len(listed)}, "links": {"next": None}, "data": listed})
    chosen = [a for a in versions if a.version == version]
    return _json(_version(chosen[0], host=host)) if chosen else _NOT_FOUND


def _handler(artifacts: list[Artifact]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: a failing test shows ansible-galaxy's own errors

        def do_GET(self) -> None:
            status, content_type, body = answer(
                self.path, host=self.headers["Host"], artifacts=artifacts
            )
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def serve(artifacts: list[Artifact]) -> Iterator[str]:
    """Serve `artifacts` on a free loopback port; yields the server URL for ANSIBLE_GALAXY_SERVER."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(artifacts))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
