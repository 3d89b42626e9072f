"""python -m pav.provisioning.simhosts: the sim-hosts command (see the package's docstring)."""

import sys

from pav.provisioning.simhosts.cli import main

sys.exit(main())
