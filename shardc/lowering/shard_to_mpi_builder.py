"""Helpers shared by the shard -> MPI lowering patterns.

`Emitter` inserts ops before the op being lowered and folds what is known statically,
so that the DLTI rank specialisation (and constant device indices) produce static
shapes, offsets and ranks without relying on a later canonicalization. An index is
`Idx`: a Python int when known, an SSA value of type `index` otherwise.

The shared building blocks of every collective live here too: the communicator of
`(grid, grid_axes)`, the process's (linear) index in a group, contiguous buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import TypeAlias

from xdsl.dialects import arith, bufferization, scf
from xdsl.dialects import memref as xmemref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import DiagnosticException

from shardc.dialects import affine, memref, mpi, shard
from shardc.dialects.dlti import module_rank
from shardc.ir import diagnostics
from shardc.ir.linalg_build import copy_op
from shardc.ir.types import memref_of_tensor, memref_type, tensor_of_memref
from shardc.ir.walk import ops_of_class

Idx: TypeAlias = int | SSAValue

_GROUP_ATTR = "shardc.group"
_UNIT = UnitAttr()
"""Marks the comm_splits this pass makes with their (grid, axes), so that later ops of
the same block reuse them; removed at the end of the pass (`drop_group_marks`)."""


def _group_key(grid: shard.GridOp, axes: Sequence[int]) -> str:
    return f"{grid.sym_name.data}:{','.join(map(str, axes))}"


def drop_group_marks(root: Operation) -> None:
    for op in ops_of_class(root, mpi.CommSplitOp):
        op.attributes.pop(_GROUP_ATTR, None)

def fail(op: Operation | None, message: str) -> DiagnosticException:
    """An error located at `op` (`error: message`), for the caller to raise; the tool
    reports it once, where it is caught."""
    return diagnostics.error(op, message)


def world_rank(op: Operation) -> int | None:
    """The world rank the enclosing module is specialised for (its DLTI
    `"MPI:comm_world_rank"`, the hyphenated spelling read too), None if unknown."""
    return module_rank(op)


def constant_of(value: Idx) -> int | None:
    """The integer a value is known to hold (an int, or an arith.constant result)."""
    if isinstance(value, int):
        return value
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def row_major_strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


def static_grid_shape(op: Operation, grid: shard.GridOp) -> list[int]:
    shape = grid.shape_tuple
    if any(s is None for s in shape):
        raise fail(op, "Dynamic grid shape not supported.")
    return [s for s in shape if s is not None]


def grid_of(op: Operation, symbol: object) -> shard.GridOp:
    found = shard.lookup_grid(op, symbol)  # type: ignore[arg-type]
    if found is None:
        raise fail(op, "Missing grid symbol.")
    return found


class Emitter:
    """Builds IR before `anchor` (or at the end of a block), folding constants."""

    def __init__(
        self, rewriter: PatternRewriter, anchor: Operation | Block, rank: int | None = None
    ):
        self.rewriter = rewriter
        if isinstance(anchor, Operation):
            self.point = InsertPoint.before(anchor)
            self.rank = world_rank(anchor)
        else:
            self.point = InsertPoint.at_end(anchor)
            self.rank = rank

    def at(self, block: Block) -> Emitter:
        """An emitter appending to `block` (a region body being built)."""
        return Emitter(self.rewriter, block, self.rank)

    def emit(self, op: Operation) -> Operation:
        self.rewriter.insert(op, self.point)
        return op

    # -- constants and index arithmetic ------------------------------------------------

    def index(self, value: Idx) -> SSAValue:
        if isinstance(value, SSAValue):
            return value
        return self.emit(arith.ConstantOp(IntegerAttr(value, IndexType()))).results[0]

    def const(self, value: int, type_: Attribute) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, type_))).results[0]

    def i32(self, value: Idx) -> SSAValue:
        """`value` as an i32 (MPI ranks, colors, keys)."""
        known = constant_of(value)
        if known is not None:
            return self.const(known, i32)
        assert isinstance(value, SSAValue)
        return self.emit(arith.IndexCastOp(value, i32)).results[0]

    def add(self, a: Idx, b: Idx) -> Idx:
        ka, kb = constant_of(a), constant_of(b)
        if ka is not None and kb is not None:
            return ka + kb
        if ka == 0:
            return b
        if kb == 0:
            return a
        return self.emit(arith.AddiOp(self.index(a), self.index(b))).results[0]

    def sub(self, a: Idx, b: Idx) -> Idx:
        ka, kb = constant_of(a), constant_of(b)
        if ka is not None and kb is not None:
            return ka - kb
        if kb == 0:
            return a
        return self.emit(arith.SubiOp(self.index(a), self.index(b))).results[0]

    def mul(self, a: Idx, b: Idx) -> Idx:
        ka, kb = constant_of(a), constant_of(b)
        if ka is not None and kb is not None:
            return ka * kb
        if ka == 0 or kb == 0:
            return 0
        if ka == 1:
            return b
        if kb == 1:
            return a
        return self.emit(arith.MuliOp(self.index(a), self.index(b))).results[0]

    def divsi(self, a: Idx, b: Idx) -> Idx:
        ka, kb = constant_of(a), constant_of(b)
        if ka is not None and kb is not None and kb != 0:
            return int(ka / kb)  # C semantics: truncate towards zero
        return self.emit(arith.DivSIOp(self.index(a), self.index(b))).results[0]

    def remsi(self, a: Idx, b: Idx) -> Idx:
        ka, kb = constant_of(a), constant_of(b)
        if ka is not None and kb is not None and kb != 0:
            return ka - kb * int(ka / kb)
        return self.emit(arith.RemSIOp(self.index(a), self.index(b))).results[0]

    def cmp(self, predicate: str, a: Idx, b: Idx) -> bool | SSAValue:
        ka, kb = constant_of(a), constant_of(b)
        if ka is not None and kb is not None:
            return {
                "sle": ka <= kb, "sge": ka >= kb, "slt": ka < kb,
                "sgt": ka > kb, "eq": ka == kb, "ne": ka != kb,
            }[predicate]
        return self.emit(arith.CmpiOp(self.index(a), self.index(b), predicate)).results[0]

    def select(self, cond: bool | SSAValue, a: Idx, b: Idx) -> Idx:
        if isinstance(cond, bool):
            return a if cond else b
        return self.emit(arith.SelectOp(cond, self.index(a), self.index(b))).results[0]

    def if_index(self, cond: bool | SSAValue, then: Idx, build_else) -> Idx:  # type: ignore[no-untyped-def]
        """`cond ? then : build_else(emitter)`, as an scf.if yielding an index (as
        upstream builds the neighbour indices) unless `cond` is known."""
        if isinstance(cond, bool):
            return then if cond else build_else(self)
        then_block, else_block = Block(), Block()
        then_e, else_e = self.at(then_block), self.at(else_block)
        then_e.emit(scf.YieldOp(then_e.index(then)))
        else_e.emit(scf.YieldOp(else_e.index(build_else(else_e))))
        op = self.emit(scf.IfOp(cond, [IndexType()], Region(then_block), Region(else_block)))
        return op.results[0]

    def when(self, cond: bool | SSAValue, body) -> None:  # type: ignore[no-untyped-def]
        """Run `body(emitter)` unconditionally, never, or inside an scf.if."""
        if cond is True:
            body(self)
        elif cond is not False:
            block = Block()
            inner = self.at(block)
            body(inner)
            inner.emit(scf.YieldOp())
            self.emit(scf.IfOp(cond, [], Region(block)))

    def branch(self, cond: bool | SSAValue, then, otherwise) -> None:  # type: ignore[no-untyped-def]
        """`then(emitter)` or `otherwise(emitter)`: one of them when `cond` is known,
        an scf.if with both regions otherwise."""
        if isinstance(cond, bool):
            (then if cond else otherwise)(self)
            return
        regions: list[Region] = []
        for body in (then, otherwise):
            block = Block()
            inner = self.at(block)
            body(inner)
            inner.emit(scf.YieldOp())
            regions.append(Region(block))
        self.emit(scf.IfOp(cond, [], regions[0], regions[1]))

    def linearize(self, index: Sequence[Idx], shape: Sequence[Idx]) -> Idx:
        """Row-major linear index, built like upstream's multiToLinearIndex."""
        linear: Idx = 0
        stride: Idx = 1
        for i in range(len(index) - 1, -1, -1):
            linear = self.add(linear, self.mul(index[i], stride))
            stride = self.mul(stride, shape[i])
        return linear

    def delinearize(self, linear: Idx, shape: Sequence[int]) -> list[Idx]:
        known = constant_of(linear)
        if known is not None:
            out: list[Idx] = []
            for stride in row_major_strides(shape):
                out.append(known // stride)
                known %= stride
            return out
        assert isinstance(linear, SSAValue)
        return list(self.emit(affine.DelinearizeIndexOp(linear, list(shape))).results)

    # -- processes and communicators -----------------------------------------------------

    def world(self) -> SSAValue:
        return self.emit(mpi.CommWorldOp()).results[0]

    def world_rank(self) -> Idx:
        """This process's rank in MPI_COMM_WORLD as an index (DLTI folds it)."""
        if self.rank is not None:
            return self.rank
        rank = self.emit(mpi.CommRankOp(self.world(), retval=True)).results[1]
        return self.emit(arith.IndexCastOp(rank, IndexType())).results[0]

    def process_multi_index(self, grid: shard.GridOp) -> list[Idx]:
        """The process's coordinates on the whole grid."""
        shape = grid.shape_tuple
        linear = self.world_rank()
        if all(s is not None for s in shape):
            return self.delinearize(linear, [s for s in shape if s is not None])
        dims = self.emit(shard.GridShapeOp(grid)).results
        op = affine.DelinearizeIndexOp(self.index(linear), list(dims))
        return list(self.emit(op).results)

    def linear_index_in_group(
        self, grid: shard.GridOp, shape: Sequence[int], axes: Sequence[int]
    ) -> Idx:
        """The process's linear index in its group along `axes` (in the given order)."""
        multi = self.process_multi_index(grid)
        return self.linearize_in_group([multi[a] for a in axes], [shape[a] for a in axes])

    def linearize_in_group(self, index: Sequence[Idx], shape: Sequence[int]) -> Idx:
        if all(constant_of(i) is not None for i in index):
            return self.linearize([constant_of(i) for i in index], shape)  # type: ignore[misc]
        if len(index) == 1:
            return index[0]
        op = affine.LinearizeIndexOp([self.index(i) for i in index], list(shape), disjoint=True)
        return self.emit(op).results[0]

    def communicator(
        self, grid: shard.GridOp, shape: Sequence[int], axes: Sequence[int]
    ) -> SSAValue:
        """MPI_COMM_WORLD when `axes` span the grid in order, otherwise its split: the
        color is the index along the other axes, the key the index along `axes`. No axes
        is a group of one process (upstream uses the world there, against the ops'
        semantics), so the split's colors are all distinct."""
        world = self.world()
        if list(axes) == list(range(len(shape))):
            return world
        reused = self._earlier_split(grid, axes)
        if reused is not None:
            return reused
        others = [a for a in range(len(shape)) if a not in axes]
        multi = self.process_multi_index(grid)
        color = self.linearize_in_group([multi[a] for a in others], [shape[a] for a in others])
        key = self.linearize_in_group([multi[a] for a in axes], [shape[a] for a in axes])
        split = mpi.CommSplitOp(world, self.i32(color), self.i32(key))
        split.attributes[_GROUP_ATTR] = StringAttr(_group_key(grid, axes))
        return self.emit(split).results[0]

    def _earlier_split(self, grid: shard.GridOp, axes: Sequence[int]) -> SSAValue | None:
        """The communicator an earlier op of this block split for the same group.

        MPI matches messages per communicator: a shard.send and the shard.recv that
        receives it must use one communicator, not two splits of the same group (which
        upstream emits, one per op, so that such a pair never matches)."""
        anchor = self.point.insert_before
        block = self.point.block
        key = _group_key(grid, axes)
        op = anchor.prev_op if anchor is not None else block.last_op
        while op is not None:
            if isinstance(op, mpi.CommSplitOp):
                tag = op.attributes.get(_GROUP_ATTR)
                if isinstance(tag, StringAttr) and tag.data == key:
                    return op.results[0]
            op = op.prev_op
        return None

    # -- buffers ------------------------------------------------------------------------

    def alloc(self, shape: Sequence[Idx], element: Attribute) -> SSAValue:
        static = [constant_of(s) for s in shape]
        dyn = [self.index(s) for s, k in zip(shape, static) if k is None]
        type_ = memref_type(element, [DYNAMIC_INDEX if k is None else k for k in static])
        return self.emit(xmemref.AllocOp(dyn, [], type_)).results[0]

    def dealloc(self, buffer: SSAValue) -> None:
        self.emit(xmemref.DeallocOp.get(buffer))

    def copy(self, source: SSAValue, target: SSAValue) -> None:
        self.emit(memref.CopyOp(source, target))

    def linalg_copy(self, source: SSAValue, target: SSAValue) -> None:
        self.emit(copy_op([source], [target], []))

    def to_buffer(self, tensor: SSAValue, read_only: bool = True) -> SSAValue:
        t = tensor.type
        assert isinstance(t, TensorType)
        props: dict[str, Attribute] = {}
        if read_only:
            props["read_only"] = _UNIT
        op = bufferization.ToBufferOp.create(
            operands=[tensor],
            result_types=[memref_of_tensor(t)],
            properties=props,
        )
        return self.emit(op).results[0]

    def to_tensor(self, buffer: SSAValue, writable: bool = False) -> SSAValue:
        t = buffer.type
        if not isinstance(t, MemRefType):
            return self.emit(bufferization.ToTensorOp(buffer, restrict=True, writable=writable)).results[0]
        # ToTensorOp(buffer, restrict=True, writable=...) with a shared result type
        props: dict[str, Attribute] = {"restrict": _UNIT}
        if writable:
            props["writable"] = _UNIT
        op = bufferization.ToTensorOp.create(operands=[buffer], result_types=[tensor_of_memref(t)], properties=props)
        return self.emit(op).results[0]

    def as_memref(self, value: SSAValue) -> SSAValue:
        """A memref holding `value` (tensors through bufferization.to_buffer)."""
        if isinstance(value.type, TensorType):
            return self.to_buffer(value)
        return value

    def contiguous(self, op: Operation, value: SSAValue) -> SSAValue:
        """A statically shaped, contiguous row-major memref with `value`'s data:
        non-contiguous memrefs are copied into a temporary."""
        buffer = self.as_memref(value)
        t = buffer.type
        if not isinstance(t, MemRefType) or any(d < 0 for d in t.get_shape()):
            raise fail(op, "Expected static shaped memref in contiguous row-major layout.")
        if is_contiguous(t):
            return buffer
        temp = self.alloc(t.get_shape(), t.get_element_type())
        self.copy(buffer, temp)
        return temp

    def subview(
        self,
        source: SSAValue,
        offsets: Sequence[Idx],
        sizes: Sequence[int],
        drop_leading: int = 0,
    ) -> SSAValue:
        """`memref.subview` with unit strides (dropping `drop_leading` unit dims)."""
        t = source.type
        assert isinstance(t, MemRefType)
        strides = memref_strides(t)
        base = memref_offset(t)
        known = [constant_of(o) for o in offsets]
        offset = (
            base + sum(k * s for k, s in zip(known, strides))  # type: ignore[misc]
            if base is not None and all(k is not None for k in known)
            else None
        )
        kept_sizes = list(sizes[drop_leading:])
        kept_strides = strides[drop_leading:]
        layout = StridedLayoutAttr(kept_strides, offset)
        result = MemRefType(t.get_element_type(), kept_sizes, layout)
        static = [DYNAMIC_INDEX if k is None else k for k in known]
        dyn = [self.index(o) for o, k in zip(offsets, known) if k is None]
        op = xmemref.SubviewOp(
            source, dyn, [], [], static, list(sizes), [1] * len(sizes), result
        )
        return self.emit(op).results[0]


def memref_strides(t: MemRefType) -> list[int]:
    layout = t.layout
    if isinstance(layout, StridedLayoutAttr):
        return [s.data if hasattr(s, "data") else DYNAMIC_INDEX for s in layout.strides.data]  # type: ignore[union-attr]
    return row_major_strides(t.get_shape())


def memref_offset(t: MemRefType) -> int | None:
    layout = t.layout
    if isinstance(layout, StridedLayoutAttr):
        off = layout.offset
        return off.data if hasattr(off, "data") else None  # type: ignore[union-attr]
    return 0


def is_contiguous(t: MemRefType) -> bool:
    """Static shape, identity (or equivalent strided) row-major layout."""
    if any(d < 0 for d in t.get_shape()):
        return False
    if isinstance(t.layout, NoneAttr):
        return True
    if not isinstance(t.layout, StridedLayoutAttr):
        return False
    shape = t.get_shape()
    strides = memref_strides(t)
    return all(st == want for st, want, d in zip(strides, row_major_strides(shape), shape) if d != 1)


def element_type(t: Attribute) -> Attribute:
    assert isinstance(t, TensorType | MemRefType)
    return t.get_element_type()


def static_shape(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, TensorType | MemRefType)
    return tuple(t.get_shape())


def group_shape(shape: Sequence[int], axes: Sequence[int]) -> list[int]:
    return [shape[a] for a in axes]


def group_size(shape: Sequence[int], axes: Sequence[int]) -> int:
    return prod(group_shape(shape, axes))


def mixed(static: DenseArrayBase, dynamic: Sequence[SSAValue]) -> list[Idx]:
    values = iter(dynamic)
    return [next(values) if s == DYNAMIC_INDEX else s for s in static.get_values()]  # type: ignore[misc]

