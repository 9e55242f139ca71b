import numpy as np
import pytest

from shardc.runtime import compile_text


@pytest.fixture
def run():
    """run(mlir_text, fn_name, *args) -> compiled function result (via CompiledModule.call)."""

    def _run(text: str, name: str, *args):
        return compile_text(text).call(name, *args)

    return _run


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
