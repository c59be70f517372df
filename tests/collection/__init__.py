"""Tests of the project's operator_sdk.util collection (collections/ansible_collections)."""
