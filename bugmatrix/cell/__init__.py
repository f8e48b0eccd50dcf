"""What runs inside a cell: the case API, outcomes, the run file and the pytest plugin.

Imported by a cell's interpreter (any Python the matrix lists, 3.10 and up) with only the standard library,
``packaging`` and ``pytest``; host-side code imports from here, never the other way round.
"""
