"""Tools over the stages: bisect, repro, stability, the benchmark and the cache-size estimate."""
