"""``python -m kvpure``: the kvpure command."""

from kvpure.cli import main

raise SystemExit(main())
