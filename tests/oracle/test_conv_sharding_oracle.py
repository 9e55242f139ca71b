"""The convolutions and pools that shardc splits with halos
(`tests/filecheck/passes/shard-partition-conv.mlir`): what sharding-propagation writes (halo
sizes in the annotations) and what shard-partition emits (pads, update_halo, local
convolutions, all_reduce) is IR that mlir-opt parses, verifies and prints back as
shardc-opt reads it."""

from __future__ import annotations

import pytest

from shardc.testing.normalize import normalize_ssa_names

from .conftest import ROOT, MlirOpt, Shardc

pytestmark = pytest.mark.oracle

FILE = ROOT / "tests" / "filecheck" / "passes" / "shard-partition-conv.mlir"


def _passes(text: str, names: list[str]) -> str:
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import module_to_string
    from shardc.training.pipeline import run_pipeline

    module = LocatingParser(make_context(), text, "<conv>").parse_module()
    run_pipeline(module, names)
    return module_to_string(module)


@pytest.mark.slow
@pytest.mark.parametrize("passes", [["sharding-propagation"], ["sharding-propagation", "shard-partition"]])
def test_sharded_convolutions_read_by_mlir_opt(passes: list[str], mlir_opt: MlirOpt, shardc: Shardc) -> None:
    ours = _passes(FILE.read_text(), passes)
    assert ("shard.update_halo" in ours) == ("shard-partition" in passes)
    assert "halo_sizes = [1, 1]" in ours
    theirs = mlir_opt.run(ours)
    assert normalize_ssa_names(shardc.run(theirs)) == normalize_ssa_names(shardc.run(ours))


@pytest.mark.slow
def test_rewritten_training_step_read_by_mlir_opt(mlir_opt: MlirOpt, shardc: Shardc) -> None:
    """The CNN's training step after scatter-windows and expand-shapes-before-pads (the
    pool gradient as an expanded generic, the pad after its reshape), then partitioned
    by height: IR mlir-opt parses, verifies and prints back the same."""
    pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
    import torch
    import torch.nn.functional as F

    from shardc.frontends.annotate import annotate_arguments
    from shardc.frontends.torch_train import export_train_step
    from shardc.testing import conv_models as cm

    torch.manual_seed(0)
    model = cm.SmallCNN()
    step = export_train_step(model, [torch.randn(2, 3, 16, 16)], [torch.randn(2, 4, 4, 4)], F.mse_loss)
    names = [*step.input_names, *step.target_names, *step.param_names]
    text = annotate_arguments(step.text, (2,), {"input0": [[], [], [0]], "target0": [[], [], [0]]}, names=names)
    rewritten = _passes(text, ["scatter-windows", "expand-shapes-before-pads"])
    assert "tm_tensor.scatter" not in rewritten
    for ours in (rewritten, _passes(rewritten, ["sharding-propagation", "shard-partition"])):
        theirs = mlir_opt.run(ours)
        assert normalize_ssa_names(shardc.run(theirs)) == normalize_ssa_names(shardc.run(ours))
