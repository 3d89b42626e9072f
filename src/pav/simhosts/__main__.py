"""python -m pav.simhosts: the sim-hosts command (see the package's docstring)."""

import sys

from pav.simhosts.cli import main

sys.exit(main())
