"""What the warm servers import before they fork: vetted, static lists.

Where this sits: pbserver.py and modserver.py import these names once at start-up.
The lists were produced by a greedy check (for each candidate, in import order: does
importing it, after the ones already taken, put `ansible.constants` into
`sys.modules`?) over every module a real `ansible-playbook` run and a real
`kubernetes.core.k8s` module run import, then reduced to the names whose imports
reach the same set. tests/unit/warm/test_preimports.py re-proves the rules in a fresh
interpreter for the installed versions:

* playbook helper: importing all of `PLAYBOOK_PREIMPORTS` must not import
  `ansible.constants`. Ansible reads its whole configuration (ansible.cfg, ANSIBLE_*
  variables, the cwd) when `ansible.constants` is imported, so anything that imports
  it would freeze the helper's configuration into every run (roles path, callbacks,
  timeouts ...). `ansible_collections` is never pre-imported there either: on the
  controller Ansible's collection finder owns that namespace.
* module server: `MODULE_PREIMPORTS` must import neither `ansible.constants` nor
  `ansible._internal` (controller code: importing it flips
  `ansible.module_utils._internal.is_controller`, which changes how module_utils
  behave).

Names that fail to import (a collection that is not installed) are skipped.
Re-run the check when ansible-core, kubernetes or kubernetes.core is upgraded.

Each ansible-core line has its own lists: `PLAYBOOK_PREIMPORTS` and
`MODULE_PREIMPORTS` are those of the installed line (read from the package's
metadata, without importing Ansible). The 2.18 line's playbook list came from the
same greedy check on ansible-core 2.18.19 (Python 3.11); its module list is the
2.19+ one without the module_utils internals 2.18 does not have.
"""

from __future__ import annotations

import importlib.metadata

__all__ = [
    "MODULE_FORBIDDEN",
    "MODULE_PREIMPORTS",
    "PLAYBOOK_FORBIDDEN",
    "PLAYBOOK_PREIMPORTS",
    "installed_line",
]

PLAYBOOK_FORBIDDEN = ("ansible.constants",)
MODULE_FORBIDDEN = ("ansible.constants", "ansible._internal")

_PLAYBOOK_219: tuple[str, ...] = (
    "inspect",
    "ansible._vendor",
    "locale",
    "getpass",
    "subprocess",
    "ipaddress",
    "pathlib",
    "dataclasses",
    "typing_extensions",
    "ansible.module_utils._internal._patches._dataclass_annotation_patch",
    "ansible.module_utils.compat.typing",
    "shutil",
    "tempfile",
    "ansible.module_utils._internal._dataclass_validation",
    "ansible.module_utils._internal._patches._sys_intern_patch",
    "ansible.module_utils._internal._patches._socket_patch",
    "ansible.module_utils._internal._messages",
    "ansible.module_utils._internal._datatag._tags",
    "ansible.module_utils._internal._json._profiles",
    "ansible.module_utils.common.text.converters",
    "ansible.module_utils._internal._stack",
    "ansible.module_utils._internal._validation",
    "ansible.module_utils._internal._plugin_info",
    "ansible.module_utils._internal._deprecator",
    "ansible.module_utils._internal._traceback",
    "ansible.module_utils.datatag",
    "ansible._internal._datatag._tags",
    "ansible.module_utils._internal._errors",
    "ansible._internal._errors._error_factory",
    "ansible.module_utils._internal._ambient_context",
    "ansible.module_utils._internal._text_utils",
    "ansible.module_utils._internal._event_utils",
    "ansible._internal._errors._error_utils",
    "ansible.errors",
    "decimal",
    "configparser",
    "pickle",
    "hashlib",
    "jinja2.bccache",
    "jinja2.nativetypes",
    "ansible.module_utils.common.sentinel",
    "yaml.error",
    "ansible.module_utils.common.yaml",
    "ansible.module_utils.parsing.convert_bool",
    "ansible.parsing.quoting",
    "ansible.utils.path",
    "ansible.config.manager",
    "ansible.utils.fqcn",
    "curses",
    "ctypes.util",
    "logging",
    "secrets",
    "ansible._internal._event_formatting",
    "ansible._internal._display_utils",
    "multiprocessing.process",
    "ansible.utils.multiprocessing",
    "ansible.utils.singleton",
    "pwd",
    "ansible.module_utils.common.warnings",
    "ansible.module_utils.six.moves.collections_abc",
    "ansible.module_utils.common.collections",
    "ansible.utils.context_objects",
    "ansible.context",
    "gettext",
    "argparse",
    "csv",
    "zipfile",
    "calendar",
    "email.parser",
    "ansible.inventory",
    "ansible.utils.sentinel",
    "ansible.vars.hostvars",
    "ansible._internal._templating._access",
    "ansible._internal._templating._jinja_patches",
    "ansible._internal._templating._utils",
    "ansible._internal._errors._captured",
    "shlex",
    "cryptography.hazmat.primitives.padding",
    "cryptography.hazmat.primitives.hmac",
    "cryptography.hazmat.primitives.kdf.pbkdf2",
    "cryptography.hazmat.decrepit.ciphers.algorithms",
    "cryptography.hazmat.primitives.ciphers.algorithms",
    "cryptography.hazmat.backends.openssl.backend",
    "ansible._internal._wrapt",
    "platform",
    "uuid",
    "jinja2.sandbox",
    "glob",
    "ansible.parsing.yaml",
    "ansible._internal._yaml._errors",
    "ansible.utils.collection_loader._collection_config",
    "ansible._internal._plugins",
    "packaging.version",
    "sysconfig",
    "packaging.tags",
    "packaging.utils",
    "packaging.specifiers",
    "ansible._internal._templating._errors",
    "ansible.parsing.splitter",
    "grp",
    "syslog",
    "ansible.module_utils.compat.selinux",
    "ansible.module_utils._internal._debugging",
    "ansible.module_utils.errors",
    "ansible.module_utils.common.text.formatters",
    "ansible.module_utils.common.locale",
    "ansible.module_utils.common.file",
    "ansible.module_utils.common.process",
    "ansible.module_utils.distro._distro",
    "ansible.module_utils.common._utils",
    "ansible.module_utils.common.sys_info",
    "ansible.parsing.utils.addresses",
    "ansible.utils.helpers",
    "tarfile",
    "ansible._internal._locking",
    "ansible._internal._ansiballz",
    "ansible.module_utils._internal._ansiballz._extensions._debugpy",
    "ansible.module_utils._internal._ansiballz._extensions._pydevd",
    "ansible.module_utils._internal._ansiballz._extensions._coverage",
    "ansible._internal._datatag._utils",
    "ansible.executor.powershell",
    "ansible.module_utils.compat.version",
    "ansible._internal._datatag._wrappers",
    "runpy",
    "ansible.module_utils.json_utils",
    "ansible._internal._errors._alarm_timeout",
    "cryptography.hazmat.primitives.asymmetric.dh",
    "cryptography.hazmat.primitives.serialization.base",
    "ansible._internal._ssh._ssh_agent",
    "queue",
    "multiprocessing.util",
    "multiprocessing.connection",
    "multiprocessing.queues",
    "ansible._internal._collection_proxy",
    "difflib",
    "ansible.utils.lock",
    # Left out for ansible-core 2.21: ansible.module_utils.compat.paramiko (gone there)
    # and ansible._internal._errors._task_timeout (imports ansible.constants there).
    "ansible.executor.process",
    "ansible.module_utils._text",
    "ansible.utils._junit_xml",
    "ansible.utils.hashing",
    "ansible.utils.shlex",
    "cmd",
    "mmap",
    "multiprocessing.popen_fork",
    "multiprocessing.resource_tracker",
    "multiprocessing.shared_memory",
    "multiprocessing.synchronize",
    "pprint",
    "pty",
    "tomllib",
)

_MODULE_219: tuple[str, ...] = (
    "ansible.module_utils.basic",
    "ansible.module_utils._internal._ansiballz._loader",
    "ansible.module_utils.urls",
    "ansible.module_utils.common.dict_transformations",
    "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
    "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.dynamic",
    "kubernetes.watch",
    "kubernetes.stream",
    "urllib3",
    "requests",
    "oauthlib",
    "requests_oauthlib",
    "jsonpatch",
    "yaml",
    "ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule",
    "ansible_collections.kubernetes.core.plugins.module_utils.apply",
    "ansible_collections.kubernetes.core.plugins.module_utils.args_common",
    "ansible_collections.kubernetes.core.plugins.module_utils.client.discovery",
    "ansible_collections.kubernetes.core.plugins.module_utils.client.resource",
    "ansible_collections.kubernetes.core.plugins.module_utils.common",
    "ansible_collections.kubernetes.core.plugins.module_utils.exceptions",
    "ansible_collections.kubernetes.core.plugins.module_utils.hashes",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.client",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.core",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.resource",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.runner",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.service",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.waiter",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8sdynamicclient",
    "ansible_collections.kubernetes.core.plugins.module_utils.selector",
    "ansible_collections.kubernetes.core.plugins.modules",
)

# ansible-core 2.18: no data tagging, no ansible._internal; ansible.constants is
# imported by more of the controller (the executor, plugins), so the list is shorter.
_PLAYBOOK_218: tuple[str, ...] = (
    "importlib.metadata",
    "email.parser",
    "ansible.config.manager",
    "ansible.utils.fqcn",
    "encodings.unicode_escape",
    "curses",
    "ctypes.util",
    "secrets",
    "ansible.utils.unsafe_proxy",
    "ansible.context",
    "ansible.inventory",
    "ansible.parsing.splitter",
    "ansible.parsing.utils.addresses",
    "cryptography.hazmat.primitives.padding",
    "cryptography.hazmat.primitives.hmac",
    "cryptography.hazmat.primitives.kdf.pbkdf2",
    "cryptography.hazmat.backends.openssl",
    "ansible.utils.collection_loader",
    "packaging.specifiers",
    "ansible.utils.helpers",
    "ansible.vars",
    "ansible.module_utils.basic",
    "ansible.utils.sentinel",
    "tarfile",
    "multiprocessing.queues",
    "difflib",
    "ansible.utils.lock",
    "ansible.module_utils.compat.paramiko",
    "ansible.utils.shlex",
    "tomllib",
    "ansible.utils.hashing",
    "ansible.module_utils.json_utils",
    "pexpect",
    "ansible.modules",
    "ansible.executor.powershell",
    "ansible.executor.action_write_locks",
    "ansible.parsing.utils.jsonify",
    "ansible.utils._junit_xml",
    "cmd",
    "pprint",
    "ansible.executor.process",
    "ansible.module_utils.connection",
    "multiprocessing.popen_fork",
)
# Present on 2.19+ only: the AnsiballZ loader and the JSON profiles of module_utils.
_MODULE_219_ONLY = frozenset(
    {
        "ansible.module_utils._internal._ansiballz._loader",
        "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
        "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
    }
)
_MODULE_218 = tuple(name for name in _MODULE_219 if name not in _MODULE_219_ONLY)


def installed_line() -> tuple[int, int] | None:
    """ansible-core's (major, minor), from its metadata; None if unknown."""
    try:
        major, minor = importlib.metadata.version("ansible-core").split(".")[:2]
        return int(major), int(minor)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


_ON_218 = installed_line() == (2, 18)
PLAYBOOK_PREIMPORTS: tuple[str, ...] = _PLAYBOOK_218 if _ON_218 else _PLAYBOOK_219
MODULE_PREIMPORTS: tuple[str, ...] = _MODULE_218 if _ON_218 else _MODULE_219
