"""``python -m console.cli``: the command line (the runner processes a console starts are started so)."""

import sys

from console.cli import main

if __name__ == "__main__":  # imported (a test walking every module): nothing runs
    sys.exit(main())
