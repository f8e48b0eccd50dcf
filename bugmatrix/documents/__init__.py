"""The documents between stages, declared once: plan, run file, compat, baseline, history, lane record, matrix.toml.
Each is one model, low and neutral (it imports no stage), so a stage and the one reading its output cannot drift."""
