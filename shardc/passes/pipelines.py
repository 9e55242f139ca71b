"""Named pass pipelines: one name on the command line for a fixed sequence of passes,
as mlir-opt's `PassPipelineRegistration` gives (`--shard-to-mpi-pipeline`, or
`builtin.module(shard-to-mpi-pipeline{traversal=forward})` in a textual pipeline).

A pipeline is a `ModulePass` that runs its stages in order, so the pass table, the
command-line translation (`shardc.tools.argv`) and `shardc-run --pipeline` treat it
like any pass; its options are forwarded to the stage they belong to.

`shard-to-mpi-pipeline` takes an annotated program with global shapes all the way to
mpi: sharding-propagation, shard-partition, shard-simplify, canonicalize, cse,
convert-shard-to-mpi, forward-send-copies, canonicalize. The lowered program works on local shards and no
longer says how they relate to global arrays, so (unless `keep-shardings=false`) the
entry functions' argument and result attributes record it first:

    %arg0: tensor<16x8xf32> {shardc.global_type = tensor<16x32xf32>,
                             shardc.sharding = {grid = @grid, split_axes = [...], ...}}

`boundary_shardings` reads them back (shardc-run scatters global inputs and gathers
global results with them).

`torch-cleanup-pipeline` is what the torch training import runs on torch-mlir's output
before anything is sharded: the rewrites that keep splits through the forms torch-mlir
emits (collapsed batch matmuls, scatters whose positions are known, reshapes across
pads, aranges read as positions, inits shared by unrelated ops). Each helps any program that has those forms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FlatSymbolRefAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    i16,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, SSAValue
from xdsl.passes import ModulePass

from shardc.ir.walk import ops_of_class
from shardc.passes.options import Traversal

SHARDING_ATTR = "shardc.sharding"
"""Argument/result attribute: the sharding of the value before partitioning."""
GLOBAL_TYPE_ATTR = "shardc.global_type"
"""Argument/result attribute: the value's type before partitioning."""
NAME_ATTR = "shardc.name"
"""Argument attribute: the argument's name in the source (`x` of `%x`), which the
printed lowered program no longer carries (it prints `%arg0`)."""


# =========================================================================================
# Boundary shardings kept across lowering
# =========================================================================================


def _sharding_dict(value: SSAValue) -> DictionaryAttr | None:
    """The shard.sharding defining `value` as an attribute dictionary (static halos
    and offsets only; None otherwise)."""
    from shardc.dialects.shard import ShardingOp

    op = value.owner
    if not isinstance(op, ShardingOp) or op.dynamic_halo_sizes or op.dynamic_sharded_dims_offsets:
        return None
    return DictionaryAttr(
        {
            "grid": FlatSymbolRefAttr(op.grid.string_value()),
            "split_axes": ArrayAttr([DenseArrayBase.from_list(i16, list(a)) for a in op.split_axes_tuple]),
            "halo_sizes": DenseArrayBase.from_list(i64, list(op.static_halo_sizes.get_values())),
            "sharded_dims_offsets": DenseArrayBase.from_list(
                i64, list(op.static_sharded_dims_offsets.get_values())
            ),
        }
    )


def _arg_annotation(arg: BlockArgument) -> DictionaryAttr | None:
    from shardc.dialects.shard import ShardOp

    annots = [u.operation for u in arg.uses if isinstance(u.operation, ShardOp) and u.operation.src is arg]
    annots.sort(key=lambda s: s.for_users)  # the value's own sharding first
    return _sharding_dict(annots[0].sharding) if annots else None


def _result_annotation(value: SSAValue) -> DictionaryAttr | None:
    from shardc.dialects.shard import ShardOp

    owner = value.owner
    return _sharding_dict(owner.sharding) if isinstance(owner, ShardOp) else None


@dataclass
class _Boundary:
    args: list[tuple[Attribute, DictionaryAttr | None]]
    results: list[tuple[Attribute, DictionaryAttr | None]]
    names: list[str | None]


def record_boundaries(module: ModuleOp) -> dict[str, _Boundary]:
    """The global types and shardings of every defined function's arguments and
    results, read from the shard.shard annotations of the unpartitioned program."""
    found: dict[str, _Boundary] = {}
    for f in ops_of_class(module, func.FuncOp):
        if not f.body.blocks:
            continue
        block = f.body.blocks[0]
        args = [(a.type, _arg_annotation(a)) for a in block.args]
        ret = block.last_op
        results = (
            [(v.type, _result_annotation(v)) for v in ret.arguments]
            if isinstance(ret, func.ReturnOp)
            else []
        )
        if any(s is not None for _, s in (*args, *results)):
            found[f.sym_name.data] = _Boundary(args, results, [a.name_hint for a in block.args])
    return found


def _with(
    attrs: DictionaryAttr | None,
    global_type: Attribute,
    sharding: DictionaryAttr | None,
    name: str | None = None,
) -> DictionaryAttr:
    entries = dict(attrs.data) if attrs is not None else {}
    entries[GLOBAL_TYPE_ATTR] = global_type  # types are attributes in xDSL
    if sharding is not None:
        entries[SHARDING_ATTR] = sharding
    if name is not None:
        entries[NAME_ATTR] = StringAttr(name)
    return DictionaryAttr(entries)


def attach_boundaries(module: ModuleOp, boundaries: dict[str, _Boundary]) -> None:
    """Write what `record_boundaries` found onto the (now partitioned) functions."""
    for f in ops_of_class(module, func.FuncOp):
        if f.sym_name.data not in boundaries:
            continue
        b = boundaries[f.sym_name.data]
        n_in, n_out = len(f.function_type.inputs.data), len(f.function_type.outputs.data)
        if n_in != len(b.args) or n_out != len(b.results):
            continue  # the signature changed shape: nothing reliable to record
        old_args = f.arg_attrs.data if f.arg_attrs is not None else [None] * n_in
        old_res = f.res_attrs.data if f.res_attrs is not None else [None] * n_out
        f.arg_attrs = ArrayAttr(
            [_with(a, t, s, n) for a, (t, s), n in zip(old_args, b.args, b.names)]
        )
        f.res_attrs = ArrayAttr([_with(a, t, s) for a, (t, s) in zip(old_res, b.results)])


def recorded_arg_names(f: func.FuncOp) -> list[str | None]:
    """The source names `shard-to-mpi-pipeline` recorded on `f`'s arguments."""
    attrs = f.arg_attrs.data if f.arg_attrs is not None else ()
    names: list[str | None] = []
    for a in attrs:
        name = a.data.get(NAME_ATTR) if isinstance(a, DictionaryAttr) else None
        names.append(name.data if isinstance(name, StringAttr) else None)
    return names + [None] * (len(f.function_type.inputs.data) - len(names))


def boundary_shardings(
    module: ModuleOp, f: func.FuncOp, make_sharding: Callable[..., Any]
) -> tuple[list[tuple[Attribute, Any]], list[tuple[Attribute, Any]]] | None:
    """(global type, sharding or None) per argument and per result of a lowered
    function, from the attributes `shard-to-mpi-pipeline` recorded; None if it has none.
    A sharding is `make_sharding(grid name, grid shape, split axes, halo sizes, sharded
    dims offsets)`: the runtime's `RuntimeSharding` for shardc-run."""
    from shardc.dialects.shard import GridOp

    grids = {op.sym_name.data: op for op in module.walk() if isinstance(op, GridOp)}

    def read(attrs: ArrayAttr | None, types: Sequence[Attribute]) -> list[tuple[Attribute, Any]]:
        out: list[tuple[Attribute, Any]] = []
        for k, t in enumerate(types):
            d = attrs.data[k].data if attrs is not None and isinstance(attrs.data[k], DictionaryAttr) else {}
            g = d.get(GLOBAL_TYPE_ATTR)
            global_type = g if isinstance(g, TensorType | MemRefType) else t
            s = d.get(SHARDING_ATTR)
            sharding = None
            if isinstance(s, DictionaryAttr):
                name = s.data["grid"].string_value()  # type: ignore[union-attr]
                grid = grids.get(name)
                if grid is None:
                    raise ValueError(f"no shard.grid named @{name} for a recorded sharding")
                sharding = make_sharding(
                    name,
                    grid.shape_tuple,
                    tuple(tuple(a.get_values()) for a in s.data["split_axes"].data),  # type: ignore[union-attr]
                    tuple(s.data["halo_sizes"].get_values()),  # type: ignore[union-attr]
                    tuple(s.data["sharded_dims_offsets"].get_values()),  # type: ignore[union-attr]
                )
            out.append((global_type, sharding))
        return out

    def recorded(attrs: ArrayAttr | None) -> bool:
        return attrs is not None and any(
            isinstance(a, DictionaryAttr) and GLOBAL_TYPE_ATTR in a.data for a in attrs.data
        )

    if not (recorded(f.arg_attrs) or recorded(f.res_attrs)):
        return None
    return (
        read(f.arg_attrs, f.function_type.inputs.data),
        read(f.res_attrs, f.function_type.outputs.data),
    )


# =========================================================================================
# Pipelines
# =========================================================================================


def _stage(name: str, **options: Any) -> ModulePass:
    from shardc.passes import all_passes

    return all_passes()[name]()(**options)


@dataclass(frozen=True)
class ShardToMPIPipelinePass(ModulePass):
    """Annotated global program to mpi: sharding-propagation, shard-partition,
    shard-simplify, canonicalize, cse, convert-shard-to-mpi, forward-send-copies,
    canonicalize."""

    name = "shard-to-mpi-pipeline"

    traversal: Traversal = "backward-forward"
    """sharding-propagation's traversal order(s)."""

    keep_shardings: bool = True
    """Record the entry functions' global types and shardings as argument/result
    attributes (`shardc.global_type`, `shardc.sharding`)."""

    def stages(self) -> list[ModulePass]:
        from shardc.passes.sharding_propagation import PartitionablePropagationPass

        return [
            PartitionablePropagationPass(traversal=self.traversal),
            _stage("shard-partition"),
            _stage("shard-simplify"),
            _stage("canonicalize"),
            _stage("cse"),
            _stage("convert-shard-to-mpi"),
            _stage("forward-send-copies"),
            _stage("canonicalize"),
        ]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        boundaries: dict[str, _Boundary] = {}
        for stage in self.stages():
            if self.keep_shardings and stage.name == "shard-partition":
                # after propagation: results get their shardings there too
                boundaries = record_boundaries(op)
            stage.apply(ctx, op)
        attach_boundaries(op, boundaries)


@dataclass(frozen=True)
class TorchCleanupPipelinePass(ModulePass):
    """torch-mlir's linalg-on-tensors into a form that shards: uncollapse-batch-matmuls,
    scatter-by-position, scatter-windows, expand-shapes-before-pads,
    iota-operands-as-indices, split-shared-inits."""

    name = "torch-cleanup-pipeline"

    def stages(self) -> list[ModulePass]:
        return [
            _stage("uncollapse-batch-matmuls"),
            _stage("scatter-by-position"),
            _stage("scatter-windows"),
            _stage("expand-shapes-before-pads"),
            _stage("iota-operands-as-indices"),
            _stage("split-shared-inits"),
        ]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for stage in self.stages():
            stage.apply(ctx, op)
