"""warm/payloadcache.py (with payloadtrace.py, payloadentries.py): payloads shared across runs, and every
change that must end a share.

Each "run" is a fresh interpreter (payloadcache_driver.py) that builds one module's payload
with ansible-core's real module_common, with the cache installed as the playbook
helper installs it. A custom collection and module_utils roots in a temp dir stand in
for a project; the second run after a change must build again (a miss) and its payload
must carry the change, which is what a cold run would have sent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.config import defaults
from ansible_operator.warm import payloadcache, payloadentries
from ansible_operator.warm.protocol import ANSIBALLZ_CACHE_ENTRIES_ENV, ANSIBALLZ_CACHE_ENV
from ansible_operator.warm.supervisor import WarmServers

REPO = Path(__file__).resolve().parents[3]
DRIVER = Path(__file__).with_name("payloadcache_driver.py")
FQN = "ansible_collections.aotest.cache.plugins.modules.probe"
VALUE_MEMBER = "ansible_collections/aotest/cache/plugins/module_utils/value.py"
MODULE_MEMBER = "ansible_collections/aotest/cache/plugins/modules/probe.py"
EXTRA_MEMBER = "ansible/module_utils/aotest_extra.py"
CONVERTERS_MEMBER = "ansible/module_utils/common/text/converters.py"
PROBE = """\
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.aotest_extra import EXTRA
from ansible_collections.aotest.cache.plugins.module_utils.value import VALUE


def main():
    AnsibleModule(argument_spec={}).exit_json(value=VALUE, extra=EXTRA)


if __name__ == "__main__":
    main()
"""


@dataclass
class Run:
    notes: list[str]
    members: dict[str, str]

    @property
    def outcome(self) -> str:
        """ "hit", "miss" or "bypass": what the cache did for the probe module."""
        kinds = {note.split(":", 1)[0] for note in self.notes}
        assert len(kinds & {"hit", "miss", "bypass"}) <= 1, self.notes
        for kind in ("hit", "miss", "bypass"):
            if kind in kinds:
                return kind
        return "none"


@dataclass
class Project:
    """A collection `aotest.cache` in `colls/`, an earlier collection root `colls0/`
    (holding another collection), and module_utils roots `mu/` (existing, with a
    `common/` dir) and `mu_late/` (absent, searched first)."""

    top: Path
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def collection(self) -> Path:
        return self.top / "colls" / "ansible_collections" / "aotest" / "cache"

    @property
    def cache(self) -> Path:
        return self.top / "cache"

    def run(self, **overrides: Any) -> Run:
        return self.finish(self.start(**overrides))

    def start(self, **overrides: Any) -> subprocess.Popen[str]:
        """One run in the background; its notes can be read from stderr as they come."""
        settings = {
            "local_tmp": str(self.top / "local"),
            "collections": [str(self.top / "colls0"), str(self.top / "colls")],
            "module_utils": [str(self.top / "mu_late"), str(self.top / "mu")],
            "cache": str(self.cache),
            "module_name": "aotest.cache.probe",
            "module_path": str(self.collection / "plugins" / "modules" / "probe.py"),
            "show": [EXTRA_MEMBER, CONVERTERS_MEMBER],
            # Listed before the build, as ansible-playbook's own imports list the dirs
            # of ansible.module_utils: no listing to record, only the lookups.
            "prime_dirs": [str(self.top / "mu" / "common")],
            **self.settings,
            **overrides,
        }
        return subprocess.Popen(
            [sys.executable, str(DRIVER), json.dumps(settings)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.top,
            env={**os.environ, "PYTHONPATH": str(REPO / "operator")},
        )

    def finish(self, proc: subprocess.Popen[str], *, seen: Sequence[str] = ()) -> Run:
        stdout, stderr = proc.communicate(timeout=120)
        stderr = "".join(seen) + stderr
        assert proc.returncode == 0, stderr
        document = json.loads(stdout)
        assert document["hooked"], "module_common was not patched"
        prefix = "ao-warm payloadcache: "
        notes = [line[len(prefix) :] for line in stderr.splitlines() if line.startswith(prefix)]
        return Run(notes=notes, members=document["members"])

    def entries(self) -> list[Path]:
        return sorted(p for p in self.cache.iterdir() if not p.name.startswith("."))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    made = Project(top=tmp_path)
    write(made.collection / "meta" / "runtime.yml", 'requires_ansible: ">=2.15"\n')
    write(made.collection / "plugins" / "modules" / "probe.py", PROBE)
    write(made.collection / "plugins" / "module_utils" / "value.py", 'VALUE = "one"\n')
    write(made.collection / "plugins" / "module_utils" / "value2.py", 'VALUE = "redirected"\n')
    write(tmp_path / "colls0" / "ansible_collections" / "other" / "coll" / "README", "x\n")
    write(tmp_path / "mu" / "aotest_extra.py", 'EXTRA = "mu"\n')
    write(tmp_path / "mu" / "common" / "unrelated.py", "UNRELATED = 1\n")
    (tmp_path / "local").mkdir()
    made.cache.mkdir(mode=0o700)
    return made


def edit_keeping_size_and_mtime(path: Path, old: str, new: str) -> None:
    assert len(old) == len(new)
    before = path.stat()
    time.sleep(0.05)  # a later ctime than the recorded one, whatever the clock's tick
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def corrupt_payload(project: Project) -> None:
    (entry,) = project.entries()
    data = bytearray(entry.read_bytes())
    data[-40:-20] = b"X" * 20  # inside the pickled payload, after the manifest
    entry.write_bytes(bytes(data))


Change = Callable[[Project], Any]

CASES: list[tuple[str, Change, dict[str, Any], str, tuple[str, str] | None]] = [
    # id, change, second run's settings, outcome, (member, text it must contain)
    ("nothing changed", lambda p: None, {}, "hit", (VALUE_MEMBER, '"one"')),
    (
        "the module's source edited",
        lambda p: write(p.collection / "plugins/modules/probe.py", PROBE + "# edited\n"),
        {},
        "miss",
        (MODULE_MEMBER, "# edited"),
    ),
    (
        "the module file touched, same bytes (the key hashes the source)",
        lambda p: os.utime(p.collection / "plugins/modules/probe.py"),
        {},
        "hit",
        (VALUE_MEMBER, '"one"'),
    ),
    (
        "a collection module_utils file edited",
        lambda p: write(p.collection / "plugins/module_utils/value.py", 'VALUE = "three"\n'),
        {},
        "miss",
        (VALUE_MEMBER, '"three"'),
    ),
    (
        "a module_utils file rewritten keeping its size and mtime",
        lambda p: edit_keeping_size_and_mtime(
            p.collection / "plugins/module_utils/value.py", '"one"', '"two"'
        ),
        {},
        "miss",
        (VALUE_MEMBER, '"two"'),
    ),
    (
        "a file added below an existing dir of a searched root, shadowing ansible's",
        lambda p: write(p.top / "mu" / "common" / "text" / "converters.py", "SHADOW = 1\n"),
        {},
        "miss",
        (CONVERTERS_MEMBER, "SHADOW = 1"),
    ),
    (
        "a module_utils root that did not exist appears, shadowing",
        lambda p: write(p.top / "mu_late" / "aotest_extra.py", 'EXTRA = "late"\n'),
        {},
        "miss",
        (EXTRA_MEMBER, '"late"'),
    ),
    (
        "the collection appears in an earlier collection root",
        lambda p: write(
            p.top / "colls0/ansible_collections/aotest/cache/plugins/module_utils/value.py",
            'VALUE = "earlier"\n',
        ),
        {},
        "miss",
        (VALUE_MEMBER, '"earlier"'),
    ),
    (
        "the collection's runtime.yml redirects a module_utils name",
        lambda p: write(
            p.collection / "meta/runtime.yml",
            "plugin_routing:\n  module_utils:\n    value:\n      redirect: aotest.cache.value2\n",
        ),
        {},
        "miss",
        ("ansible_collections/aotest/cache/plugins/module_utils/value2.py", '"redirected"'),
    ),
    (
        "another compression",
        lambda p: None,
        {"compression": "ZIP_STORED"},
        "miss",
        (VALUE_MEMBER, '"one"'),
    ),
    ("a corrupt entry", corrupt_payload, {}, "miss", (VALUE_MEMBER, '"one"')),
    (
        "an entry that is not one",
        lambda p: p.entries()[0].write_bytes(b"garbage"),
        {},
        "miss",
        (VALUE_MEMBER, '"one"'),
    ),
]


@pytest.mark.parametrize(
    ("change", "second", "outcome", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_a_shared_payload_is_used_only_while_nothing_it_depends_on_changed(
    project: Project,
    change: Change,
    second: dict[str, Any],
    outcome: str,
    expected: tuple[str, str] | None,
) -> None:
    first = project.run()
    assert first.outcome == "miss"
    assert f"shared: {FQN}" in first.notes
    assert len(project.entries()) == 1
    change(project)
    again = project.run(**second)
    assert again.outcome == outcome, again.notes
    if expected is not None:
        member, text = expected
        assert text in again.members[member]


@contextlib.contextmanager
def build_lock_held(project: Project, key: str) -> Iterator[None]:
    """Hold entry `key`'s build lock as a run building that payload would."""
    fd = os.open(project.cache / f".lock-{key}", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_notes_until(proc: subprocess.Popen[str], note: str) -> list[str]:
    """The run's stderr lines up to and including `note` (the run is then past it)."""
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if line.strip() == f"ao-warm payloadcache: {note}":
            return seen
    raise AssertionError(f"the run ended without noting {note!r}: {''.join(seen)}")


def test_a_run_missing_while_another_builds_waits_and_takes_its_entry(project: Project) -> None:
    project.run()
    (entry,) = project.entries()
    published = entry.read_bytes()
    entry.unlink()
    with build_lock_held(project, entry.name):  # another run is building this payload
        waiting = project.start()
        seen = read_notes_until(waiting, f"waiting: {FQN}")  # it found the lock taken
        entry.write_bytes(published)  # ... and publishes it, then lets go
    run = project.finish(waiting, seen=seen)
    assert run.notes == [f"miss: {FQN}", f"waiting: {FQN}", f"waited: {FQN}", f"hit: {FQN}"]
    assert '"one"' in run.members[VALUE_MEMBER]


def test_a_run_waits_for_another_build_only_so_long(project: Project) -> None:
    project.run()
    (entry,) = project.entries()
    entry.unlink()
    with build_lock_held(project, entry.name):  # a build that never ends
        run = project.run(build_wait_seconds=0.2)
    assert run.notes == [
        f"miss: {FQN}",
        f"waiting: {FQN}",
        f"waited: {FQN} (gave up after 0.2 s)",
        f"miss: {FQN}",  # looked once more, then built it itself
        f"shared: {FQN}",
    ]
    assert [p.name for p in project.entries()] == [entry.name]


def test_a_corrupt_entry_is_replaced_and_then_used(project: Project) -> None:
    project.run()
    corrupt_payload(project)
    assert f"miss: {FQN} (corrupt entry)" in project.run().notes
    assert project.run().outcome == "hit"


def test_a_payload_with_a_generated_redirect_shim_is_not_shared(project: Project) -> None:
    # Ansible writes a redirected module_utils name as generated code, which no file
    # holds: there is nothing to check it against later, so no entry.
    write(
        project.collection / "meta" / "runtime.yml",
        "plugin_routing:\n  module_utils:\n    value:\n      redirect: aotest.cache.value2\n",
    )
    run = project.run()
    shim = ".../module_utils/value/__init__.py"
    assert f"not shared: {FQN} ({shim} is not a file the build read)" in run.notes
    assert project.entries() == []


def test_library_modules_are_never_shared(project: Project) -> None:
    # A role's or playbook's library/ module has no collection or core name: ansible
    # caches it as ansible.legacy.<name>, which two roles can both mean.
    library = project.top / "library" / "local_probe.py"
    write(library, PROBE)
    for _ in range(2):
        run = project.run(module_name="local_probe", module_path=str(library))
        assert run.outcome == "bypass"
        assert '"one"' in run.members[VALUE_MEMBER]
    assert project.entries() == []


def test_a_payload_built_right_after_a_change_is_not_shared(project: Project) -> None:
    # The fixture's files are younger than the racy window: a further change within the
    # same timestamp tick would go unnoticed, so this build is not shared (yet). The
    # window is widened from RACY_SECONDS (1 s) so that a loaded machine, where the
    # driver starts more than a second after the fixture was written, tests the same.
    assert payloadcache.RACY_SECONDS > 0
    run = project.run(racy_seconds=60.0)
    assert any(note.endswith("changed moments ago)") for note in run.notes), run.notes
    assert project.entries() == []


def test_the_playbook_helper_still_never_imports_ansible_constants() -> None:
    # pbserver imports this module at start-up and each run child installs it.
    code = (
        "import os, sys\n"
        "from ansible_operator.warm import payloadcache, pbserver\n"
        "cache_dir = os.path.join(sys.argv[1], 'c')\n"
        "os.mkdir(cache_dir, 0o700)\n"
        "assert payloadcache.install({'AO_WARM_ANSIBALLZ_CACHE': cache_dir}) is not None\n"
        "print(sorted(n for n in sys.modules if n.startswith('ansible.')))\n"
    )
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run(
            [sys.executable, "-c", code, scratch],
            capture_output=True,
            text=True,
            check=True,
            cwd="/",
            env={**os.environ, "PYTHONPATH": str(REPO / "operator")},
        )
    loaded = proc.stdout
    assert "'ansible.constants'" not in loaded
    assert f"'{payloadcache.TARGET}'" not in loaded


def test_the_supervisor_hands_warm_runs_a_private_cache_directory(tmp_path: Path) -> None:
    servers = WarmServers(directory=tmp_path / ".warm", ansiballz_cache_entries=7)
    servers._prepare_directory()
    env = servers.run_env()
    assert env[ANSIBALLZ_CACHE_ENV] == str(tmp_path / ".warm" / "ansiballz")
    assert env[ANSIBALLZ_CACHE_ENTRIES_ENV] == "7"
    assert stat.S_IMODE(servers.ansiballz_dir.stat().st_mode) == 0o700
    off = WarmServers(directory=tmp_path / ".off", ansiballz_cache_entries=0).run_env()
    assert ANSIBALLZ_CACHE_ENV not in off
    assert WarmServers(directory=tmp_path / ".d").run_env()[ANSIBALLZ_CACHE_ENTRIES_ENV] == str(
        defaults.WARM_ANSIBALLZ_CACHE_ENTRIES
    )


def test_eviction_keeps_the_most_recently_used_entries(tmp_path: Path) -> None:
    now = time.time()
    for age, name in enumerate(["e4", "e3", "e2", "e1"]):
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (now - age * 10, now - age * 10))
    (tmp_path / ".e0.123").write_bytes(b"")  # a writer that died long ago
    os.utime(tmp_path / ".e0.123", (now - 3600, now - 3600))
    (tmp_path / ".e5.456").write_bytes(b"")  # a writer at work
    payloadentries.evict(str(tmp_path), max_entries=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".e5.456", "e3", "e4"]


@pytest.mark.parametrize(
    ("mode", "entries"),
    [
        pytest.param(0o755, "5", id="a directory others can read"),
        pytest.param(0o700, "0", id="no entries allowed"),
        pytest.param(0o700, "many", id="a limit that is no number"),
    ],
)
def test_install_leaves_ansible_alone_when_the_directory_or_limit_is_wrong(
    tmp_path: Path, mode: int, entries: str
) -> None:
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    cache_dir.chmod(mode)
    before = list(sys.meta_path)
    env = {ANSIBALLZ_CACHE_ENV: str(cache_dir), ANSIBALLZ_CACHE_ENTRIES_ENV: entries}
    assert payloadcache.install(env) is None
    assert payloadcache.install({}) is None
    assert sys.meta_path == before


def test_signature_sees_absence_and_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert payloadentries.signature(str(path)) is None
    path.write_text("a")
    first = payloadentries.signature(str(path))
    edit_keeping_size_and_mtime(path, "a", "b")
    assert payloadentries.signature(str(path)) not in (None, first)
