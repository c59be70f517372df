"""A real Kubernetes control plane as local processes, for tests and `make run`.

The testbed starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and kwok (which plays the kubelets of a few fake nodes) on 127.0.0.1, using
binaries that `build.sh` compiles from Go modules at the versions pinned in
`versions.env`. No containers are involved.

Flow: `cli` (the `testbed` command, `make testbed-*`) and `pytest_plugin` (the
`cluster` fixtures) drive `control_plane.ControlPlane`, which uses `pki` for
certificates, `components` for the command lines, `processes` to start and
stop them, and `probes` to wait until each is usable. `layout` says where
everything lives on disk.
"""

from testbed.control_plane import ControlPlane, UpReport
from testbed.layout import Layout

__all__ = ["ControlPlane", "Layout", "UpReport"]
