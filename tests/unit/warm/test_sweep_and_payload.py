"""The marker sweep finds forked run processes by name; the module server's payload check."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
import uuid
import zipfile
import zlib
from pathlib import Path

import pytest

from ansible_operator.runner.sweep import kill_run_processes
from ansible_operator.warm.modserver import PayloadIndex
from ansible_operator.warm.protocol import run_comm
from testbed.probes import wait_until

NAMED = (
    "import ctypes, sys, time\n"
    "ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)\n"
    "print('ready', flush=True)\n"
    "import signal\n"
    "signal.pause()  # until the test kills it\n"
)


def test_the_sweep_kills_a_process_named_after_the_marker_without_its_env() -> None:
    marker = uuid.uuid4().hex
    named = subprocess.Popen(
        [sys.executable, "-c", NAMED, run_comm(marker)], stdout=subprocess.PIPE, text=True
    )
    other = subprocess.Popen(
        [sys.executable, "-c", NAMED, run_comm(uuid.uuid4().hex)], stdout=subprocess.PIPE, text=True
    )
    try:
        for proc in (named, other):
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
        assert Path(f"/proc/{named.pid}/comm").read_text().strip() == run_comm(marker)
        killed = kill_run_processes(marker)
        assert named.pid in killed
        assert other.pid not in killed
        wait_until("the named process died", lambda: named.poll() is not None, timeout=10)
        assert other.poll() is None  # another run's process is left alone
    finally:
        for proc in (named, other):
            proc.kill()
            proc.wait()


def payload(tmp_path: Path, files: dict[str, bytes]) -> tuple[str, dict[str, zipfile.ZipInfo]]:
    path = tmp_path / "payload.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    with zipfile.ZipFile(path) as archive:
        return str(path), {info.filename: info for info in archive.infolist()}


def test_payload_check_compares_crc_and_size_and_skips_synthetic_inits(tmp_path: Path) -> None:
    index = PayloadIndex()
    same, changed = b"VALUE = 1\n", b"VALUE = 2\n"
    index.files = {
        "ansible/__init__.py": (zlib.crc32(b"real"), 4),
        "ansible/module_utils/same.py": (zlib.crc32(same), len(same)),
        "ansible/module_utils/changed.py": (zlib.crc32(same), len(same)),
        "ansible/module_utils/absent.py": (zlib.crc32(same), len(same)),
    }
    _path, infos = payload(
        tmp_path,
        {
            "ansible/__init__.py": b"# extend_path stub written by AnsiballZ\n",
            "ansible/module_utils/same.py": same,
            "ansible/module_utils/changed.py": changed,
        },
    )
    assert index.mismatches(infos) == ["ansible/module_utils/changed.py"]


def test_payload_dirs_go_first_on_preimported_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = types.ModuleType("ansible_fake_pkg")
    package.__path__ = ["/site-packages/ansible_fake_pkg"]
    monkeypatch.setitem(sys.modules, "ansible_fake_pkg", package)
    index = PayloadIndex()
    index.packages = ["ansible_fake_pkg", "not_in_the_payload"]
    path, infos = payload(tmp_path, {"ansible_fake_pkg/own_utils.py": b"X = 1\n"})
    index.extend_paths(path, infos)
    assert package.__path__ == [f"{path}/ansible_fake_pkg", "/site-packages/ansible_fake_pkg"]


def test_a_namespace_package_finds_what_only_the_payload_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As `ansible_collections` in the module server: a namespace package imported from
    # site-packages before the fork; the payload carries a collection installed
    # elsewhere (a project's collections/), which a cold interpreter finds in the zip.
    site = tmp_path / "site"
    (site / "ansible_fake_ns" / "installed").mkdir(parents=True)
    (site / "ansible_fake_ns" / "installed" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(site))
    for name in [n for n in sys.modules if n.startswith("ansible_fake_ns")]:
        monkeypatch.delitem(sys.modules, name)
    namespace = importlib.import_module("ansible_fake_ns")
    assert getattr(namespace, "__file__", None) is None  # a namespace package indeed
    path, infos = payload(
        tmp_path,
        {
            "ansible_fake_ns/__init__.py": b"",  # AnsiballZ's synthetic init
            "ansible_fake_ns/elsewhere/__init__.py": b"",
            "ansible_fake_ns/elsewhere/utils.py": b"WHERE = 'payload'\n",
        },
    )
    index = PayloadIndex()
    monkeypatch.setattr("ansible_operator.warm.modserver._ANSIBLE_ROOTS", ("ansible_fake_ns",))
    index.scan()
    assert "ansible_fake_ns" in index.packages
    index.extend_paths(path, infos)
    try:
        utils = importlib.import_module("ansible_fake_ns.elsewhere.utils")
        assert utils.WHERE == "payload"
        assert importlib.import_module("ansible_fake_ns.installed")  # still reachable
    finally:
        for name in [n for n in sys.modules if n.startswith("ansible_fake_ns")]:
            del sys.modules[name]
