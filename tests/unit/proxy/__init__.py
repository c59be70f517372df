"""Unit tests of the API proxy and dependent watches (no cluster)."""
