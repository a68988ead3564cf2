"""comparison: finished runs against each other (`bench compare`, `bench leaderboard`, `bench gate`).

`bench gate`'s latency defaults are declared here, in a module that imports nothing, so that `bench
--help` shows them without importing pandas (bench/cli.py); gate.py reads them. The statistics
options every command shares are bench/comparison/options.py."""

#: default --max-latency-ratio: the current p50 / p95 may be up to twice BASE's
MAX_LATENCY_RATIO = 2.0
#: default --latency-floor-ms: a latency difference of at most this much never fails (machine noise)
LATENCY_FLOOR_MS = 5.0
