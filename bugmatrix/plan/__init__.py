"""Stage 1, plan: ``matrix.toml`` and the cases -> the cells (and the plan document the report checks against)."""
