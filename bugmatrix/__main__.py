"""``python -m bugmatrix``: see bugmatrix/cli.py."""

from __future__ import annotations

import sys

from bugmatrix.cli import main

sys.exit(main())
