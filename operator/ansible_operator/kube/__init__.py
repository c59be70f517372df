"""kube: the operator's access to the Kubernetes API (the client layer; see ansible_operator).

The only layer that imports the `kubernetes` package (an import-linter
contract). Everything above talks to the API server through the `KubeApi`
seam, so the controller's API-facing parts (reconciler, leader election,
sharding, dependent watches, the run directory sweep) run on `FakeKube` in
tests.

    kubeapi      KubeApi, the seam, and its values: ResourceInfo, ListPage,
                 WatchEvent, WatchStream, is_gone; the errors it raises
    client       Kube, the real KubeApi; load_api_client (kubeconfig, in-cluster);
                 KindResource (a kind's discovery, looked up on first use)
    watchstream  one watch request's events off the HTTP stream (Kube.watch)
    login        kubeconfig loading without key files left on disk; kopf's login
    deepjson     JSON of any nesting depth (the API server accepts 10,000 levels)
    patching     JSON patch and merge patch, as the API server applies them
    eventposter  the Event recorder's two calls (observability.eventrecorder)
    upstream     the API proxy's requests to the API server, as the operator
    fake         FakeKube, an in-memory KubeApi for tests (re-exports FakeEvents)
    fakestore    FakeKube's objects, versions and write rules
    fakewatch    FakeKube's label selectors, event log and watch streams
    fakeevents   FakeEvents, an EventSink that records, for tests
"""
