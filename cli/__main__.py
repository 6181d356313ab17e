"""``python -m cli ...``: the ``greenswarm`` command without its entry point script."""

import sys

from cli.main import main

sys.exit(main())
