"""Built AnsiballZ payloads shared across warm `ansible-playbook` runs: the import
hook, and what one payload build does with the shared directory.

Where this sits: pbserver.py's run child calls `install(os.environ)` right after
`child.become_fresh()` and before the real `ansible-playbook` script runs. Nothing
happens unless the run's environment names the cache directory (supervisor.run_env()
sets `protocol.ANSIBALLZ_CACHE_ENV` to `<runner root>/.warm-<pid>/ansiballz/`, 0700);
the cold path never imports this module. install() only adds an import hook, so
nothing that imports `ansible.constants` is imported here: when the CLI itself imports
`ansible.executor.module_common`, in its own start-up order, the hook wraps that
module's `_find_module_utils` (which builds a Python module's payload) and its two
module_utils locators. The wrapper then runs in Ansible's worker processes (forked
from the run child), once per module task. Below this module: payloadtrace.py (what a
build read and looked up) and payloadentries.py (the entries: format, validity, atomic
writes, eviction).

Why: ansible-core keeps a built payload only in the per-process
`ansible-local-<pid>*/ansiballz_cache` directory, so every run walks and zips the
same ~40 module_utils again for its first `kubernetes.core.k8s` task (~0.17 s CPU).

A call: compute the entry key from everything the build depends on besides file
contents (module source hash, path, compression, Ansible version, interpreter, the
module_utils roots and collection roots that exist). If ansible's local cache file
is already there (an earlier task of this run), ansible uses it. Else, if the shared
entry is valid, copy its payload to ansible's local cache file name, so ansible's own
code finds it ("using cached module") and builds the per-task wrapper (arguments,
interpreter) as usual. Else take the entry's build lock (runs that miss together
wait for the first, then use its entry), call the original while tracing what it reads, and
publish the file it wrote: only when every non-empty zip member is a file the build
read and no record changed in the last `RACY_SECONDS` (payloadentries.py says why an
entry stays sound). Role or playbook `library/` modules (`ansible.legacy.*`:
ansible's cache aliases them by name) and payloads with AnsiballZ extensions
(debugger, coverage) are never shared. Any error falls back to Ansible's own
behaviour; notes go to stderr (in a worker: shown as an Ansible warning) only with
`AO_WARM_DEBUG` set; never to stdout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from ansible_operator.config import defaults
from ansible_operator.warm import payloadentries, payloadtrace
from ansible_operator.warm.payloadentries import short
from ansible_operator.warm.protocol import ANSIBALLZ_CACHE_ENTRIES_ENV, ANSIBALLZ_CACHE_ENV

__all__ = ["RACY_SECONDS", "Cache", "install"]

TARGET = "ansible.executor.module_common"
SUPPORTED_ANSIBLE = ("2.19.", "2.21.")
"""Versions whose payload building this module was checked against (file names of the
local cache, locators reading with open(), the pickle format)."""
RACY_SECONDS = 1.0
"""Records stamped this close to the build's start are not trusted (coarse clocks)."""
BUILD_WAIT_SECONDS = 10.0
"""How long a run waits for another run building the same payload, then builds it."""
_BUILD_POLL_SECONDS = 0.02
_DEBUG_ENV = "AO_WARM_DEBUG"


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
            legacy_find = payloadtrace.recording_find_module(legacy, "legacy")
            collection_find = payloadtrace.recording_find_module(collection, "collection")
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
        with self._build_turn(plan) as waited:
            if waited and self._restore(module, plan):
                return original(**kwargs)
            trace = payloadtrace.start()
            try:
                result = original(**kwargs)
            finally:
                payloadtrace.stop()
            if trace is not None:
                self._publish(module, plan, trace)
            return result

    @contextlib.contextmanager
    def _build_turn(self, plan: _Plan) -> Iterator[bool]:
        """Hold the entry's build lock; yields whether another run held it first.

        One build at a time per entry: the runs that start together after the operator
        starts would otherwise all build the same payload at once, each worker holding
        its own ~20 MiB of parsed module_utils (the peak memory of a burst). A waiting
        run then takes the entry the first one published. The wait is bounded, and
        the kernel drops the lock of a builder that dies; any error means no lock.
        """
        path = os.path.join(self.directory, f".lock-{plan.key}")  # a dot: evict() ages it
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as error:
            self._note("no lock", plan.fqn, repr(error))
            yield False
            return
        try:
            waited = not self._lock(fd, plan)
            yield waited
        finally:
            os.close(fd)  # releases the lock

    def _lock(self, fd: int, plan: _Plan) -> bool:
        """True when the lock was free; False after waiting (got it, or gave up)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            pass
        self._note("waiting", plan.fqn)
        # Polled, not blocking: a task's `timeout:` is a SIGALRM in this process.
        deadline = time.monotonic() + BUILD_WAIT_SECONDS
        while time.monotonic() < deadline:
            time.sleep(_BUILD_POLL_SECONDS)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            self._note("waited", plan.fqn)
            return False
        self._note("waited", plan.fqn, f"gave up after {BUILD_WAIT_SECONDS:g} s")
        return False

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
            self._note("bypass", short(module_path), "no collection or core name")
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
            payloadentries.FORMAT.decode(),
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
            blob = payloadentries.read(plan.entry)
        except FileNotFoundError:
            self._note("miss", plan.fqn)
            return False
        except OSError as error:
            self._note("miss", plan.fqn, repr(error))
            return False
        try:
            name = os.path.basename(plan.local)
            payload, why_not = payloadentries.entry_payload(blob, name, module._CachedModule)
            if why_not:
                self._note("miss", plan.fqn, why_not)
                return False
            os.makedirs(os.path.dirname(plan.local), exist_ok=True)
            # ansible only ever sees a whole file
            payloadentries.write_whole(plan.local, payload, f"{plan.local}.ao-part-{os.getpid()}")
            os.utime(plan.entry)  # most recently used: evicted last
        except Exception as error:
            self._note("miss", plan.fqn, repr(error))
            return False
        self._note("hit", plan.fqn)
        return True

    def _publish(self, module: ModuleType, plan: _Plan, trace: payloadtrace.Trace) -> None:
        try:
            why_not = self._publish_or_why_not(module, plan, trace)
        except Exception as error:
            why_not = repr(error)
        if why_not:
            self._note("not shared", plan.fqn, why_not)
        else:
            self._note("shared", plan.fqn)

    def _publish_or_why_not(
        self, module: ModuleType, plan: _Plan, trace: payloadtrace.Trace
    ) -> str:
        if trace.broken:
            return "the build could not be traced"
        try:
            payload = payloadentries.read(plan.local)
        except FileNotFoundError:
            return "ansible wrote no payload"
        cached = pickle.loads(payload)  # noqa: S301 - the file ansible just wrote
        unverified = payloadentries.unverified_member(cached.zip_data, plan.fqn, trace.reads)
        if unverified:
            return f"{short(unverified)} is not a file the build read"
        records = payloadentries.records(trace, plan.collection_roots, str(module.__file__))
        recent = payloadentries.changed_since(records, trace.started_ns - int(RACY_SECONDS * 1e9))
        if recent is not None:
            return f"{short(recent)} changed moments ago"
        name = os.path.basename(plan.local)
        payloadentries.publish(self.directory, plan.key, name, payload, records)
        payloadentries.evict(self.directory, self.max_entries)
        return ""

    def _note(self, event: str, subject: str, reason: str = "") -> None:
        """One line on stderr with AO_WARM_DEBUG. In a worker that is a StringIO which
        Ansible shows as a warning, cut at 256 characters: hence short paths."""
        if self.debug:
            text = f"ao-warm payloadcache: {event}: {subject}" + (f" ({reason})" if reason else "")
            try:  # noqa: SIM105 - a note must never fail the run
                print(text, file=sys.stderr, flush=True)
            except Exception:  # noqa: S110 - nowhere left to report it
                pass


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
