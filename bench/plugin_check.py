"""Check that ansible-runner's `http` event plugin can reach the Go operator's event socket.

Run by `bench.reference` with the reference venv's Python (not ours): it loads
the plugin exactly as ansible-runner does (entry point group
`ansible_runner.plugins`, name `http`), serves HTTP on a unix socket at a path
shaped like the Go operator's (`/tmp/ansibleoperator-<ident>`), passes the same
`runner_http_url` / `runner_http_path` settings the Go operator writes to
`env/settings`, and checks that a job event arrives as a JSON POST on
`/events/`. Prints `ok` and exits 0, or prints why not and exits 1.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import json
import os
import socketserver
import sys
import threading
from importlib.metadata import entry_points
from typing import Any

RECEIVED: list[tuple[str, str, Any]] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        RECEIVED.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self) -> tuple[Any, Any]:
        conn, _ = super().get_request()
        return conn, ("unix", 0)  # BaseHTTPRequestHandler wants a (host, port) pair


class _RunnerConfig:
    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings


def main() -> int:
    found = [ep for ep in entry_points(group="ansible_runner.plugins") if ep.name == "http"]
    if not found:
        print("no ansible_runner.plugins entry point named 'http' is installed")
        return 1
    plugin = found[0].load()
    path = f"/tmp/ansibleoperator-benchcheck{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = _UnixServer(path, _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    event = {
        "uuid": "00000000-0000-0000-0000-000000000001",
        "counter": 1,
        "event": "runner_on_ok",
        "stdout": "",
        "event_data": {"task": "check"},
        "created": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    try:
        plugin.event_handler(
            _RunnerConfig({"runner_http_url": path, "runner_http_path": "/events/"}), event
        )
    except Exception as err:  # report any failure of the plugin itself
        print(f"the http plugin failed to POST to a unix socket: {type(err).__name__}: {err}")
        return 1
    finally:
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if not RECEIVED:
        print("the http plugin sent nothing")
        return 1
    url_path, ctype, body = RECEIVED[0]
    if url_path != "/events/" or not ctype.startswith("application/json") or body != event:
        print(f"unexpected request: path={url_path!r} content-type={ctype!r} body={body!r}")
        return 1
    print(f"ok ({found[0].value})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
