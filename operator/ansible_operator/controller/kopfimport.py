"""kopf, imported without the `kubernetes` package it would load on the way.

Where this sits: controller/watching.py, controller/deepobjects.py and
controller/kopfrun.py take `kopf` (and deepobjects kopf's private API module)
from here; an import-linter contract keeps every other module from importing
kopf, since an import of kopf anywhere else, first, would load the package.

Why: when it is imported, kopf looks for the `kubernetes` package
(kopf/_cogs/helpers/thirdparty.py), to recognise that package's model objects
among what handlers return. `import kubernetes.client` runs the package's
`__init__`, which loads all of it: some 280 modules (pydantic, requests,
oauthlib, websocket) and 20 MiB, a quarter of the resting operator, which
talks to the API server without it (kube/client.py) and gives kopf only
dicts. So kopf is imported while `kubernetes` reads as absent, exactly as on
a machine without it (kopf's own fallback); nothing else is changed. If the
package was imported before (tests, a kubeconfig with an exec plugin read
first), nothing is hidden and nothing is saved. tests/unit/test_startup_imports.py
fails if kopf loads the package again.
"""

from __future__ import annotations

import sys

__all__ = ["kopf", "kopf_api"]

_hidden = "kubernetes" not in sys.modules
if _hidden:
    sys.modules["kubernetes"] = None  # type: ignore[assignment]  # import raises ImportError
try:
    import kopf
    from kopf._cogs.clients import api as kopf_api
finally:
    if _hidden and sys.modules.get("kubernetes", sys) is None:  # still our marker
        del sys.modules["kubernetes"]
