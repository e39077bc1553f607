"""`python -m openinfer`: the `openinfer` command."""

from openinfer.app.cli import main

raise SystemExit(main())
