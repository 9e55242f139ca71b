"""PyTorch models exported by torch-mlir, annotated only at some arguments, run sharded.

Each model is exported live (parameters as function arguments), a few arguments get a
sharding (the batch dimension of the input over one grid axis, Megatron-style column and
row splits of the MLP weights over the other), and the program goes through
sharding-propagation + shard-partition (and the whole MPI pipeline) on simulated ranks.
The global result must equal PyTorch's own, float32, max abs diff < 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.frontends.annotate import AnnotationError, annotate_arguments  # noqa: E402
from shardc.launch import ProgramError, run_program  # noqa: E402
from shardc.testing import torch_models as tm  # noqa: E402

pytestmark = pytest.mark.slow  # its module fixtures export and compile an MLP and a GPT

TOL = 1e-4


def _torch_result(model, inputs) -> np.ndarray:
    with torch.no_grad():
        return model(*inputs).numpy()


@pytest.fixture(scope="module")
def mlp():
    return tm.mlp_export(batch=8)


@pytest.fixture(scope="module")
def gpt():
    return tm.gpt_export(tm.GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32), batch=4)


MLP_PLANS = {
    "batch-2": ((2,), {"x": [[0]]}),
    "batch-4": ((4,), {"x": [[0]]}),
    "megatron-2x2": ((2, 2), {"x": [[0]], "fc1.weight": [[1]], "fc2.weight": [[], [1]]}),
    "weights-only-2x2": ((2, 2), {"fc1.weight": [[1]], "fc2.weight": [[], [1]]}),
}

GPT_PLANS = {
    "batch-2": ((2,), {"idx": [[0]]}),
    "batch-2x2": ((2, 2), {"idx": [[0]]}),
    "megatron-2x2": (
        (2, 2),
        {
            "idx": [[0]],
            "blocks.0.fc.weight": [[1]],
            "blocks.0.out.weight": [[], [1]],
            "blocks.1.fc.weight": [[1]],
            "blocks.1.out.weight": [[], [1]],
        },
    ),
}


def _run(exported_case, plan, pipeline):
    model, inputs, exported = exported_case
    grid, shardings = plan
    text = annotate_arguments(exported.text, grid, shardings, names=exported.arg_names)
    ranks = int(np.prod(grid))
    (got,) = run_program(text, exported.arguments(model, inputs), ranks=ranks, pipeline=pipeline)
    want = _torch_result(model, inputs)
    assert got.shape == want.shape
    diff = float(np.abs(got - want).max())
    assert diff < TOL, f"max abs diff {diff} against PyTorch"


@pytest.mark.parametrize("pipeline", [None, "shard-to-mpi-pipeline"], ids=["partitioned", "lowered"])
@pytest.mark.parametrize("plan", list(MLP_PLANS), ids=list(MLP_PLANS))
def test_mlp_sharded_equals_pytorch(mlp, plan, pipeline):
    _run(mlp, MLP_PLANS[plan], pipeline)


@pytest.mark.parametrize("pipeline", [None, "shard-to-mpi-pipeline"], ids=["partitioned", "lowered"])
@pytest.mark.parametrize("plan", list(GPT_PLANS), ids=list(GPT_PLANS))
def test_gpt_sharded_equals_pytorch(gpt, plan, pipeline):
    _run(gpt, GPT_PLANS[plan], pipeline)


def test_propagation_annotates_every_value(gpt):
    """After propagation the annotated GPT is fully annotated: partition accepts it."""
    from shardc.ir.printer import module_to_string
    from shardc.tools.cli import apply_passes, parse_module, pipeline_passes

    model, inputs, exported = gpt
    grid, shardings = GPT_PLANS["megatron-2x2"]
    text = annotate_arguments(exported.text, grid, shardings, names=exported.arg_names)
    module = parse_module(text, "gpt")
    apply_passes(module, pipeline_passes("sharding-propagation,shard-partition"))
    out = module_to_string(module)
    # The local shapes: the batch of 4 tokens is split in two, fc's 64 columns in two.
    assert "tensor<2x8xi64>" in out
    assert "tensor<32x16xf32>" in out


def test_bad_annotation_is_one_clear_error(mlp):
    _, _, exported = mlp
    with pytest.raises(AnnotationError, match="does not divide by 3"):
        annotate_arguments(exported.text, (3,), {"x": [[0]]}, names=exported.arg_names)
    with pytest.raises(AnnotationError, match="no argument named 'nope'"):
        annotate_arguments(exported.text, (2,), {"nope": [[0]]}, names=exported.arg_names)


def test_wrong_input_shape_is_reported(mlp):
    model, inputs, exported = mlp
    text = annotate_arguments(exported.text, (2,), {"x": [[0]]}, names=exported.arg_names)
    args = exported.arguments(model, inputs)
    args["arg0"] = args["arg0"][:3]
    with pytest.raises(ProgramError, match=r"input %arg0: expected shape \(8, 16\) of float32, got shape \(3, 16\)"):
        run_program(text, args, ranks=2)
