"""What runs inside a cell: the case API, outcomes, the run file and the pytest plugin.

Everything here is imported by a cell's interpreter, which may be any Python
the matrix lists (3.10 and up), with only the cell's own packages installed:
the standard library, ``packaging`` and ``pytest``. Host-side code (planning,
env building, reports) imports from here, never the other way round.
"""
