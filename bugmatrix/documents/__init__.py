"""The documents between stages, declared once: plan, run file, compat, baseline, history.

Why a package of its own: every stage reads what the stage before it wrote. When each stage declares its own reading
of a shared file, the two drift. Here each document is one model, low and neutral: it imports nothing from a stage.
"""
