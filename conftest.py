"""Loads the bugmatrix pytest plugin for every run from the repository root.

``python -m pytest cases/`` in any environment that has torch (a GPU runner's
baked image, say) runs the cases as the ``system`` cell and records
``reports/runs/system.json``.
"""

pytest_plugins = ["bugmatrix.cell.plugin"]
