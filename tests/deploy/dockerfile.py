"""Read the Dockerfile and .dockerignore the way Docker does, for the deploy tests.

`parse` turns the Dockerfile into instructions (continuation lines joined,
comments and parser directives dropped, `--flag=value` options split off);
`context_files` lists what a `docker build .` would send as its context: the
files of a clean checkout (tracked, or untracked but not git-ignored) that
.dockerignore lets through. Both the lint test and the install test use them,
so neither keeps a second copy of the Dockerfile's steps.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY...
    text: str  # the arguments, continuation lines joined
    line: int  # 1-based line of the keyword
    flags: dict[str, str] = field(default_factory=dict)  # e.g. {"from": "builder"}

    def exec_form(self) -> list[str] | None:
        """The JSON-array form of RUN/CMD/ENTRYPOINT, or None for the shell form."""
        if not self.text.startswith("["):
            return None
        try:
            value = json.loads(self.text)
        except ValueError:
            return None
        return [str(v) for v in value] if isinstance(value, list) else None


_FLAG = re.compile(r"--([a-z-]+)=(\S+)\s+")


def parse(text: str) -> list[Instruction]:
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue  # blank line, comment or parser directive
        if pending and stripped.startswith("#"):
            continue  # comment inside a continued instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        whole = " ".join(part for part in pending if part)
        pending = []
        keyword, _, rest = whole.partition(" ")
        flags = {}
        rest = rest.strip()
        while (match := _FLAG.match(rest + " ")) is not None and rest.startswith("--"):
            flags[match.group(1)] = match.group(2)
            rest = rest[match.end() :].strip()
        instructions.append(Instruction(keyword.upper(), rest, start, flags))
    if pending:
        raise ValueError("the Dockerfile ends inside a continued line")
    return instructions


# --- .dockerignore -------------------------------------------------------------------


def _pattern(pattern: str) -> re.Pattern[str]:
    """Docker's pattern syntax: Go's filepath.Match per path segment, plus `**`."""
    segments = [s for s in pattern.strip().strip("/").split("/") if s not in ("", ".")]
    regex = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
            continue
        for char in segment:
            if char == "*":
                regex += "[^/]*"
            elif char == "?":
                regex += "[^/]"
            else:
                regex += re.escape(char)
        if not last:
            regex += "/"
    return re.compile(regex + r"\Z")


@dataclass(frozen=True)
class DockerIgnore:
    rules: tuple[tuple[bool, re.Pattern[str]], ...]  # (exclude?, pattern)

    @classmethod
    def read(cls, path: Path) -> DockerIgnore:
        rules = []
        if path.exists():
            for raw in path.read_text().splitlines():
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                exclude = not line.startswith("!")
                rules.append((exclude, _pattern(line.lstrip("!"))))
        return cls(tuple(rules))

    def excluded(self, relative: str) -> bool:
        """Whether a context path ('a/b/c', '/'-separated) is left out of the build."""
        parts = relative.split("/")
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        verdict = False
        for exclude, pattern in self.rules:
            if any(pattern.match(candidate) for candidate in candidates):
                verdict = exclude
        return verdict


def checkout_files(repo: Path) -> Iterator[str]:
    """Files of a clean checkout of the working tree: tracked or untracked-not-ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in sorted(set(filter(None, listed.split("\0")))):
        if (repo / name).is_file():  # a tracked file may be deleted in the work tree
            yield name


def context_files(repo: Path) -> list[str]:
    """What `docker build` in `repo` sends as its context."""
    ignore = DockerIgnore.read(repo / ".dockerignore")
    return [name for name in checkout_files(repo) if not ignore.excluded(name)]
