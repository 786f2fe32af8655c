"""`python -m fvconsole` runs the same entry point as the `fvconsole` script."""

import sys

from fvconsole.cli import main

sys.exit(main())
