"""Stage 2, build and run: a planned cell -> its environment (uv, locks) -> its pytest run -> its run file."""
