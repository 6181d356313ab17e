"""The discrete-event simulator of DESIGN 7.2 (see benchmarks/simulator.py for the overview)."""
