"""Collection routing metadata, parsed once in the playbook helper instead of every run.

Where this sits: pbserver.py calls `prime()` at start-up, after the pre-imports and
before it serves; every run child forked afterwards inherits the parsed documents.

Every `ansible-playbook` loads the synthetic `ansible.builtin` collection, whose
routing file (`ansible/config/ansible_builtin_runtime.yml`, ~9,700 lines of
redirects) it parses with PyYAML's BaseLoader: 60-100 ms of CPU in each run, the
largest single item of a warm run's start once imports are done. Ansible's
collection loader reads such files through `_meta_yml_to_dict(data, content_id)`,
documented as a function other tools may replace to cache its output; the loader
module binds it as a global at import, and that global is what is replaced here.

Why this is safe:
* Keyed by the bytes themselves (SHA-256), never by a path or a name: a changed or
  another file parses afresh, so whatever a run's configuration and collections
  paths are, it gets exactly what parsing its own bytes would give.
* BaseLoader yields plain `dict`/`list`/`str` only (no tags, no positions).
* A document is handed out at most once per process (popped), so two collections
  with identical files never share one mutable dict; later calls parse as before.
* Importing `_collection_finder` does not import `ansible.constants` (it is in the
  vetted pre-imports), so priming reads no per-run configuration.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["builtin_routing_files", "prime"]

log = logging.getLogger(__name__)

_Parse = Callable[[bytes | str, Any], Any]


def _key(data: bytes | str) -> str:
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
    return hashlib.sha256(raw).hexdigest()


def builtin_routing_files() -> list[Path]:
    """ansible-core's own routing file and those of collections installed next to it."""
    import ansible  # type: ignore[import-untyped]  # noqa: PLC0415 - helper only, after its pre-imports

    package = Path(ansible.__file__).parent
    files = [package / "config" / "ansible_builtin_runtime.yml"]
    files += sorted((package.parent / "ansible_collections").glob("*/*/meta/runtime.yml"))
    return [path for path in files if path.is_file()]


def _memoized(parse: _Parse, documents: dict[str, Any]) -> _Parse:
    def meta_yml_to_dict(data: bytes | str, content_id: Any) -> Any:
        document = documents.pop(_key(data), None) if data else None
        return parse(data, content_id) if document is None else document

    meta_yml_to_dict.__wrapped__ = parse  # type: ignore[attr-defined]
    return meta_yml_to_dict


def prime(files: Iterable[Path] | None = None) -> int:
    """Parse `files` (default: `builtin_routing_files()`) now and make the collection
    loader use those results; returns how many documents were primed."""
    from ansible.utils.collection_loader import (  # type: ignore[import-untyped]  # noqa: PLC0415
        _collection_finder,
    )

    parse = getattr(_collection_finder, "_meta_yml_to_dict", None)
    if not callable(parse):
        log.debug("ansible's collection loader has no _meta_yml_to_dict: nothing primed")
        return 0
    parse = getattr(parse, "__wrapped__", parse)
    documents: dict[str, Any] = {}
    for path in builtin_routing_files() if files is None else files:
        try:
            data = path.read_bytes()
            documents[_key(data)] = parse(data, (os.fspath(path), "runtime.yml"))
        except Exception as error:  # an unreadable file is parsed (and reported) per run
            log.debug("not priming %s: %s", path, error)
    _collection_finder._meta_yml_to_dict = _memoized(parse, documents)
    return len(documents)
