"""Run ``loopwatch serve ARGS...``, standing ``fake_hooks`` in for a missing ``loopwatch.hooks``.

Started as a script (``python serve_launcher.py ...``), so this folder is on ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import sys

if importlib.util.find_spec("loopwatch.hooks") is None:
    import fake_hooks

    sys.modules["loopwatch.hooks"] = fake_hooks

from loopwatch.cli import main  # after the stand-in is registered

raise SystemExit(main(["serve", *sys.argv[1:]]))
