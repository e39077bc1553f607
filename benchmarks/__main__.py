"""``python -m benchmarks`` (what ``make bench`` runs)."""

import sys

from .suite import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
