"""A project module_utils file: only the AnsiballZ payload carries it, never site-packages."""

VALUE = "from-the-payload"
