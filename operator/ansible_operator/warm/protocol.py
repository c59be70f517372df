"""The wire format between the thin clients and the fork servers, and shared names.

Where this sits: imported by client.py (which runs under `python -IS`, so this module
must stay standard-library only and cheap to import), by forkserver.py on the server
side, and by runner/sweep.py for the process-name tag of forked run processes.
The clients start once per run and once per module task, so every import here costs
every task: no dataclasses, typing, contextlib, json, socket or array at run time (the C
modules `_json` and `_socket` instead): about 8 ms of imports instead of 31.

A request is one `sendmsg` carrying fds 0, 1 and 2 (SCM_RIGHTS) and a 4-byte length,
followed by that many bytes of JSON: `{"argv0", "argv", "env", "cwd", "stdin_script"}`.
Then the client may send `S<signal>\\n` lines (signals to forward) and the keeper
answers once with `R<exit code>\\n` (negative: killed by that signal).
"""

from __future__ import annotations

import _json  # the C encoder json.dumps uses; `import json` also loads the decoder and re
import _socket  # socket.py loads enum and selectors: the clients need the C type only
import os
import struct

__all__ = [
    "ANSIBALLZ_CACHE_ENTRIES_ENV",
    "ANSIBALLZ_CACHE_ENV",
    "HELPER_DIED_EXIT",
    "HELPER_DIED_MESSAGE",
    "KEEPER_COMM",
    "MARKER_ENV",
    "MODULE_SOCKET_ENV",
    "PLAYBOOK_SOCKET_ENV",
    "PRIMED_COMM",
    "ProtocolError",
    "Request",
    "recv_request",
    "run_comm",
    "send_request",
]

MARKER_ENV = "AO_RUN_MARKER"
"""Per-run random value in the run's environment (see runner/ansible.py)."""
HELPER_DIED_EXIT = 252
"""A client's exit code when its keeper vanished mid-run (OOM kill, a crash). Not one
ansible-playbook uses (0-8, 99, 250) nor ansible-runner's 254 for a killed run."""
HELPER_DIED_MESSAGE = "ERROR: the warm Ansible helper died during the run"
PLAYBOOK_SOCKET_ENV = "AO_WARM_PLAYBOOK_SOCKET"
MODULE_SOCKET_ENV = "AO_WARM_MODULE_SOCKET"
ANSIBALLZ_CACHE_ENV = "AO_WARM_ANSIBALLZ_CACHE"
"""The directory of AnsiballZ payloads shared by warm runs (payloadcache.py)."""
ANSIBALLZ_CACHE_ENTRIES_ENV = "AO_WARM_ANSIBALLZ_CACHE_ENTRIES"
"""How many payloads that directory keeps."""
PRIMED_COMM = "ao-primed"
"""The process name of the playbook helper's primed children (primed.py): long-lived
helpers, like the servers, never a run's process."""
KEEPER_COMM = "ao-keeper"
"""The process name of a keeper (forkserver.py) until its run child names itself."""
_HEADER = struct.Struct("!I")
_MAX_REQUEST = 64 << 20  # an environment bigger than this is not a run's
_COMM_PREFIX = "ao-"
_COMM_LEN = 15  # the kernel keeps 15 bytes of a process name


class ProtocolError(Exception):
    """A peer sent something that is not a well-formed request."""


class Request:
    """One run as a client asked for it.

    `stdin_script` (module server only): the AnsiballZ payload comes on stdin
    (pipelining). A plain class, not a dataclass: see the module docstring.
    """

    __slots__ = ("argv", "argv0", "cwd", "env", "stdin_script")

    def __init__(
        self,
        *,
        argv0: str,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        stdin_script: bool = False,
    ) -> None:
        self.argv0 = argv0
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.stdin_script = stdin_script

    def _fields(self) -> tuple[str, list[str], dict[str, str], str, bool]:
        return (self.argv0, self.argv, self.env, self.cwd, self.stdin_script)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable fields, like an unfrozen dataclass

    def __repr__(self) -> str:
        # Never the environment's values: they may hold credentials.
        return (
            f"Request(argv0={self.argv0!r}, argv={self.argv!r}, cwd={self.cwd!r}, "
            f"env=<{len(self.env)} variables>, stdin_script={self.stdin_script})"
        )

    def to_json(self) -> bytes:
        """The same bytes as `json.dumps(document, ensure_ascii=True)`, with the C string
        encoder json itself uses (ASCII escapes keep surrogate-escaped, undecodable
        values round-trippable)."""
        text = _json.encode_basestring_ascii
        argv = ", ".join(text(arg) for arg in self.argv)
        env = ", ".join(f"{text(key)}: {text(value)}" for key, value in self.env.items())
        return (
            f'{{"argv0": {text(self.argv0)}, "argv": [{argv}], "env": {{{env}}}, '
            f'"cwd": {text(self.cwd)}, "stdin_script": {"true" if self.stdin_script else "false"}}}'
        ).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> Request:
        import json  # noqa: PLC0415 - servers only; the clients never decode

        try:
            doc = json.loads(data)
            request = cls(
                argv0=str(doc["argv0"]),
                argv=[str(a) for a in doc["argv"]],
                env={str(k): str(v) for k, v in doc["env"].items()},
                cwd=str(doc["cwd"]),
                stdin_script=bool(doc.get("stdin_script", False)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ProtocolError(f"malformed request: {error}") from error
        return request


def run_comm(marker: str) -> str:
    """The process name (`/proc/<pid>/comm`) of every forked process of a run.

    A forked process's /proc environ is its server's exec-time environment, so the
    marker variable is invisible there; the name is inherited by fork instead.
    """
    return (_COMM_PREFIX + marker)[:_COMM_LEN]


def send_request(sock: _socket.socket, request: Request, fds: tuple[int, ...] = (0, 1, 2)) -> None:
    payload = request.to_json()
    rights = struct.pack(f"{len(fds)}i", *fds)
    sock.sendmsg([_HEADER.pack(len(payload))], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
    sock.sendall(payload)


def _recv_exact(sock: _socket.socket, length: int) -> bytes:
    chunks: list[bytes] = []
    remaining = length
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ProtocolError("peer closed the connection mid-request")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_request(sock: _socket.socket, *, nfds: int = 3) -> tuple[list[int], Request]:
    """Receive one request: the passed fds (the caller owns them) and the request.
    A client passes its 3 stdio fds; the playbook helper forwarding a request to a
    primed child (primed.py) passes the client's connection first, so 4."""
    size = struct.calcsize("i")
    msg, ancdata, _flags, _addr = sock.recvmsg(_HEADER.size, _socket.CMSG_SPACE(nfds * size))
    received: list[int] = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            whole = data[: len(data) - (len(data) % size)]
            received += struct.unpack(f"{len(whole) // size}i", whole)
    try:
        if len(msg) != _HEADER.size:
            raise ProtocolError("short request header")
        (length,) = _HEADER.unpack(msg)
        if length > _MAX_REQUEST:
            raise ProtocolError(f"request of {length} bytes is too large")
        if len(received) != nfds:
            raise ProtocolError(f"expected {nfds} file descriptors, got {len(received)}")
        return received, Request.from_json(_recv_exact(sock, length))
    except BaseException:
        for fd in received:
            _close_quietly(fd)
        raise


def _close_quietly(fd: int) -> None:
    try:  # noqa: SIM105 - no contextlib import in the clients' path
        os.close(fd)
    except OSError:
        pass
