"""The test suite runs the pure-Python core (``GREENSWARM_NATIVE=0``), whatever is built.

Importing the packages never enables the compiled core (only an entry point's
``native.loader.enable()`` does); the setting is for the tests that run the ``greenswarm``
command in-process (``cli.main.main`` enables it), set here before any of them runs. Some tests
monkeypatch module constants (``host_registry.memory``'s ``BLOCK_SIZE``),
subclass the core's classes or swap functions, which a mypyc-compiled module does not see (its
constants and calls are bound at compile time). The compiled core is tested against the pure
one in ``tests/integration/test_native_core.py``, each in a subprocess with its own setting.
Processes the tests start inherit the setting.
"""

import os

os.environ["GREENSWARM_NATIVE"] = "0"
