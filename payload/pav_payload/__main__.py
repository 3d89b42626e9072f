import sys

from pav_payload.cli import main

if __name__ == "__main__":
    sys.exit(main())
