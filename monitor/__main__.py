"""``python -m monitor [options]``: the monitor without the ``greenswarm`` entry point.

An entry point: the compiled core is enabled (when built) before monitor.cli imports any of it.
"""

import sys

from native.loader import enable

enable()
from monitor.cli import main  # noqa: E402

sys.exit(main())
