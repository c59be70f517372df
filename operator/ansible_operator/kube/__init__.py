"""kube: the operator's own access to the Kubernetes API (see the ansible_operator
package docstring for where this layer sits). The only package that imports the
`kubernetes` client library.

    client     Kube (JSON requests, discovery, errors with meaning) and the KubeApi
               seam the reconcile path depends on
    fake       FakeKube: an in-memory API server at that seam, for tests
    login      the operator's credentials, with no key material on disk
    deepjson   JSON of any nesting depth the API server accepts
    patching   JSON merge patch and JSON patch on plain dicts, as the API server does
"""
