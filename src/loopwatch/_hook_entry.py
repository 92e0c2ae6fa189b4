"""The hook command ``loopwatch install`` writes: ``python -S <this file> hook AGENT ...``.

A script run by path is compiled anew in every process, so this one only loads
:mod:`loopwatch._hook_client` (bytecode cached) from its own folder, which Python put
first on ``sys.path``, and runs it; that module says why the command looks like this.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))  # also under -P / -I
    import _hook_client  # type: ignore[import-not-found]  # this folder, by path

    _hook_client.run(sys.argv[1:])
