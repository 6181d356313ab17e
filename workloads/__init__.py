"""Workload models and trace formats: the thesis workload, the QoS-driven paper's validation
tests, real traces (Google 2011, Alibaba), and the JSON Lines trace the simulator and the live
replay read."""

from native.loader import attach

attach(__name__, __path__)  # the compiled core first, when built for these sources
