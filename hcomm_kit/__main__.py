"""``python -m hcomm_kit`` is the ``hcomm-kit`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
