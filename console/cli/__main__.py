"""`python -m console.cli`: the same as `tidepool`."""

from __future__ import annotations

import sys

from console.cli import main

sys.exit(main())
