"""`Region.clone_into` without xDSL's per-op layers.

xDSL clones a region through `Operation.clone` per op (each with its own mappers and
wrapper calls), inserts block arguments one by one, then walks both regions again with
generators to set the operands. shard-partition clones the body of every linalg op it
partitions, so that is a good part of the pass. `clone_region_into` makes the same IR:
the same blocks, arguments (types, locations, name hints), ops (class, operands,
result types, name hints, attributes, properties, location, successors) and nested
regions, and records the same value mapping.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, Region, SSAValue

from shardc.ir.op_init import create_op


def clone_region_into(src: Region, dest: Region, mapping: dict[SSAValue, SSAValue]) -> None:
    """`src.clone_into(dest, 0, mapping)` for an empty `dest`."""
    assert dest is not src
    if dest.first_block is not None:
        src.clone_into(dest, 0, mapping)
        return
    cloned: list[tuple[Operation, Operation]] = []
    _clone_blocks(src, dest, mapping, {}, cloned)
    # operands last: a graph region may use a value before the op defining it
    get = mapping.get
    for old, new in cloned:
        operands = old._operands  # pyright: ignore[reportPrivateUsage]
        if operands:
            new.operands = tuple([get(v, v) for v in operands])


def _clone_blocks(
    src: Region,
    dest: Region,
    mapping: dict[SSAValue, SSAValue],
    blocks: dict[Block, Block],
    cloned: list[tuple[Operation, Operation]],
) -> None:
    pairs: list[tuple[Block, Block]] = []
    for block in src.blocks:
        new_block = Block(arg_types=[a.type for a in block.args])
        blocks[block] = new_block
        pairs.append((block, new_block))
        dest.add_block(new_block)
    for block, new_block in pairs:
        for old_arg, new_arg in zip(block.args, new_block.args):
            new_arg.location = old_arg.location
            new_arg.name_hint = old_arg.name_hint
            mapping[old_arg] = new_arg
        ops: list[Operation] = []
        for op in block.ops:
            successors = op._successors  # pyright: ignore[reportPrivateUsage]
            new = create_op(
                type(op),
                result_types=op.result_types,
                attributes=op.attributes.copy(),
                properties=op.properties.copy(),
                location=op.location,
                successors=[blocks.get(s, s) for s in successors] if successors else (),
                regions=[Region() for _ in op.regions] if op.regions else (),
            )
            for old_result, new_result in zip(op.results, new.results, strict=True):
                mapping[old_result] = new_result
                new_result.name_hint = old_result.name_hint
            cloned.append((op, new))  # pre-order, as xDSL's walk sets the operands
            for old_region, new_region in zip(op.regions, new.regions):
                _clone_blocks(old_region, new_region, mapping, blocks, cloned)
            ops.append(new)
        new_block.add_ops(ops)
