"""``python -m console.cli``: the command line (the runner processes a console starts are started so)."""

import sys

from console.cli import main

sys.exit(main())
