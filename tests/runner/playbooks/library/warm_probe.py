"""Reports what the module's own process sees, for tests/runner/test_warm_runs.py."""

from __future__ import annotations

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from kubernetes import client, config
from kubernetes.config import kube_config

from ansible_operator.warm.immortal import is_sealed


def _bearer() -> str:
    """The token the kubernetes client loads from its default kubeconfig location."""
    config.load_kube_config()
    api_key = client.Configuration.get_default_copy().api_key
    return str(api_key.get("authorization") or api_key.get("BearerToken") or "")


def main() -> None:
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    with open("/proc/self/comm", encoding="utf-8") as handle:
        comm = handle.read().strip()
    module.exit_json(
        changed=False,
        probe={
            "comm": comm,
            "marker": os.environ.get("AO_RUN_MARKER", ""),
            "env_tmpdir": os.environ.get("TMPDIR", ""),
            "real_tmpdir": os.path.realpath(os.environ.get("TMPDIR", "")),
            "tempdir": tempfile.gettempdir(),
            "kube_default": kube_config.KUBE_CONFIG_DEFAULT_LOCATION,
            "bearer": _bearer() if os.environ.get("KUBECONFIG") else "",
            "probe_var": os.environ.get("ANSIBLE_WARM_PROBE", ""),
            "client_sealed": is_sealed(client.ApiClient.call_api),  # by the module server
        },
    )


if __name__ == "__main__":
    main()
