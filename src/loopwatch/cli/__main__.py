"""``python -m loopwatch.cli``: the same as the ``loopwatch`` console script."""

from loopwatch.cli import main

raise SystemExit(main())
