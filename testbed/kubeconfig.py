"""Write the kubeconfig through which everything reaches the testbed.

Called by `control_plane.ControlPlane.up`. Certificates are embedded, so the
file works from any directory and can be copied elsewhere; the components use
the same file.
"""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from testbed.pki import PkiFiles


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write(path: Path, *, server: str, pki: PkiFiles) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "testbed",
                "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "testbed-admin",
                "user": {
                    "client-certificate-data": _b64(pki.admin_cert),
                    "client-key-data": _b64(pki.admin_key),
                },
            }
        ],
        "contexts": [
            {"name": "testbed", "context": {"cluster": "testbed", "user": "testbed-admin"}}
        ],
        "current-context": "testbed",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)
