"""``python -m loopwatch``: the same as the ``loopwatch`` console script (and as
``python -m loopwatch.cli``), for an environment whose scripts folder is not on ``PATH``."""

from loopwatch.cli import main

raise SystemExit(main())
