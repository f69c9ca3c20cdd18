"""``python -m tsevo`` is the ``tsevo`` command."""

from tsevo.cli import main

raise SystemExit(main())
