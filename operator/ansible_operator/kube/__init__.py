"""kube: the operator's access to the Kubernetes API (the client layer; see ansible_operator).

The only layer that may import the `kubernetes` package (an import-linter
contract), and it does so only for kubeconfigs with an exec plugin or an auth
provider (librarylogin): requests are plain urllib3. Everything above talks
to the API server through the `KubeApi` seam, so the controller's API-facing
parts (reconciler, leader election, sharding, dependent watches, the run
directory sweep) run on `FakeKube` in tests.

    kubeapi      KubeApi, the seam, and its values: ResourceInfo, ListPage,
                 WatchEvent, WatchStream, is_gone; the errors it raises
    client       Kube, the real KubeApi; load_login (kubeconfig, in-cluster);
                 KindResource (a kind's discovery, looked up on first use)
    watchstream  one watch request's events off the HTTP stream (Kube.watch)
    login        Login: server, TLS files, Authorization header; no key on disk; kopf's login
    kubeconfig   a kubeconfig's current context, or the service account, read into a Login
    librarylogin exec plugins and auth providers, read by the kubernetes package
    deepjson     JSON of any nesting depth (the API server accepts 10,000 levels)
    patching     JSON patch and merge patch, as the API server applies them
    eventposter  the Event recorder's two calls (observability.eventrecorder)
    upstream     the API proxy's requests to the API server, as the operator; make_pool
    fakekube     FakeKube, an in-memory KubeApi for tests (re-exports FakeEvents)
    fakestore    FakeKube's objects, versions and write rules
    fakewatch    FakeKube's label selectors, event log and watch streams
    fakeevents   FakeEvents, an EventSink that records, for tests
"""
