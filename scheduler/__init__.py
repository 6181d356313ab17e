"""The scheduling core: pure code that reads a ClusterReader and returns Decision objects."""

from native.loader import attach

attach(__name__, __path__)  # the compiled core first, when built for these sources
