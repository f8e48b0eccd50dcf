"""From run files to what maintainers read: compat.json, compat.md, index.html, the terminal, the step summary, the README table.

The pipeline is one way and typed end to end:

* :mod:`~bugmatrix.report.expectation` says what the report expects (the plan;
  else the baseline and each run file's own selection) and under which profile;
* :mod:`~bugmatrix.report.merge` turns run files into a
  :class:`~bugmatrix.report.model.Compat` (frozen values; its JSON form is
  declared by :class:`bugmatrix.documents.compat.Compat`), with every expected result that no
  run holds as ``missing``;
* :func:`~bugmatrix.report.night.analyse` runs every analysis once -- the
  baseline diff, the new-release notes, what moved below the pins, upstream
  agreement, boundary pictures, the history -- into one
  :class:`~bugmatrix.report.night.NightReport`;
* the views (:mod:`~bugmatrix.report.render_md`, :mod:`~bugmatrix.report.render_html`,
  :mod:`~bugmatrix.report.terminal`, :mod:`~bugmatrix.report.readme`) only read that value;
* :mod:`~bugmatrix.report.command` writes every output all or nothing, one
  report at a time per directory.

How an outcome is written comes from the enums (:class:`~bugmatrix.cell.outcomes.Outcome`);
which axes a cell has, in which order, under which short name, and which of
them is the interpreter, from the document itself: nothing here names an axis.
"""
