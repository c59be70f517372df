"""One "run" for test_payloadcache.py: a fresh interpreter that builds one module's payload
with ansible-core's real `module_common`, with warm/payloadcache.py installed the way the
playbook helper installs it (before Ansible imports module_common).

Usage: python payloadcache_driver.py '<json settings>'. Prints a JSON document:
`{"hooked": bool, "members": {zip member: text}}` for the members outside ansible/
and those named in `show`; the cache's notes (AO_WARM_DEBUG) go to stderr.
"""

from __future__ import annotations

import base64
import importlib.machinery
import io
import json
import os
import re
import sys
import zipfile


def main() -> None:
    settings = json.loads(sys.argv[1])
    os.environ["ANSIBLE_LOCAL_TEMP"] = settings["local_tmp"]
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(settings["collections"])
    os.environ["ANSIBLE_COLLECTIONS_SCAN_SYS_PATH"] = "false"
    os.environ["AO_WARM_DEBUG"] = "1"
    os.environ["AO_WARM_ANSIBALLZ_CACHE"] = settings["cache"]

    # Imports in this order on purpose: the cache is installed before Ansible loads
    # its configuration and module_common, as in the playbook helper's run child.
    from ansible_operator.warm import payloadcache  # noqa: PLC0415

    payloadcache.RACY_SECONDS = settings.get("racy_seconds", 0.0)
    if "build_wait_seconds" in settings:
        payloadcache.BUILD_WAIT_SECONDS = settings["build_wait_seconds"]
    cache = payloadcache.install(os.environ)
    assert cache is not None, "the cache did not install"
    assert payloadcache.TARGET not in sys.modules, "module_common was imported too early"

    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415
    from ansible.plugins.loader import init_plugin_loader, module_utils_loader  # noqa: PLC0415
    from ansible.template import Templar  # noqa: PLC0415

    init_plugin_loader()
    for directory in settings.get("module_utils", []):
        module_utils_loader.add_directory(directory)  # as a role's module_utils/ is added

    from ansible.executor import module_common  # noqa: PLC0415
    from ansible.plugins.loader import module_loader  # noqa: PLC0415

    # As ansible-playbook's main process does before any worker builds a payload:
    # resolve the module (imports the collection package, reads its meta/runtime.yml).
    module_loader.find_plugin_with_context(settings["module_name"])
    # Directories an earlier lookup in this process already listed (Python's finders
    # cache listings per path): the build itself then lists nothing there.
    for primed in settings.get("prime_dirs", []):
        directory = os.path.realpath(primed)  # as module_utils_loader.add_directory has it
        importlib.machinery.PathFinder.find_spec("ansible.module_utils.aotest_none", [directory])

    task_vars = {"ansible_python_interpreter": sys.executable}
    built = module_common.modify_module(
        module_name=settings["module_name"],
        module_path=settings["module_path"],
        module_args={},
        templar=Templar(loader=DataLoader(), variables=task_vars),
        task_vars=task_vars,
        module_compression=settings.get("compression", "ZIP_DEFLATED"),
    )
    wrapper = built.b_module_data.decode()
    zip_data = re.search(r"zip_data='([^']*)'", wrapper)
    assert zip_data is not None, "no AnsiballZ payload"
    members = {}
    shown = set(settings.get("show", ()))
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(zip_data.group(1)))) as payload:
        for name in payload.namelist():
            if not name.startswith("ansible/") or name in shown:
                members[name] = payload.read(name).decode()
    hooked = hasattr(module_common._find_module_utils, "__wrapped__")
    print(json.dumps({"hooked": hooked, "members": members}))


if __name__ == "__main__":
    main()
