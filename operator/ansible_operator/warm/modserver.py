"""The warm module server: AnsiballZ module runs forked from a warm interpreter.

Where this sits: started by supervisor.py as
`python -m ansible_operator.warm.modserver --socket <dir>/module.sock`; reached by the
interpreter client (client.interpreter_main) that the generated inventory names as
`ansible_python_interpreter`. Each run child runs the AnsiballZ wrapper (a script
path, or the payload on stdin when pipelining) as `__main__`, as a cold interpreter
would; the wrapper then unpacks the module zip and calls
`ansible.module_utils._internal._ansiballz._loader.run_module` (ansible-core 2.19+),
or `runpy.run_module` with the zip first on sys.path (2.18): both are wrapped in the
run child so the check below happens before the module is imported.

Pre-imported (`preimports.MODULE_PREIMPORTS`): ansible.module_utils.basic and its
dependencies, the kubernetes client and kubernetes.core's module_utils. Never
`ansible._internal` (controller code) nor `ansible.constants`.

Per run, before the module code runs:
* `kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION` is re-read from the
  run's `KUBECONFIG` (the library reads it once, at import);
* the payload zip is checked against what we pre-imported: every pre-imported
  `ansible*` file the zip also carries must have the same CRC32 and size (read from
  the zip's central directory: no decompression). If they match, the zip's directory
  is put first on each pre-imported package's `__path__`, so anything that is not
  pre-imported (a role's custom module_utils) resolves from the payload first, as in
  a fresh interpreter. On a mismatch (another collection version on the run's path)
  every `ansible*` module is dropped from `sys.modules` and the payload's own copies
  are imported: cold semantics for Ansible code, while `kubernetes` stays warm.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys
import zipfile
import zlib
from collections.abc import Callable
from typing import Any, NoReturn

from ansible_operator.errors import WarmStartError
from ansible_operator.warm import bootstrap, child, forkserver
from ansible_operator.warm.preimports import MODULE_FORBIDDEN, MODULE_PREIMPORTS
from ansible_operator.warm.protocol import Request

__all__ = ["PayloadIndex", "main"]

_LOADER = "ansible.module_utils._internal._ansiballz._loader"
# AnsiballZ writes its own pkgutil.extend_path stubs for these two packages.
_SYNTHETIC_INITS = frozenset({"ansible/__init__.py", "ansible/module_utils/__init__.py"})
_ANSIBLE_ROOTS = ("ansible", "ansible_collections")


def _is_ansible(name: str) -> bool:
    return name in _ANSIBLE_ROOTS or name.startswith(tuple(r + "." for r in _ANSIBLE_ROOTS))


class PayloadIndex:
    """CRC32 and size of every pre-imported Ansible source file, by its path in a zip."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[int, int]] = {}
        self.packages: list[str] = []

    def scan(self) -> None:
        for name, module in list(sys.modules.items()):
            if not _is_ansible(name):
                continue
            filename = getattr(module, "__file__", None)
            is_package = hasattr(module, "__path__")
            if is_package and not filename:  # a namespace package: ansible_collections.*
                self.packages.append(name)
                continue
            if not filename or not filename.endswith(".py"):
                continue
            rel = name.replace(".", "/") + ("/__init__.py" if is_package else ".py")
            try:
                with open(filename, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            self.files[rel] = (zlib.crc32(data), len(data))
            if is_package:
                self.packages.append(name)

    def mismatches(self, infos: dict[str, zipfile.ZipInfo]) -> list[str]:
        return [
            rel
            for rel, (crc, size) in self.files.items()
            if rel in infos
            and rel not in _SYNTHETIC_INITS
            and (infos[rel].CRC, infos[rel].file_size) != (crc, size)
        ]

    def extend_paths(self, modlib_path: str, infos: dict[str, zipfile.ZipInfo]) -> None:
        """Put the zip's copy of every pre-imported package first on its `__path__`.

        Namespace packages (`ansible_collections`, `ansible_collections.kubernetes`
        ...) get a plain list: in a cold interpreter the zip's synthetic `__init__.py`
        makes them regular packages of the zip, so a collection that is not installed
        next to the operator (a project's `collections/`, `~/.ansible/collections`)
        must be found there too; a `_NamespacePath` would never look into the zip.
        """
        dirs = {name.rsplit("/", 1)[0] for name in infos if "/" in name}
        for package in self.packages:
            rel = package.replace(".", "/")
            module = sys.modules.get(package)
            path = getattr(module, "__path__", None)
            if rel not in dirs or path is None:
                continue
            first = os.path.join(modlib_path, rel)
            if isinstance(path, list):
                path.insert(0, first)
            else:
                module.__path__ = [first, *path]  # type: ignore[union-attr]


def _prepared(index: PayloadIndex, modlib_path: str) -> bool:
    """Make the pre-imported packages see the payload (see the module docstring);
    False when the payload's Ansible files differ and the ansible* modules were
    dropped from sys.modules, so the payload's own copies get imported."""
    with zipfile.ZipFile(modlib_path) as payload:
        infos = {info.filename: info for info in payload.infolist()}
    if index.mismatches(infos):
        for name in [n for n in sys.modules if _is_ansible(n)]:
            del sys.modules[name]
        return False
    index.extend_paths(modlib_path, infos)
    return True


def _checked_loader(index: PayloadIndex, original: Callable[..., Any]) -> Callable[..., Any]:
    def run_module(*, modlib_path: str, **kwargs: Any) -> Any:
        if not _prepared(index, modlib_path):
            fresh = importlib.import_module(_LOADER)
            return fresh.run_module(modlib_path=modlib_path, **kwargs)
        return original(modlib_path=modlib_path, **kwargs)

    return run_module


def _checked_runpy(index: PayloadIndex, original: Callable[..., Any]) -> Callable[..., Any]:
    """ansible-core 2.18's wrapper has no loader module: it puts the payload first on
    sys.path and calls `runpy.run_module(..., init_globals={'_modlib_path': ...})`.
    The same check then happens here, once, for the module it runs."""

    def run_module(mod_name: str, init_globals: Any = None, *args: Any, **kwargs: Any) -> Any:
        modlib_path = (init_globals or {}).get("_modlib_path")
        if isinstance(modlib_path, str) and zipfile.is_zipfile(modlib_path):
            _prepared(index, modlib_path)
        return original(mod_name, init_globals, *args, **kwargs)

    return run_module


def _reset_library_state() -> None:
    """Per-run values that pre-imported libraries captured from the environment."""
    kube_config = sys.modules.get("kubernetes.config.kube_config")
    if kube_config is not None:
        location = os.environ.get("KUBECONFIG", "~/.kube/config")
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = location  # type: ignore[attr-defined]


def _run_module(
    fds: list[int], request: Request, *, base_path: list[str], index: PayloadIndex
) -> NoReturn:
    if request.stdin_script:  # `python` < payload: argv [''], sys.path[0] ''
        child.become_fresh(fds, request, base_path=base_path, main_dir="")
        sys.argv = [""]
        source, filename, main_file = sys.stdin.buffer.read(), "<stdin>", None
    else:
        script = request.argv[0]
        main_dir = os.path.dirname(os.path.realpath(script))
        child.become_fresh(fds, request, base_path=base_path, main_dir=main_dir)
        sys.argv = list(request.argv)
        with open(script, "rb") as handle:
            source = handle.read()
        filename = main_file = script
    _reset_library_state()
    loader = sys.modules.get(_LOADER)
    if loader is not None:
        loader.run_module = _checked_loader(index, loader.run_module)  # type: ignore[attr-defined]
    else:  # ansible-core 2.18
        runpy.run_module = _checked_runpy(index, runpy.run_module)
    code = compile(source, filename, "exec", dont_inherit=True)
    child.run_main(code, filename=main_file)


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        started = bootstrap.start(
            sys.argv[1:] if argv is None else argv,
            preimports=MODULE_PREIMPORTS,
            forbidden=MODULE_FORBIDDEN,
        )
    except WarmStartError as error:
        sys.exit(f"warm module server: {error}")
    index = PayloadIndex()
    index.scan()
    base_path = started.base_path

    def run_child(fds: list[int], request: Request) -> NoReturn:
        _run_module(fds, request, base_path=base_path, index=index)

    forkserver.serve(socket_path=started.socket_path, child_main=run_child, name="module")


if __name__ == "__main__":
    main()
