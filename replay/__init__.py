"""The live replay (DESIGN 7.2): a trace replayed through the REST API against a live manager.

Pure parts: :mod:`.plan` (what is submitted and stopped when, and how), :mod:`.history`
(request history events as values), :mod:`.feed` (records, answers and host polls turned into
MetricsRecorder calls), :mod:`.values` (what they exchange: service targets, client rounds, the
replay's counters). I/O: :mod:`.clients` (the services'
client rounds), :mod:`.driver` (the REST loop), :mod:`.cli` (``greenswarm bench
replay``). ``scripts/bench-live-replay.sh`` runs it per policy on the local lab, next to the
simulator, into one report.
"""
