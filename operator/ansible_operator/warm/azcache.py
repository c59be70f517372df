"""Built AnsiballZ payloads shared across warm `ansible-playbook` runs.

Where this sits: pbserver.py's run child calls `install(os.environ)` right after
`child.become_fresh()` and before the real `ansible-playbook` script runs. Nothing
happens unless the run's environment names the cache directory (supervisor.run_env()
sets `protocol.ANSIBALLZ_CACHE_ENV` to `<runner root>/.warm-<pid>/ansiballz/`, 0700);
the cold path never imports this module. install() only adds an import hook, so
nothing that imports `ansible.constants` is imported here: when the CLI itself imports
`ansible.executor.module_common`, in its own start-up order, the hook wraps that
module's `_find_module_utils` (which builds a Python module's payload) and its two
module_utils locators. The wrapper then runs in Ansible's worker processes (forked
from the run child), once per module task.

Why: ansible-core keeps a built payload only in the per-process
`ansible-local-<pid>*/ansiballz_cache` directory, so every run walks and zips the
same ~40 module_utils again for its first `kubernetes.core.k8s` task (~0.17 s CPU).

A call: compute the entry key from everything the build depends on besides file
contents (module source hash, path, compression, Ansible version, interpreter, the
module_utils roots and collection roots that exist). If ansible's local cache file
is already there (an earlier task of this run), ansible uses it. Else, if the shared
entry is valid, copy its payload to ansible's local cache file name, so ansible's own
code finds it ("using cached module") and builds the per-task wrapper (arguments,
interpreter) as usual. Else call the original and publish the file it wrote.

Why an entry stays sound: it is only valid while every record of its manifest still
matches `os.stat` (type, size, mtime, ctime, inode, device; or absence) - every file
the build read (an audit hook on "open", active only during our build), their
directories, every directory listed, and for every module_utils name the build looked
up, the directory chain under every search root down to that name, so a file added
where it would now shadow changes a recorded directory. Plus each involved
collection's `meta/runtime.yml` (module_utils redirects; Ansible read it before the
build). It is only published when every non-empty file in the zip is byte-identical
to a file the build read (so a source Ansible took from an in-process cache, or a
generated redirect shim, means no entry), and when no record changed in the last
`RACY_SECONDS` (a change within one timestamp tick would be invisible). Role or
playbook `library/` modules (`ansible.legacy.*`: ansible's cache aliases them by
name) and payloads with AnsiballZ extensions (debugger, coverage) are never shared.
Any error falls back to Ansible's own behaviour; notes go to stderr (in a worker:
shown as an Ansible warning) only with `AO_WARM_DEBUG` set; never to stdout.
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
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from ansible_operator.config import defaults
from ansible_operator.warm.protocol import ANSIBALLZ_CACHE_ENTRIES_ENV, ANSIBALLZ_CACHE_ENV

__all__ = ["RACY_SECONDS", "Cache", "install", "signature"]

TARGET = "ansible.executor.module_common"
SUPPORTED_ANSIBLE = ("2.19.",)
"""Versions whose payload building this module was checked against (file names of the
local cache, locators reading with open(), the pickle format)."""
RACY_SECONDS = 1.0
"""Records stamped this close to the build's start are not trusted (coarse clocks)."""
_FORMAT = b"ao-azcache-1\n"
_DEBUG_ENV = "AO_WARM_DEBUG"
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


class _Trace:
    """What one build in this process touched (filled by the audit hook and the
    recording locators, in the building thread only)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.started_ns = time.time_ns()
        self.reads: set[str] = set()
        self.listed: set[str] = set()
        self.legacy: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
        self.collections: set[tuple[str, ...]] = set()
        self.broken = False


class _State:
    """Per process (a forked worker inherits it together with the audit hook)."""

    active: _Trace | None = None
    hooked = False


_STATE = _State()


def _absolute(path: object) -> str | None:
    if isinstance(path, int) or path is None:
        return None  # an fd: what it names was recorded when it was opened
    name = os.fsdecode(os.fspath(path))  # type: ignore[call-overload]
    return name if os.path.isabs(name) else os.path.join(os.getcwd(), name)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    trace = _STATE.active
    if trace is None or event not in ("open", "os.listdir", "os.scandir"):
        return
    try:  # an exception here would fail the audited call itself
        if trace.thread != threading.get_ident():
            return
        path = _absolute(args[0] if args else ".")
        if path is None:
            return
        if event != "open":
            trace.listed.add(path)
        # Bytecode is the controller's own code (the key has Ansible's version), never
        # payload content; its __pycache__ directories change whenever Python writes one.
        elif (
            isinstance(args[2], int)
            and args[2] & os.O_ACCMODE == os.O_RDONLY
            and not path.endswith(".pyc")
        ):
            trace.reads.add(path)
    except Exception:
        trace.broken = True


def _start_trace() -> _Trace | None:
    try:
        if not _STATE.hooked:  # once per process (hooks cannot be removed): builders only
            sys.addaudithook(_audit)
            _STATE.hooked = True
    except Exception:
        return None
    _STATE.active = _Trace()
    return _STATE.active


def _stop_trace() -> None:
    _STATE.active = None


def _recording_find_module(locator: Any, kind: str) -> Callable[..., Any]:
    """`_find_module` of one of module_common's locator classes, noting every name it
    looks up while a build is traced. Patched on the class itself: a subclass would
    break their `super(LegacyModuleUtilLocator, self)` calls."""
    find_module = locator._find_module

    def _find_module(self: Any, name_parts: Any) -> Any:
        trace = _STATE.active
        if trace is not None and trace.thread == threading.get_ident():
            try:
                if kind == "legacy":
                    trace.legacy.add((tuple(self._mu_paths or ()), tuple(name_parts)))
                else:
                    trace.collections.add(tuple(name_parts))
            except Exception:
                trace.broken = True
        return find_module(self, name_parts)

    _find_module.__wrapped__ = find_module  # type: ignore[attr-defined]
    return _find_module


def _chain(records: dict[str, Signature], root: str, parts: Iterable[str]) -> None:
    """Record `root` and each directory below it along `parts`, down to the first that
    does not exist: a file created anywhere on the way changes one of them."""
    paths = [root]
    for part in parts:
        paths.append(os.path.join(paths[-1], part))
    for path in paths:
        records[path] = found = signature(path)
        if found is None or found[0] != stat.S_IFDIR:
            return


class _Plan(NamedTuple):
    fqn: str
    key: str
    local: str
    """Ansible's own cache file for this payload (in the run's ansible-local dir)."""
    entry: str
    collection_roots: list[str]


class Cache:
    """The shared directory of one operator process, as seen by one run."""

    def __init__(self, directory: str, *, max_entries: int, debug: bool = False) -> None:
        self.directory = directory
        self.max_entries = max_entries
        self.debug = debug

    # -- hooking ----------------------------------------------------------------------

    def patch(self, module: ModuleType) -> bool:
        """Wrap module_common's payload builder; False (and nothing changed) when this
        ansible-core is not one the cache was checked against."""
        try:
            version = str(getattr(module, "__version__", ""))
            if not version.startswith(SUPPORTED_ANSIBLE):
                self._note("off", f"ansible-core {version}", "not a version checked")
                return False
            original = module._find_module_utils
            if getattr(original, "__wrapped__", None) is not None:
                return True
            legacy = module.LegacyModuleUtilLocator
            collection = module.CollectionModuleUtilLocator
            legacy_find = _recording_find_module(legacy, "legacy")
            collection_find = _recording_find_module(collection, "collection")
        except Exception as error:
            self._note("off", "hook", repr(error))
            return False

        def _find_module_utils(**kwargs: Any) -> Any:
            return self.find_module_utils(module, original, kwargs)

        _find_module_utils.__wrapped__ = original  # type: ignore[attr-defined]
        legacy._find_module = legacy_find
        collection._find_module = collection_find
        # setattr: module_common's attributes are not known to the type checker.
        setattr(module, "_find_module_utils", _find_module_utils)  # noqa: B010
        return True

    def find_module_utils(
        self, module: ModuleType, original: Callable[..., Any], kwargs: dict[str, Any]
    ) -> Any:
        """`module_common._find_module_utils`, with the shared entry in front of it."""
        try:
            plan = self._plan(module, kwargs)
        except Exception as error:
            self._note("bypass", "module", repr(error))
            plan = None
        if plan is None or os.path.exists(plan.local):
            return original(**kwargs)
        if self._restore(module, plan):
            return original(**kwargs)
        trace = _start_trace()
        try:
            result = original(**kwargs)
        finally:
            _stop_trace()
        if trace is not None:
            self._publish(module, plan, trace)
        return result

    # -- one call ---------------------------------------------------------------------

    def _plan(self, module: ModuleType, kwargs: Mapping[str, Any]) -> _Plan | None:
        data: bytes = kwargs["b_module_data"]
        # Only new-style Python modules get an AnsiballZ zip (the same tests as ansible).
        if module._is_binary(data) or not (
            module.REPLACER in data or module.NEW_STYLE_PYTHON_MODULE_RE.search(data)
        ):
            return None
        module_path = os.fsdecode(kwargs["module_path"])
        try:
            fqn = str(module._get_ansible_module_fqn(module_path))
        except ValueError:  # a role's or playbook's library/ module: ansible.legacy.<name>
            self._note("bypass", _short(module_path), "no collection or core name")
            return None
        extensions = module._builder.ExtensionManager.create(task_vars=kwargs["task_vars"])
        if extensions.extension_names:
            self._note("bypass", fqn, "AnsiballZ extensions")
            return None
        compression = str(kwargs["module_compression"])
        config = sys.modules["ansible.utils.collection_loader"].AnsibleCollectionConfig
        # recursive_finder searches the existing module_utils roots; a collection root
        # without ansible_collections holds nothing. A root appearing changes the key.
        mu_roots = [str(p) for p in module.module_utils_loader._get_paths(subdirs=False)]
        mu_roots = [p for p in mu_roots if os.path.isdir(p)]
        coll_roots = [str(p) for p in config.collection_paths]
        coll_roots = [p for p in coll_roots if os.path.isdir(f"{p}/ansible_collections")]
        material = [
            _FORMAT.decode(),
            str(module.__version__),
            str(module.__file__),
            sys.executable,
            sys.version,
            os.getuid(),
            fqn,
            module_path,
            hashlib.sha256(data).hexdigest(),
            compression,
            mu_roots,
            str(module._MODULE_UTILS_PATH),
            coll_roots,
        ]
        key = hashlib.sha256(json.dumps(material).encode()).hexdigest()
        name = "-".join((fqn, compression, "none"))  # ansible's name without extensions
        local = os.path.join(str(module.C.DEFAULT_LOCAL_TMP), "ansiballz_cache", name)
        return _Plan(fqn, key, local, os.path.join(self.directory, key), coll_roots)

    def _restore(self, module: ModuleType, plan: _Plan) -> bool:
        """Copy a valid entry to ansible's local cache file; False on a miss."""
        try:
            with open(plan.entry, "rb") as handle:
                blob = handle.read()
        except FileNotFoundError:
            self._note("miss", plan.fqn)
            return False
        except OSError as error:
            self._note("miss", plan.fqn, repr(error))
            return False
        try:
            payload = self._valid_payload(module, plan, blob)
            if payload is None:
                return False
            os.makedirs(os.path.dirname(plan.local), exist_ok=True)
            part = f"{plan.local}.ao-part-{os.getpid()}"
            _write_new(part, payload)
            os.replace(part, plan.local)  # ansible only ever sees a whole file
            os.utime(plan.entry)  # most recently used: evicted last
        except Exception as error:
            self._note("miss", plan.fqn, repr(error))
            return False
        self._note("hit", plan.fqn)
        return True

    def _valid_payload(self, module: ModuleType, plan: _Plan, blob: bytes) -> bytes | None:
        if not blob.startswith(_FORMAT):
            self._note("miss", plan.fqn, "not an entry")
            return None
        header, _newline, payload = blob[len(_FORMAT) :].partition(b"\n")
        manifest = json.loads(header)
        if manifest["name"] != os.path.basename(plan.local):
            self._note("miss", plan.fqn, f"entry for {manifest['name']}")
            return None
        for path, recorded in manifest["records"]:
            if signature(path) != recorded:
                self._note("miss", plan.fqn, f"{_short(path)} changed")
                return None
        if hashlib.sha256(payload).hexdigest() != manifest["sha256"]:
            self._note("miss", plan.fqn, "corrupt entry")
            return None
        # What ansible will unpickle must be what this ansible writes.
        cached = pickle.loads(payload)  # noqa: S301 - our uid's file in our 0700 dir
        if not isinstance(cached, module._CachedModule) or not isinstance(cached.zip_data, bytes):
            self._note("miss", plan.fqn, "not a payload of this ansible-core")
            return None
        return payload

    def _publish(self, module: ModuleType, plan: _Plan, trace: _Trace) -> None:
        try:
            why_not = self._publish_or_why_not(module, plan, trace)
        except Exception as error:
            why_not = repr(error)
        if why_not:
            self._note("not shared", plan.fqn, why_not)
        else:
            self._note("shared", plan.fqn)

    def _publish_or_why_not(self, module: ModuleType, plan: _Plan, trace: _Trace) -> str:
        if trace.broken:
            return "the build could not be traced"
        try:
            with open(plan.local, "rb") as handle:
                payload = handle.read()
        except FileNotFoundError:
            return "ansible wrote no payload"
        cached = pickle.loads(payload)  # noqa: S301 - the file ansible just wrote
        unverified = _unverified_member(cached.zip_data, plan.fqn, trace.reads)
        if unverified:
            return f"{_short(unverified)} is not a file the build read"
        records = _records(plan, trace, module)
        recent = trace.started_ns - int(RACY_SECONDS * 1e9)
        for path, found in records.items():
            if found is not None and max(found[2], found[3]) >= recent:
                return f"{_short(path)} changed moments ago"
        manifest = {
            "name": os.path.basename(plan.local),
            "sha256": hashlib.sha256(payload).hexdigest(),
            "records": sorted(records.items()),
        }
        header = json.dumps(manifest, ensure_ascii=True, separators=(",", ":")).encode()
        part = os.path.join(self.directory, f".{plan.key}.{os.getpid()}")
        _write_new(part, _FORMAT + header + b"\n" + payload)
        os.replace(part, plan.entry)  # readers see the old entry or the new one, whole
        self._evict()
        return ""

    def _evict(self) -> None:
        """Keep the `max_entries` most recently used entries; drop dead writers' temps."""
        now = time.time()
        entries: list[tuple[int, str]] = []
        with os.scandir(self.directory) as scan:
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
        for _mtime, path in entries[: max(0, len(entries) - self.max_entries)]:
            try:  # noqa: SIM105 - no contextlib for one call
                os.unlink(path)
            except OSError:
                pass

    def _note(self, event: str, subject: str, reason: str = "") -> None:
        """One line on stderr with AO_WARM_DEBUG. In a worker that is a StringIO which
        Ansible shows as a warning, cut at 256 characters: hence short paths."""
        if self.debug:
            text = f"ao-warm azcache: {event}: {subject}" + (f" ({reason})" if reason else "")
            try:  # noqa: SIM105 - a note must never fail the run
                print(text, file=sys.stderr, flush=True)
            except Exception:  # noqa: S110 - nowhere left to report it
                pass


def _short(path: str) -> str:
    """The last three parts of a path: enough to tell which file, in a short note."""
    parts = path.split("/")
    return path if len(parts) <= 4 else ".../" + "/".join(parts[-3:])


def _write_new(path: str, data: bytes) -> None:
    """Write a new 0600 file (a leftover of a dead writer with our pid is replaced)."""
    try:  # noqa: SIM105 - no contextlib for one call
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as handle:
        handle.write(data)


def _unverified_member(zip_data: bytes, fqn: str, reads: Iterable[str]) -> str | None:
    """The first non-empty zip member that is not byte-identical to a file the build
    read (its size and CRC-32 against the file now), or None."""
    own = fqn.replace(".", "/") + ".py"  # the module itself: its source is in the key
    read = sorted(reads)
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(zip_data))) as payload:
        for info in payload.infolist():
            if info.file_size == 0 or info.filename in _SYNTHETIC or info.filename == own:
                continue
            tail = info.filename.removeprefix(_MU_PREFIX)
            candidates = [p for p in read if p.endswith("/" + tail)]
            if not any(_same_bytes(p, info) for p in candidates):
                return info.filename
    return None


def _same_bytes(path: str, info: zipfile.ZipInfo) -> bool:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return len(data) == info.file_size and binascii.crc32(data) == info.CRC


def _records(plan: _Plan, trace: _Trace, module: ModuleType) -> dict[str, Signature]:
    """Everything whose change could change the built payload; see the docstring."""
    records: dict[str, Signature] = {}
    for path in trace.reads:
        records[path] = signature(path)
        records.setdefault(os.path.dirname(path), signature(os.path.dirname(path)))
    for path in trace.listed:
        records[path] = signature(path)
    for roots, parts in trace.legacy:
        for root in roots:
            _chain(records, root, parts[2:])
    collections: set[tuple[str, ...]] = set()
    for parts in trace.collections:
        collections.add(tuple(parts[1:3]))
        for root in plan.collection_roots:
            _chain(records, os.path.join(root, "ansible_collections"), parts[1:])
    for namespace, name in (c for c in collections if len(c) == 2):
        for root in plan.collection_roots:
            routing = f"{root}/ansible_collections/{namespace}/{name}/meta/runtime.yml"
            records[routing] = signature(routing)
    # ansible.builtin's routing (redirects of ansible.module_utils names).
    ansible_dir = os.path.dirname(os.path.dirname(str(module.__file__)))
    builtin = os.path.join(ansible_dir, "config", "ansible_builtin_runtime.yml")
    records[builtin] = signature(builtin)
    return records


class _PatchOnImport:
    """A sys.meta_path entry that finds nothing itself: when `TARGET` is imported (by
    ansible-playbook, after its own configuration start-up) it lets the other finders
    find it and patches the module right after it ran."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._busy = False

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: object = None) -> Any:
        if fullname != TARGET or self._busy:
            return None
        self._busy = True
        try:
            return self._wrapped_spec(fullname, path, target)
        except Exception:
            return None  # the import goes on as if we were not there
        finally:
            self._busy = False

    def _wrapped_spec(self, fullname: str, path: Sequence[str] | None, target: object) -> Any:
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            # Not in find_spec: the import system is iterating sys.meta_path there.
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            self._cache.patch(module)

        loader.exec_module = exec_module
        return spec


def install(environ: Mapping[str, str]) -> Cache | None:
    """Share payloads for this run when `environ` names a private cache directory;
    never raises (the run then simply builds its payloads itself)."""
    directory = environ.get(ANSIBALLZ_CACHE_ENV)
    if not directory:
        return None
    cache = Cache(directory, max_entries=0, debug=bool(environ.get(_DEBUG_ENV)))
    try:
        limit = environ.get(ANSIBALLZ_CACHE_ENTRIES_ENV)
        cache.max_entries = int(limit) if limit else defaults.WARM_ANSIBALLZ_CACHE_ENTRIES
        found = os.lstat(directory)
        # Entries are unpickled by Ansible: only a directory of ours, closed to others.
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
            raise PermissionError(f"{directory} is not a directory of uid {os.getuid()}")
        if found.st_mode & 0o077:
            raise PermissionError(f"{directory} is open to other users")
        if cache.max_entries <= 0:
            return None
        module = sys.modules.get(TARGET)
        if module is not None:
            return cache if cache.patch(module) else None
        sys.meta_path.insert(0, _PatchOnImport(cache))
    except Exception as error:
        cache._note("off", "install", repr(error))
        return None
    return cache
