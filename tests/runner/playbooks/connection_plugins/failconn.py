"""A connection plugin that can never connect: makes a host unreachable on demand."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: failconn
short_description: Always fails to connect (test fixture)
description:
  - Every operation raises AnsibleConnectionFailure, so the host is reported unreachable.
author: ansible-operator tests
"""


class Connection(ConnectionBase):
    transport = "failconn"
    has_pipelining = False

    def _connect(self) -> Any:
        raise AnsibleConnectionFailure("failconn refuses every connection")

    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = True) -> Any:
        return self._connect()

    def put_file(self, in_path: str, out_path: str) -> None:
        self._connect()

    def fetch_file(self, in_path: str, out_path: str) -> None:
        self._connect()

    def close(self) -> None:
        pass
