"""``python -m openinfer.bench``: the same as ``openinfer bench``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
