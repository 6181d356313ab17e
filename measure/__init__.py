
from native.loader import attach

attach(__name__, __path__)  # the compiled core first, when built for these sources
