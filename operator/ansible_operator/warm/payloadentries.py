"""Entries of the shared AnsiballZ payload directory: their file format, when one is
still valid, how one is written, and which ones are evicted.

Where this sits: below payloadcache.py, whose `Cache` (in an Ansible worker of a warm run)
calls `entry_payload()` before a build to use an entry, and after a build it traced
(payloadtrace.py) calls `unverified_member()`, `records()`, `changed_since()`, `publish()`
and `evict()` to share it. Nothing here imports Ansible; reasons come back as short
strings that payloadcache puts in its notes.

An entry is one file `<cache dir>/<key>`: `FORMAT`, a one-line JSON manifest (the
name of ansible's local cache file, the payload's SHA-256, the records), a newline,
then the payload exactly as ansible pickled it into its own local cache file. Files
whose names start with "." are a writer's temp files.

Why an entry stays sound: it is only valid while every record of its manifest still
matches `signature()` (type, size, mtime, ctime, inode, device; or absence) - every
file the build read, their directories, every directory listed, and for every
module_utils name the build looked up, the directory chain under every search root
down to that name, so a file added where it would now shadow changes a recorded
directory. Plus each involved collection's `meta/runtime.yml` (module_utils
redirects; Ansible read it before the build) and ansible.builtin's routing file. A
build is only shared when every non-empty file in its zip is byte-identical to a
file the build read (so a source Ansible took from an in-process cache, or a
generated redirect shim, means no entry), and when no record changed just before
the build (a change within one timestamp tick would be invisible).

Writes are atomic (a temp file, then `os.replace`): readers see the old file or the
new one, whole. Eviction keeps the most recently used entries by mtime (a use
touches its entry) and removes temp files of writers that died.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import os
import pickle
import stat
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_operator.warm.payloadtrace import Trace

__all__ = [
    "FORMAT",
    "Signature",
    "changed_since",
    "entry_payload",
    "evict",
    "publish",
    "read",
    "records",
    "short",
    "signature",
    "unverified_member",
    "write_whole",
]

FORMAT = b"ao-payloadcache-1\n"
"""The first line of every entry; part of every key, so a new format starts afresh."""
_STALE_TEMP_SECONDS = 300.0  # a temp file this old belongs to a writer that died
_SYNTHETIC = frozenset({"ansible/__init__.py", "ansible/module_utils/__init__.py"})
_MU_PREFIX = "ansible/module_utils/"

Signature = list[int] | None
"""[file type, size, mtime_ns, ctime_ns, inode, device], or None when absent."""


def signature(path: str) -> Signature:
    """What a record of `path` compares; ctime catches a rewrite that kept size and
    mtime (`cp -p`, `touch -r`), inode a replacement by rename."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # absent or unreadable: valid while it stays so
        return None
    kind = stat.S_IFMT(st.st_mode)
    return [kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def short(path: str) -> str:
    """The last three parts of a path: enough to tell which file, in a short note."""
    parts = path.split("/")
    return path if len(parts) <= 4 else ".../" + "/".join(parts[-3:])


def read(path: str) -> bytes:
    """The whole content of the file at `path`."""
    with open(path, "rb") as handle:
        return handle.read()


# -- using an entry -------------------------------------------------------------------


def entry_payload(blob: bytes, name: str, payload_type: type[Any]) -> tuple[bytes, str]:
    """The payload in entry file content `blob` and "", or b"" and why it may not be
    used: it must be an entry for ansible's local cache file `name`, built from files
    all unchanged, whole, and unpickle to this ansible-core's `payload_type`."""
    if not blob.startswith(FORMAT):
        return b"", "not an entry"
    header, _newline, payload = blob[len(FORMAT) :].partition(b"\n")
    manifest = json.loads(header)
    if manifest["name"] != name:
        return b"", f"entry for {manifest['name']}"
    for path, recorded in manifest["records"]:
        if signature(path) != recorded:
            return b"", f"{short(path)} changed"
    if hashlib.sha256(payload).hexdigest() != manifest["sha256"]:
        return b"", "corrupt entry"
    # What ansible will unpickle must be what this ansible writes.
    cached = pickle.loads(payload)  # noqa: S301 - our uid's file in our 0700 dir
    if not isinstance(cached, payload_type) or not isinstance(cached.zip_data, bytes):
        return b"", "not a payload of this ansible-core"
    return payload, ""


# -- sharing a build ------------------------------------------------------------------


def unverified_member(zip_data: bytes, fqn: str, reads: Iterable[str]) -> str | None:
    """The first non-empty zip member that is not byte-identical to a file the build
    read (its size and CRC-32 against the file now), or None."""
    own = fqn.replace(".", "/") + ".py"  # the module itself: its source is in the key
    read_paths = sorted(reads)
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(zip_data))) as payload:
        for info in payload.infolist():
            if info.file_size == 0 or info.filename in _SYNTHETIC or info.filename == own:
                continue
            tail = info.filename.removeprefix(_MU_PREFIX)
            candidates = [p for p in read_paths if p.endswith("/" + tail)]
            if not any(_same_bytes(p, info) for p in candidates):
                return info.filename
    return None


def _same_bytes(path: str, info: zipfile.ZipInfo) -> bool:
    try:
        data = read(path)
    except OSError:
        return False
    return len(data) == info.file_size and binascii.crc32(data) == info.CRC


def records(
    trace: Trace, collection_roots: Sequence[str], module_common_file: str
) -> dict[str, Signature]:
    """Everything whose change could change the payload `trace` saw built, by path;
    see the module docstring. `module_common_file` locates ansible.builtin's routing."""
    found: dict[str, Signature] = {}
    for path in trace.reads:
        found[path] = signature(path)
        found.setdefault(os.path.dirname(path), signature(os.path.dirname(path)))
    for path in trace.listed:
        found[path] = signature(path)
    for search_roots, parts in trace.legacy:
        for root in search_roots:
            _chain(found, root, parts[2:])
    collections: set[tuple[str, ...]] = set()
    for parts in trace.collections:
        collections.add(tuple(parts[1:3]))
        for root in collection_roots:
            _chain(found, os.path.join(root, "ansible_collections"), parts[1:])
    for namespace, name in (c for c in collections if len(c) == 2):
        for root in collection_roots:
            routing = f"{root}/ansible_collections/{namespace}/{name}/meta/runtime.yml"
            found[routing] = signature(routing)
    # ansible.builtin's routing (redirects of ansible.module_utils names).
    ansible_dir = os.path.dirname(os.path.dirname(module_common_file))
    builtin = os.path.join(ansible_dir, "config", "ansible_builtin_runtime.yml")
    found[builtin] = signature(builtin)
    return found


def _chain(found: dict[str, Signature], root: str, parts: Iterable[str]) -> None:
    """Record `root` and each directory below it along `parts`, down to the first that
    does not exist: a file created anywhere on the way changes one of them."""
    paths = [root]
    for part in parts:
        paths.append(os.path.join(paths[-1], part))
    for path in paths:
        found[path] = here = signature(path)
        if here is None or here[0] != stat.S_IFDIR:
            return


def changed_since(found: Mapping[str, Signature], not_before_ns: int) -> str | None:
    """The first path whose record's mtime or ctime is `not_before_ns` or later (too
    recent to trust a timestamp tick), or None."""
    for path, here in found.items():
        if here is not None and max(here[2], here[3]) >= not_before_ns:
            return path
    return None


def publish(
    directory: str, key: str, name: str, payload: bytes, found: Mapping[str, Signature]
) -> None:
    """Write entry `key` of `directory`: `payload` (ansible's local cache file `name`),
    valid while every record in `found` holds."""
    manifest = {
        "name": name,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "records": sorted(found.items()),
    }
    header = json.dumps(manifest, ensure_ascii=True, separators=(",", ":")).encode()
    part = os.path.join(directory, f".{key}.{os.getpid()}")
    write_whole(os.path.join(directory, key), FORMAT + header + b"\n" + payload, part)


# -- files ----------------------------------------------------------------------------


def write_whole(path: str, data: bytes, part: str) -> None:
    """Write `data` as the 0600 file `path` through the temp file `part` (this
    process's own name for it): readers see the old file or the new one, whole."""
    try:  # noqa: SIM105 - no contextlib for one call
        os.unlink(part)  # a leftover of a dead writer with our pid
    except FileNotFoundError:
        pass
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as handle:
        handle.write(data)
    os.replace(part, path)


def evict(directory: str, max_entries: int) -> None:
    """Keep the `max_entries` most recently used entries; drop dead writers' temps."""
    now = time.time()
    entries: list[tuple[int, str]] = []
    with os.scandir(directory) as scan:
        for item in scan:
            try:
                found = item.stat(follow_symlinks=False)
                if not item.name.startswith("."):
                    entries.append((found.st_mtime_ns, item.path))
                elif now - found.st_mtime > _STALE_TEMP_SECONDS:
                    os.unlink(item.path)
            except OSError:
                continue  # a concurrent run removed it
    entries.sort()
    for _mtime, path in entries[: max(0, len(entries) - max_entries)]:
        try:  # noqa: SIM105 - no contextlib for one call
            os.unlink(path)
        except OSError:
            pass
