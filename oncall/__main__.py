"""`python -m oncall` runs the same entry point as the `oncall` console script."""

from oncall.cli.main import main

raise SystemExit(main())
