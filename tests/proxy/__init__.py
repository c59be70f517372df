"""The API proxy and dependent watches against a real API server."""
