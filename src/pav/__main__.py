import sys

from pav.cli import main

sys.exit(main())
