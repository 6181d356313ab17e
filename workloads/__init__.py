"""Workload models and trace formats: the thesis workload, the QoS-driven paper's validation
tests, real traces (Google 2011, Alibaba), and the JSON Lines trace the simulator and the live
replay read."""
