"""proxy: the Kubernetes API endpoint that Ansible runs talk to.

Every run's kubernetes.core modules reach the API server only through the
`ApiProxy` (loopback HTTP), authenticated by a per-run bearer token from
`RunCredentials` and written into the run's kubeconfig by `write_kubeconfig`.
The proxy forwards each request with the operator's own credentials, makes
the objects a run writes owned by its custom resource (`ownership`), and
reports each write (`Touch`) so `controller.dependents` can watch the kind.

    credentials  Owner, RunCredentials, RunToken, write_kubeconfig
    ownership    body and URL parsing and the ownership rules, as pure functions
    server       ApiProxy: listener, ownership of writes, follow-up patches
    handler      one client connection: auth, forwarding, streaming, upgrades
    readonly     read-only runs (plans): writes sent as dry runs, live requests refused
    screen       before ownership: a run never re-creates its own deleted CR; with the
                 2.18 compatibility mode, numbers in string fields are sent as text
    discovery    which stored resource a request addresses (ownership and screen ask)
    headers      which headers are copied between a run and the API server

The API server side (pooled TLS connections, the operator's auth) is
kube.upstream: the `kubernetes` package is imported only in the kube layer.

docs/proxy.md describes the behaviour and where it differs from the Go proxy.
"""

from ansible_operator.proxy.credentials import Owner, RunCredentials, RunToken, write_kubeconfig
from ansible_operator.proxy.ownership import Mode, Touch
from ansible_operator.proxy.readonly import DryRunWrite
from ansible_operator.proxy.server import ApiProxy, OnDryRun, OnTouch

__all__ = [
    "ApiProxy",
    "DryRunWrite",
    "Mode",
    "OnDryRun",
    "OnTouch",
    "Owner",
    "RunCredentials",
    "RunToken",
    "Touch",
    "write_kubeconfig",
]
