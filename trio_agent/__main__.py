"""``python -m trio_agent``: the ``trio-agent`` program."""

from __future__ import annotations

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
