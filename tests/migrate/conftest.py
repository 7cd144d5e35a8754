"""The folder fixture of the tests that write a small package `pkg` and migrate it
(tests/migrate_runs.py has the helpers that write, migrate and import it)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from migrate_runs import forget_pkg


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A temporary folder for `pkg`; `pkg` is forgotten afterwards (before and after
    versions share the name, so a later test must import its own)."""
    yield tmp_path
    forget_pkg()
