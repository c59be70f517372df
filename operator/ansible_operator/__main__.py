"""`python -m ansible_operator`: the same as the `ansible-operator` command."""

from ansible_operator.cli import main

raise SystemExit(main())
