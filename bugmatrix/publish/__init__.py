"""After the report: findings reach maintainers where they already look.

:mod:`~bugmatrix.publish.site` builds the GitHub Pages site (the latest night
at the root, each night under its date); the issue modules turn the night's
findings into one GitHub issue each, keyed by a hidden marker, so a finding is
never filed twice. Everything here reads what the report wrote; nothing here
changes a result.
"""
