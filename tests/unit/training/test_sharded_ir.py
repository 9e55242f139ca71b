"""The sharded step module: the same functions with shard annotations at their boundaries."""

from xdsl.dialects import func
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.dialects.shard import ShardingOp, ShardOp
from shardc.ir.printer import module_to_string
import pytest

from shardc.training.axis import GPT_PLAN, ShardingPolicy, ShardingValidationError
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.mesh import make_grid
from shardc.training.step import Sharded, build_step_module

CFG = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=4, vocab_size=8)


def _annotations(value):
    """The chain of shard.shard ops from a value: [(split_axes, for_users), ...]."""
    out = []
    while True:
        users = [u.operation for u in value.uses]
        if len(users) != 1 or not isinstance(users[0], ShardOp):
            return out
        op = users[0]
        sharding = op.sharding.owner
        assert isinstance(sharding, ShardingOp)
        out.append((sharding.split_axes.as_tuple(), op.for_users))
        value = op.result


@pytest.mark.slow
def test_sharded_step_module_annotates_boundaries():
    sh = Sharded(make_grid(4, tp=2), GPT_PLAN, ShardingPolicy(tp=2, fsdp=True))
    module = build_step_module(CFG, 4, sharded=sh)
    module.verify()
    text = module_to_string(module)
    assert text.split("module {\n")[1].startswith("  shard.grid @grid(shape = 2x2)\n")
    again = Parser(make_context(), text).parse_module()
    assert module_to_string(again) == text

    fns = {op.sym_name.data: op for op in module.body.block.ops if isinstance(op, func.FuncOp)}
    specs = param_specs(CFG)
    n = len(specs)
    step_args = fns["train_step"].body.block.args
    qkv = next(i for i, s in enumerate(specs) if s.path == "h.0.attn.c_attn.weight")
    wte = next(i for i, s in enumerate(specs) if s.path == "wte")
    # params: storage (fsdp: heads over shard then batch) -> compute for users
    assert _annotations(step_args[qkv]) == [(((), (), (1, 0)), False), (((), (), (1,)), True)]
    assert _annotations(step_args[wte]) == [(((0,),), False), (((),), True)]
    # tokens and targets split over batch
    assert _annotations(step_args[2 * n]) == [(((0,),), False), (((0,),), True)]
    # optimizer: storage -> update for params and grads, moments in update layout
    opt_args = fns["adamw_step"].body.block.args
    assert _annotations(opt_args[qkv]) == [(((), (), (1, 0)), False), (((), (), (1, 0)), True)]
    assert _annotations(opt_args[2 * n + wte]) == [(((0,),), False), (((0,),), True)]


def test_unsharded_module_has_no_annotations():
    module = build_step_module(CFG, 2)
    assert not any(isinstance(op, ShardOp | ShardingOp) for op in module.walk())


def test_sharded_build_validates_state_and_batch_first():
    sh = Sharded(make_grid(4, tp=2), GPT_PLAN, ShardingPolicy(tp=2, fsdp=True))
    with pytest.raises(ShardingValidationError, match=r"^state params/h.0.attn.c_attn.weight of shape \(8, 3, 2, 4\)"):
        build_step_module(GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=8), 4, sharded=sh)
    with pytest.raises(ShardingValidationError) as e:
        build_step_module(CFG, 3, sharded=sh)
    assert e.value.failures == [
        f"state data/{name} of shape (3, 4) with partition spec PartitionSpec(('batch',), None) does not fit "
        "grid (batch=2, shard=2): dimension 0 of size 3 is split 2 ways"
        for name in ("tokens", "targets")
    ]


@pytest.mark.slow
@pytest.mark.oracle
def test_mlir_opt_reads_the_sharded_module_as_printed(tmp_path):
    from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

    if find_mlir_opt() is None:
        pytest.skip("mlir-opt is not installed")
    sh = Sharded(make_grid(4, tp=2), GPT_PLAN, ShardingPolicy(tp=2))
    text = module_to_string(build_step_module(CFG, 4, sharded=sh))
    path = tmp_path / "step.mlir"
    path.write_text(text)
    out = run_mlir_opt(str(path))
    assert out.returncode == 0, out.stderr
    # 22.1.8 names shard.shard results `%sharding_annotated`, trunk (and shardc) `%sharded`
    assert out.stdout.replace("%sharding_annotated", "%sharded") == text
