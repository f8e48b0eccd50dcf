"""From run files to what maintainers read: compat.json, compat.md, index.html, the terminal, the step summary, the README.

One way and typed: :mod:`~bugmatrix.report.merge` builds a :class:`~bugmatrix.report.model.Compat`,
:func:`~bugmatrix.report.night.analyse` runs every analysis once into a :class:`~bugmatrix.report.night.NightReport`,
the views (templates) only read that value. Nothing here names an axis: they come from the document.
"""
