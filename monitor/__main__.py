"""``python -m monitor [options]``: the monitor without the ``greenswarm`` entry point."""

import sys

from monitor.cli import main

sys.exit(main())
