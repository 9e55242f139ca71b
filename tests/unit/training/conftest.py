import numpy as np
import pytest

from shardc.runtime import compile_module
from shardc.training.gpt import GPTConfig, init_params
from shardc.training.step import build_step_module
from shardc.training.train import set_blas_threads

TINY = GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=7)
TINY_BATCH = 2


@pytest.fixture(scope="session", autouse=True)
def one_blas_thread():
    """The step functions are many tiny matmuls: BLAS threads only slow them down."""
    old = set_blas_threads(1)
    yield
    if old is not None:
        set_blas_threads(old)


@pytest.fixture(scope="session")
def tiny_step():
    """(config, module, compiled) of the float64 step module of the tiny GPT."""
    module = build_step_module(TINY, TINY_BATCH, "float64")
    return TINY, module, compile_module(module, "tiny")


@pytest.fixture(scope="session")
def tiny_inputs():
    """Perturbed float64 parameters (by path), tokens and targets for the tiny GPT."""
    rng = np.random.default_rng(7)
    params = init_params(TINY, 3, np.float64)
    for k in params:
        params[k] = params[k] + rng.normal(0.0, 0.3, params[k].shape)
    tokens = rng.integers(0, TINY.vocab_size, (TINY_BATCH, TINY.block_size))
    targets = rng.integers(0, TINY.vocab_size, (TINY_BATCH, TINY.block_size))
    return params, tokens, targets
