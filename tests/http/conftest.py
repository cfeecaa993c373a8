"""Fixtures of the HTTP front end's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from local_user import LocalUser, local_user


@pytest.fixture(scope="session")
def other_user() -> Iterator[LocalUser]:
    """A local user other than the server's (made once per test process, removed after)."""
    with local_user() as user:
        yield user
