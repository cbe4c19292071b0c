"""`python -m saber_assets.cli`: the `saber` command."""

from saber_assets.cli import main

raise SystemExit(main())
