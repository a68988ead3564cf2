"""comparison: finished runs against each other (`bench compare`, `bench leaderboard`, `bench gate`).

The commands' defaults are declared here, in a module that imports nothing, so that `bench
--help` shows them without importing pandas (bench/cli.py); compare.py and gate.py read them."""

#: default share of all queries (union of A and B) that may be in only one run
MAX_UNPAIRED = 0.01
#: default --max-latency-ratio: the current p50 / p95 may be up to twice BASE's
MAX_LATENCY_RATIO = 2.0
#: default --latency-floor-ms: a latency difference of at most this much never fails (machine noise)
LATENCY_FLOOR_MS = 5.0
