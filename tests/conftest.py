"""Shared test set-up: the cluster fixtures come from the testbed package."""

pytest_plugins = ["testbed.pytest_plugin"]
