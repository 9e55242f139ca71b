"""Convolutions and pooling split by image height (interfaces/conv.py), on a CNN exported
by torch-mlir: the compiled program exchanges halos (update_halo, lowered to neighbour
send/recv) and gathers no activation, and its results equal PyTorch's on 2 and 4
simulated ranks."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.testing import conv_models as cm  # noqa: E402


@pytest.fixture(scope="module")
def cnn():
    return cm.small_cnn_export(batch=2, size=16)


def _compiled(text: str):
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.training.spmd import PIPELINE, count_collectives, run_pipeline

    module = LocatingParser(make_context(), text, "<cnn>").parse_module()
    stages = run_pipeline(module, PIPELINE[:2], keep_text=True)
    partitioned = count_collectives(module)["cnn"]
    run_pipeline(module, PIPELINE[2:])
    return partitioned, count_collectives(module)["cnn"], stages[-1].text


@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_exchanges_halos_and_gathers_nothing(cnn, ranks: int) -> None:
    model, inputs, exported = cnn
    partitioned, lowered, text = _compiled(cm.height_split_program(exported, ranks))
    # one halo exchange per padded conv (3), none for the 2x2 pool, nothing gathered
    assert partitioned["shard.update_halo"] == 3
    assert not any(k in partitioned for k in ("shard.all_gather", "shard.all_to_all", "shard.all_reduce"))
    # each exchange: a slab up and a slab down, sent and received (boundary ranks skip theirs)
    assert lowered["mpi.send"] == 6 and lowered["mpi.recv"] == 6
    assert "mpi.allgather" not in lowered and "mpi.allreduce" not in lowered
    # the image stays split: each rank convolves its rows plus one halo row on each side
    rows = 16 // ranks
    assert f"tensor<2x3x{rows + 2}x18xf32>" in text


@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_equals_pytorch(cnn, ranks: int) -> None:
    from shardc.runtime.launch import run_program

    model, inputs, exported = cnn
    program = cm.height_split_program(exported, ranks)
    (got,) = run_program(program, cm.arguments(model, inputs, exported), ranks=ranks)
    with torch.no_grad():
        want = model(*inputs).numpy()
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_non_dividing_height_is_one_located_error() -> None:
    from shardc.runtime.launch import ProgramError, run_program

    model, inputs, exported = cm.small_cnn_export(batch=1, size=12)
    # 12 rows on 8 ranks (annotate_arguments refuses to write it: the grid is edited)
    program = cm.height_split_program(exported, 4).replace("shape = 4", "shape = 8")
    with pytest.raises(ProgramError) as info:
        run_program(program, cm.arguments(model, inputs, exported), ranks=8)
    message = str(info.value)
    assert "Traceback" not in message
    assert "does not split evenly into 8 shards" in message
