"""`insert_op(op, point)`: xDSL's `Rewriter.insert_op` for one op.

`Rewriter.insert_op` takes an op or a sequence and tells them apart with
`isinstance(op, Operation)`, an ABC test (about 0.3 us); propagation annotates thousands
of operands and results one op at a time. The block's own insertion is what it calls
for one op."""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint


def insert_op(op: Operation, point: InsertPoint) -> None:
    """Insert the detached `op` at `point`, as `Rewriter.insert_op(op, point)` does."""
    before = point.insert_before
    if before is not None:
        point.block.insert_op_before(op, before)
    else:
        point.block.add_op(op)
