"""Stage every file of a scaffolding command in memory, then write them all or none.

`init` (:mod:`.project`) and `create api` (:mod:`.api`) first check every
name, then stage files here (new ones with :meth:`Plan.create`, edited ones
with :meth:`Plan.update`), and only when every check and every edit has
succeeded call :meth:`Plan.commit`. A command that fails therefore leaves
the directory untouched. Commit writes each file to a temporary file next to
it and renames it into place; if a write still fails (disk full, permission),
what was already written is rolled back before the error is raised.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ansible_operator.errors import ConfigError


@dataclass
class _Change:
    path: str
    content: str
    before: str | None  # the file's content on disk, None when it is new


class Plan:
    """The files one command will write, relative to the project directory ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._changes: dict[str, _Change] = {}

    def exists(self, path: str) -> bool:
        return path in self._changes or (self.root / path).exists()

    def read(self, path: str) -> str:
        """The file as it will be: staged content, else what is on disk."""
        if path in self._changes:
            return self._changes[path].content
        try:
            return (self.root / path).read_text(encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from err

    def create(self, path: str, content: str) -> None:
        """Stage a new file; refused if the file exists already (nothing is overwritten)."""
        if self.exists(path):
            raise ConfigError(f"{path}: already exists; refusing to overwrite it")
        self._changes[path] = _Change(path, content, None)

    def update(self, path: str, content: str) -> None:
        """Stage new content for a file that exists (on disk or staged)."""
        if path in self._changes:
            self._changes[path].content = content
            return
        self._changes[path] = _Change(path, content, self.read(path))

    def paths(self) -> list[str]:
        return sorted(self._changes)

    def commit(self) -> list[str]:
        """Write everything; return one line per file ("created PATH" / "updated PATH")."""
        done: list[_Change] = []
        made_dirs: list[Path] = []
        try:
            for change in sorted(self._changes.values(), key=lambda c: c.path):
                if change.before == change.content:
                    continue
                target = self.root / change.path
                made_dirs.extend(_make_parents(target.parent))
                _write_atomically(target, change.content)
                done.append(change)
        except OSError as err:
            self._roll_back(done, made_dirs)
            name = getattr(err, "filename", None) or "?"
            raise ConfigError(f"{name}: cannot write: {err.strerror or err}") from err
        return [f"{'created' if c.before is None else 'updated'} {c.path}" for c in done]

    def _roll_back(self, done: list[_Change], made_dirs: list[Path]) -> None:
        for change in reversed(done):
            target = self.root / change.path
            try:
                if change.before is None:
                    target.unlink()
                else:
                    _write_atomically(target, change.before)
            except OSError:
                continue
        for directory in reversed(made_dirs):
            try:
                directory.rmdir()
            except OSError:
                continue


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return those created, outermost first."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir()
    return list(reversed(missing))


def _write_atomically(target: Path, content: str) -> None:
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
