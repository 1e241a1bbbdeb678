from collections.abc import Iterator

import pytest

from .model_server import ModelServer


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer().start()
    yield server
    server.stop()
