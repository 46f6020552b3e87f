"""Fixtures for integration tests: raw gateway stubs bound to the shared or a fresh Weir."""

from collections.abc import Iterator

import grpc
import pytest

from tests.harness import WeirProcess
from tests.integration.clients import Stub


@pytest.fixture(scope="module")
def stub(weir: WeirProcess) -> Iterator[Stub]:
    channel = grpc.insecure_channel(weir.address)
    try:
        yield Stub(channel)
    finally:
        channel.close()


@pytest.fixture
def fresh_stub(fresh_weir: WeirProcess) -> Iterator[Stub]:
    """A stub for ``fresh_weir``; the channel reconnects by itself across restarts (same port)."""
    fresh_weir.start()
    channel = grpc.insecure_channel(fresh_weir.address)
    try:
        yield Stub(channel)
    finally:
        channel.close()
