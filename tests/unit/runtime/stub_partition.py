"""`test-stub-partition`: a stand-in for shard-partition in shardc-run's tests, for
programs whose tensors all have one global shape and one sharding (elementwise bodies).

It gives every tensor of that shape the local type (split dims dynamic, so uneven and
haloed shards fit), drops the `shard.shard` annotations and updates the signature; the
runtime then sees the program the partitioner would make for such bodies. Register it
with `register()` (in-process) or run `python stub_partition.py <shardc-run args>`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, FunctionType, ModuleOp, TensorType
from xdsl.passes import ModulePass

from shardc.dialects.shard import ShardingOp, ShardOp


@dataclass(frozen=True)
class StubPartitionPass(ModulePass):
    name = "test-stub-partition"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.walk() if isinstance(o, func.FuncOp) and o.body.blocks]:
            _partition(f)


def _partition(f: func.FuncOp) -> None:
    shards = [o for o in f.walk() if isinstance(o, ShardOp)]
    if not shards:
        return
    sharding = shards[0].sharding.owner
    assert isinstance(sharding, ShardingOp)
    split = sharding.split_axes_tuple
    gtype = shards[0].src.type
    assert isinstance(gtype, TensorType)
    shape = [DYNAMIC_INDEX if d < len(split) and split[d] else s for d, s in enumerate(gtype.get_shape())]
    local = TensorType(gtype.get_element_type(), shape)
    for s in shards:
        s.result.replace_all_uses_with(s.src)
        s.detach()
        s.erase()
    block = f.body.blocks.first
    assert block is not None
    values = [*block.args, *(r for o in f.walk() for r in o.results)]
    for v in values:
        if v.type == gtype:
            v._type = local  # pyright: ignore[reportPrivateUsage]
    ins = [local if t == gtype else t for t in f.function_type.inputs.data]
    outs = [local if t == gtype else t for t in f.function_type.outputs.data]
    f.function_type = FunctionType.from_lists(ins, outs)


def register() -> None:
    from shardc import passes

    passes.PASSES.setdefault("test-stub-partition", f"{__name__}:StubPartitionPass")


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    __name__ = "stub_partition"  # noqa: A001 - importable under its own name
    sys.modules["stub_partition"] = sys.modules["__main__"]
    register()
    from shardc.tools.run import main

    sys.exit(main(sys.argv[1:]))
