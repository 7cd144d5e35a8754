"""`python -m treeclass.migrate PATH...` (see `_cli.py`)."""

from treeclass.migrate._cli import main

raise SystemExit(main())
