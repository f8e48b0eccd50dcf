"""Test-suite settings: fixtures are data (a planted case module), never collected as tests."""

collect_ignore_glob = ["fixtures/*"]
