"""`python -m testbed`: the same as the `testbed` console script."""

from testbed.cli import main

raise SystemExit(main())
