"""The compiled core: the hot modules of the scheduler and the simulator, compiled with mypyc.

===================  ==========================================================================
module               what
===================  ==========================================================================
native/loader.py     which modules are compiled (MODULES), the cache's layout, and the loader
                     the entry points enable (``enable()``; standard library only)
native/build.py      ``python -m native.build`` (``scripts/build-native.sh``): compiles MODULES
                     into ``/var/cache/greenswarm/native/<key>/``, reusing a build of the same
                     sources
===================  ==========================================================================

``GREENSWARM_NATIVE``: ``auto`` (default; compiled when built for exactly these sources, else
pure Python), ``0`` (pure Python), ``1`` (compiled, or an error).
"""
