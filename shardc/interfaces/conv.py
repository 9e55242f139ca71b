"""Sharding of convolutions and pooling: batch, channels, and image dimensions with halos.

A convolution or pooling op is a structured op some of whose operand dimensions are
*windows*: `stride * d_out + dilation * d_k`, `d_out` a parallel loop of the output (an
image row) and `d_k` a reduction loop over the kernel. Every linalg conv and pooling named
op (1-D/2-D/3-D, nchw/nhwc, grouped, depthwise) and any linalg.generic with such maps gets
this model; ops without windows keep the structured-op model it derives from
(interfaces/linalg.py).

* Batch and output channels are ordinary parallel loops: split, the op runs on its local
  shards (weights split by output channel, the input whole along channels).
* Input channels are a reduction loop: partial sums, then `shard.all_reduce` (sum), as
  for any structured reduction.
* A window dimension of the input is split like its output loop. Rank r of N computes
  output rows [r*Lo, (r+1)*Lo) and reads padded rows from r*Lo*s on: exactly the start
  of its own rows of the unpadded image when Lo*s == Lx (Lx = H/N, its rows of the
  image). The rows it needs from its neighbours are the halos. Padding comes from a
  `tensor.pad` before the op (torch-mlir's form): its result along a split padded
  dimension is laid out as the *source's* rows plus `halo_sizes = [low, high]` (counted
  in the source's frame: rank r holds source rows [r*Lx - low, (r+1)*Lx + high)). The
  pad partitions into the same pad of the local shard (every rank pads its halo region
  with the pad value) and a `shard.update_halo` that overwrites the interior halos from
  the neighbours; the first and last ranks have no neighbour there and keep the pad.
  The op then runs on that local tensor and produces exactly its output rows. An
  insert_slice of the image into a filled tensor (how torch-mlir pads a gradient) is the
  same pad. Should a user want the padded tensor otherwise (a conv pinned replicated),
  the pad's interface moves it (`reshard_result`: cores gathered, then padded), since
  the planner would read the layout as an ordinary halo one.

  The split is possible when, with H the unpadded size, N the shards, s the stride,
  Keff = (K-1)*dilation + 1 the kernel's extent and low/high the padding:
  H % N == 0, Lx % s == 0, the output has H/s rows (-s <= low + high - Keff < 0:
  "same"-style padding, or Keff <= s without padding), low, high <= Lx (halos come
  from the direct neighbours only). Propagation does not split a window dimension
  where this fails (the input is gathered along it, the fallback); a program annotated
  that way gets one located error from shard-partition.
* A window dimension may instead follow its kernel loop: in a weight gradient (the
  training import's conv of the padded input with the output gradient as its "kernel")
  the image rows are the kernel loop, a reduction. Rank r sums kernel positions
  [r*Lk, (r+1)*Lk) and reads padded rows from r*Lk*dilation on: its own rows when
  Lk*dilation == Lx, plus the same halos; the partial gradients are summed by
  `shard.all_reduce`. A split follows the output loop where it can, else the kernel loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from weakref import WeakKeyDictionary

from xdsl.dialects import tensor
from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import FillOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)

from shardc.dialects.shard import (
    DYNAMIC,
    Sharding,
    ShardOp,
    UpdateHaloOp,
    collective_group_size,
)
from shardc.interfaces.linalg import StructuredOpSharding, partition_structured
from shardc.interfaces.sharding import (
    Partitioner,
    ShardingInfo,
    ShardingOption,
    cached_lookup_grid,
    clone_op,
    describe_sharding,
    get_sharding_interface,
    indexing_maps,
    insert_operand_annotation,
    insert_result_annotation,
    load_models,
    loop_iterator_types,
    register_sharding_interface,
    remove_trailing_empty_sub_arrays,
    type_text,
)
from shardc.interfaces.tensor import DimensionPreservingSharding
from shardc.ir import diagnostics
from shardc.ir.linalg_build import fill_op
from shardc.ir.op_build import tensor_empty
from shardc.ir.types import tensor_type


@dataclass(frozen=True)
class Window:
    """Dimension `dim` of operand `operand` reads `stride * out_loop + dilation * kernel_loop`."""

    operand: int
    dim: int
    out_loop: int
    kernel_loop: int
    stride: int
    dilation: int


def _linear_terms(expr: AffineExpr) -> dict[int, int] | None:
    """{loop: coefficient} of a sum of `c * d_i` terms (None for anything else)."""
    if isinstance(expr, AffineDimExpr):
        return {expr.position: 1}
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Mul:
        for dim, const in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            if isinstance(dim, AffineDimExpr) and isinstance(const, AffineConstantExpr):
                return {dim.position: const.value}
        return None
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add:
        lhs, rhs = _linear_terms(expr.lhs), _linear_terms(expr.rhs)
        if lhs is None or rhs is None or lhs.keys() & rhs.keys():
            return None
        return {**lhs, **rhs}
    return None


@lru_cache(maxsize=1024)
def _find_windows(
    maps: tuple[AffineMap, ...], loops: tuple[IteratorType, ...]
) -> tuple[Window, ...]:
    found: list[Window] = []
    for operand, map_ in enumerate(maps):
        for dim, expr in enumerate(map_.results):
            terms = _linear_terms(expr) if isinstance(expr, AffineBinaryOpExpr) else None
            if terms is None or len(terms) != 2:
                continue
            (a, ca), (b, cb) = terms.items()
            if a >= len(loops) or b >= len(loops):
                continue
            if loops[a] == IteratorType.REDUCTION:
                a, ca, b, cb = b, cb, a, ca
            if loops[a] == IteratorType.PARALLEL and loops[b] == IteratorType.REDUCTION and ca > 0 and cb > 0:
                found.append(Window(operand, dim, a, b, ca, cb))
    return tuple(found)


_WINDOWS: WeakKeyDictionary[Operation, tuple[Window, ...]] = WeakKeyDictionary()
"""`windows` per op: every structured op asks, several times per pass, and an op's maps
(strides and dilations included) do not change while it lives."""


def windows(impl: StructuredOpSharding, op: Operation) -> tuple[Window, ...]:
    """The window dimensions of `op`'s operands (none: not a convolution or pooling)."""
    found = _WINDOWS.get(op)
    if found is None:
        maps = indexing_maps(impl, op)[: len(op.operands)]
        if all(map_.is_projected_permutation() for map_ in maps):
            found = ()
        else:
            found = _find_windows(tuple(maps), tuple(loop_iterator_types(impl, op)))
        _WINDOWS[op] = found
    return found


def _shape(value: SSAValue) -> tuple[int, ...]:
    t = value.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def _loop_size(impl: StructuredOpSharding, op: Operation, loop: int) -> int:
    """Size of `loop`, read from a tensor dimension that it indexes alone."""
    for map_, value in zip(indexing_maps(impl, op), (*op.operands, *op.results)):
        for expr, size in zip(map_.results, _shape(value)):
            if isinstance(expr, AffineDimExpr) and expr.position == loop and size != DYNAMIC:
                return size
    return DYNAMIC


def _source(value: SSAValue) -> SSAValue:
    """`value` before the `shard.shard` annotations it goes through."""
    while isinstance(value.owner, ShardOp):
        value = value.owner.src
    return value


def _static_pads(op: tensor.PadOp) -> tuple[list[int], list[int]] | None:
    if op.low or op.high:
        return None
    low = op.properties["static_low"].get_values()  # type: ignore[attr-defined]
    high = op.properties["static_high"].get_values()  # type: ignore[attr-defined]
    return list(low), list(high)


def _fill_of(value: SSAValue) -> FillOp | None:
    owner = _source(value).owner
    return owner if isinstance(owner, FillOp) else None


def _insert_pads(op: tensor.InsertSliceOp) -> tuple[list[int], list[int]] | None:
    """An insert_slice of a whole tensor into a filled one, unit strides, static: a pad
    (torch-mlir pads a gradient so before its convolution)."""
    if op.offsets or op.sizes or op.strides or _fill_of(op.dest) is None:
        return None
    props = op.properties
    offsets = list(props["static_offsets"].get_values())  # type: ignore[attr-defined]
    sizes = list(props["static_sizes"].get_values())  # type: ignore[attr-defined]
    strides = list(props["static_strides"].get_values())  # type: ignore[attr-defined]
    source, dest = _shape(op.source), _shape(op.dest)
    if any(st != 1 for st in strides) or tuple(sizes) != source or len(source) != len(dest):
        return None
    return offsets, [d - o - n for d, o, n in zip(dest, offsets, sizes)]


def pads_of(op: Operation) -> tuple[list[int], list[int]] | None:
    """(low, high) of a static `tensor.pad`, or of an insert_slice that pads; None for
    any other op."""
    if isinstance(op, tensor.PadOp):
        return _static_pads(op)
    if isinstance(op, tensor.InsertSliceOp):
        return _insert_pads(op)
    return None


def padding_of(value: SSAValue, dim: int) -> tuple[int, int]:
    """(low, high) padding of `dim` when `value` is (through annotations) a static pad
    (`pads_of`); (0, 0) otherwise."""
    owner = _source(value).owner
    pads = pads_of(owner) if isinstance(owner, Operation) else None
    if pads is not None and dim < len(pads[0]):
        return pads[0][dim], pads[1][dim]
    return 0, 0


def window_split_problem(
    impl: StructuredOpSharding, op: Operation, window: Window, shards: int | None, loop: int | None = None
) -> str | None:
    """Why `window`'s dimension cannot be split into `shards` with halos along `loop`,
    its output loop (the default) or its kernel loop (None: it can; see the module
    docstring for the conditions)."""
    if shards is None:
        return "the grid axes have a dynamic size"
    size = _shape(op.operands[window.operand])[window.dim]
    kernel = _loop_size(impl, op, window.kernel_loop)
    out = _loop_size(impl, op, window.out_loop)
    if DYNAMIC in (size, kernel, out):
        return "its sizes are dynamic"
    low, high = padding_of(op.operands[window.operand], window.dim)
    rows = size - low - high
    s, d = window.stride, window.dilation
    extent = (kernel - 1) * d + 1
    if rows % shards:
        return f"its {rows} rows do not split evenly into {shards} shards"
    local = rows // shards
    if low > local or high > local:
        return f"the padding ({low}, {high}) is wider than a shard's {local} rows"
    if loop == window.kernel_loop:
        # A reduction over the image (a weight gradient): rank r sums kernel positions
        # [r*Lk, (r+1)*Lk), reading padded rows from r*Lk*d on.
        if kernel % shards:
            return f"the kernel loop's {kernel} positions do not split evenly into {shards} shards"
        part = kernel // shards
        if part * d != local:
            return (
                f"each shard's {part} kernel positions (dilation {d}) do not cover its "
                f"{local} rows"
            )
        if (out - 1) * s + (part - 1) * d + 1 > local + low + high:
            return f"the windows read past a shard's {local} rows and its halos"
        return None
    if local % s:
        return f"each shard's {local} rows are not a multiple of the stride {s}"
    if out * s != rows:
        return (
            f"the output's {out} rows are not the input's {rows} rows divided by the stride "
            f"{s} (kernel extent {extent}, padding {low}+{high}): shards of the output would "
            "not start where the input's shards start"
        )
    if (out // shards - 1) * s + extent > local + low + high:
        return f"the windows read past a shard's {local} rows and its halos"
    return None


def split_loop(
    impl: StructuredOpSharding, op: Operation, window: Window, shards: int | None
) -> int | None:
    """The loop a split of `window`'s dimension into `shards` follows: the output loop
    where it can, else the kernel loop (a weight gradient); None: neither can."""
    for loop in (window.out_loop, window.kernel_loop):
        if window_split_problem(impl, op, window, shards, loop) is None:
            return loop
    return None


def _shards(op: Operation, grid: str | None, axes: Sequence[int]) -> int | None:
    found = cached_lookup_grid(op, grid) if grid is not None else None
    if found is None:
        return None
    return collective_group_size(axes, found.shape_tuple)


def _with_halos(info: ShardingInfo | None, halos: dict[int, tuple[int, int]]) -> ShardingInfo | None:
    """`info` with halo sizes `halos[dim]` on its split dimensions (zero elsewhere)."""
    if info is None:
        return None
    sizes: list[int] = []
    for dim, axes in enumerate(info.split_axes):
        if axes:
            sizes.extend(halos.get(dim, (0, 0)))
    if not any(sizes):
        return info
    sharding = Sharding(info.grid, info.split_axes, tuple(sizes))
    return ShardingInfo(sharding, info.split_axes)


class ConvSharding(StructuredOpSharding):
    """Structured ops with window dimensions (the module docstring); others as their
    base class."""

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        found = windows(self, op)
        if not found:
            return super().get_sharding_option(op, operand_shardings, result_shardings)
        loops = loop_iterator_types(self, op)
        maps = indexing_maps(self, op)
        n = len(op.operands)
        by_dim = {(w.operand, w.dim): w for w in found}
        option = ShardingOption([[] for _ in loops])
        given = [*operand_shardings, *result_shardings]
        if all(s is None for s in given):
            return ShardingOption.make_empty()

        def fill(loop: int, axes: Sequence[int], grid: str) -> bool:
            if option.grid is not None and option.grid != grid:
                return False
            option.grid = grid
            current = option.sharding_array[loop]
            if current and current != list(axes):
                return False
            if any(a in other for i, other in enumerate(option.sharding_array) if i != loop for a in axes):
                return False
            current[:] = axes
            return True

        deferred: list[tuple[Window, Sequence[int], str]] = []
        for index, sharding in enumerate(given):
            if sharding is None:
                continue
            if option.grid is None:
                option.grid = sharding.grid
            for dim, (expr, axes) in enumerate(zip(maps[index].results, sharding.split_axes)):
                if not axes:
                    continue
                if isinstance(expr, AffineDimExpr):
                    if not fill(expr.position, axes, sharding.grid):
                        return None
                elif index < n and (index, dim) in by_dim:
                    deferred.append((by_dim[(index, dim)], axes, sharding.grid))
                else:
                    return None  # a fixed or compound index cannot be split
        # A split window dimension follows its output loop where it can, else its kernel
        # loop (a weight gradient), unless another operand already said which; else it
        # stays whole (the input is gathered along it).
        for w, axes, grid in deferred:
            array = option.sharding_array
            if array[w.out_loop] == list(axes) or array[w.kernel_loop] == list(axes):
                continue
            loop = split_loop(self, op, w, _shards(op, grid, axes))
            if loop is not None:
                fill(loop, axes, grid)
        self._drop_impossible(op, option)
        remove_trailing_empty_sub_arrays(option.sharding_array)
        return option

    def _drop_impossible(self, op: Operation, option: ShardingOption) -> None:
        """Leave whole the kernel loops and the output loops of windows that cannot be
        split with halos (their input is then gathered along that dimension)."""
        array = option.sharding_array
        for w in windows(self, op):
            if array[w.out_loop] and array[w.kernel_loop]:
                array[w.kernel_loop].clear()
            for loop in (w.out_loop, w.kernel_loop):
                if array[loop]:
                    shards = _shards(op, option.grid, array[loop])
                    if window_split_problem(self, op, w, shards, loop) is not None:
                        array[loop].clear()
        if not super().allows_option(op, option):
            loops = loop_iterator_types(self, op)
            for t, axes in zip(loops, array):
                if t == IteratorType.REDUCTION:
                    axes.clear()

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        if not super().allows_option(op, option):
            return False
        array = option.sharding_array
        for w in windows(self, op):
            split = [loop for loop in (w.out_loop, w.kernel_loop) if loop < len(array) and array[loop]]
            if len(split) > 1:
                return False
            for loop in split:
                shards = _shards(op, option.grid, array[loop])
                if window_split_problem(self, op, w, shards, loop) is not None:
                    return False
        return True

    def annotations_follow_signature(self, op: Operation) -> bool:
        return not windows(self, op)  # halos read the padding of the input's producer

    def get_sharding_annotations(
        self, op: Operation, option: ShardingOption
    ) -> list[ShardingInfo | None] | None:
        """The structured op's shardings; a split window dimension of an input carries
        its padding as halos (none without a tensor.pad)."""
        shardings = super().get_sharding_annotations(op, option)
        found = windows(self, op)
        if shardings is None or not found:
            return shardings
        halos: dict[int, dict[int, tuple[int, int]]] = {}
        array = option.sharding_array
        for w in found:
            if any(loop < len(array) and array[loop] for loop in (w.out_loop, w.kernel_loop)):
                pads = padding_of(op.operands[w.operand], w.dim)
                halos.setdefault(w.operand, {})[w.dim] = pads
        for operand, dims in halos.items():
            shardings[operand] = _with_halos(shardings[operand], dims)
        return shardings

    def add_sharding_annotations(self, op: Operation, option: ShardingOption) -> bool:
        if not windows(self, op):
            return super().add_sharding_annotations(op, option)
        shardings = self.get_sharding_annotations(op, option)
        if shardings is None:
            return False
        n = len(op.operands)
        for i, result in enumerate(op.results):
            sharding = shardings[n + i]
            assert sharding is not None
            insert_result_annotation(sharding, result)
        for i in range(n):
            insert_operand_annotation(shardings[i], op, i)
        return True

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        found = windows(self, op)
        if not found:
            super().partition(op, operands, operand_shardings, result_shardings, partitioner)
            return
        maps = indexing_maps(self, op)
        loop_axes: dict[int, tuple[int, ...]] = {}
        for map_, sharding in zip(maps, operand_shardings):
            if sharding is None:
                continue
            for expr, axes in zip(map_.results, sharding.split_axes):
                if isinstance(expr, AffineDimExpr) and axes:
                    loop_axes.setdefault(expr.position, tuple(axes))
        for w in found:
            sharding = operand_shardings[w.operand]
            axes = tuple(sharding.split_axes[w.dim]) if sharding is not None and w.dim < len(sharding.split_axes) else ()
            what = f"dimension {w.dim} of operand #{w.operand}"
            if loop_axes.get(w.out_loop) and loop_axes.get(w.kernel_loop):
                raise diagnostics.error(
                    op,
                    f"Cannot partition: both loops of the window of {what} are split "
                    f"(output loop {w.out_loop} and kernel loop {w.kernel_loop})",
                )
            loop = w.kernel_loop if loop_axes.get(w.kernel_loop) else w.out_loop
            wanted = loop_axes.get(loop, ())
            if axes != wanted:
                raise diagnostics.error(
                    op,
                    f"Cannot partition: {what} (a window: stride {w.stride}, dilation "
                    f"{w.dilation}) is split over grid axes {list(axes)} but its "
                    f"{'kernel' if loop == w.kernel_loop else 'output'} loop {loop} over "
                    f"{list(wanted)}",
                )
            if not axes:
                continue
            assert sharding is not None
            grid = partitioner.grid(op, sharding.grid)
            shards = collective_group_size(axes, grid.shape_tuple)
            problem = window_split_problem(self, op, w, shards, loop)
            if problem is not None:
                raise diagnostics.error(
                    op,
                    f"Cannot partition: {what} of type "
                    f"{type_text(op.operands[w.operand].type)} cannot be split over grid "
                    f"axes {list(axes)} with halos: {problem}",
                )
            low, high = padding_of(op.operands[w.operand], w.dim)
            ordinal = sum(1 for sub in sharding.split_axes[: w.dim] if sub)
            halos = sharding.static_halo_sizes
            got = tuple(halos[2 * ordinal : 2 * ordinal + 2]) if halos else (0, 0)
            if got != (low, high):
                raise diagnostics.error(
                    op,
                    f"Cannot partition: {what} has sharding {describe_sharding(sharding)}; "
                    f"its window needs halo sizes ({low}, {high}) there (the padding of "
                    "the pad that produces it, or none)",
                )
        partition_structured(
            self, op, operands, operand_shardings, result_shardings, partitioner,
            windows_checked=True,
        )


# =========================================================================================
# tensor.pad before a window
# =========================================================================================


def _window_users(value: SSAValue) -> list[tuple[Operation, int]]:
    """(op, operand index) of the uses of `value`, through `shard.shard` annotations."""
    found: list[tuple[Operation, int]] = []
    for use in value.uses:
        if isinstance(use.operation, ShardOp):
            found.extend(_window_users(use.operation.result))
        else:
            found.append((use.operation, use.index))
    return found


def _feeds_windows(op: tensor.PadOp, dim: int, shards: int | None) -> bool:
    """Whether every user of the pad's result reads `dim` as a window that can be split
    into `shards` with halos."""
    users = _window_users(op.results[0])
    if not users:
        return False
    for user, index in users:
        impl = get_sharding_interface(user)
        if not isinstance(impl, ConvSharding):
            return False
        found = [w for w in windows(impl, user) if w.operand == index and w.dim == dim]
        if not found or split_loop(impl, user, found[0], shards) is None:
            return False
    return True


class PadSharding(DimensionPreservingSharding):
    """tensor.pad, and tensor.insert_slice into a filled tensor (`pads_of`): tensor.py's
    model, plus padded dimensions split with halos when every user reads them as
    windows that can be split (module docstring). An insert_slice's filled destination
    is then read whole (a fill: nothing moves); each rank pads its own shard."""

    def _padded(self, op: Operation) -> tuple[list[int], list[int]] | None:
        return pads_of(op)

    def _emit_pad(
        self, op: Operation, value: SSAValue, low: list[int], high: list[int], partitioner: Partitioner
    ) -> SSAValue:
        """`value` padded by `low`/`high` with the op's pad value, on the local side."""
        element = op.results[0].type.get_element_type()  # type: ignore[attr-defined]
        shape = [size + lo + hi for size, lo, hi in zip(_shape(value), low, high)]
        type_ = tensor_type(element, shape)
        if isinstance(op, tensor.PadOp):
            mapping = dict(partitioner.mapping)
            mapping[op.source] = value
            padded = clone_op(op, mapping, [type_])
            padded.properties["static_low"] = DenseArrayBase.from_list(i64, low)
            padded.properties["static_high"] = DenseArrayBase.from_list(i64, high)
            return partitioner.insert(padded).results[0]
        assert isinstance(op, tensor.InsertSliceOp)
        fill = _fill_of(op.dest)
        assert fill is not None
        empty = partitioner.insert(tensor_empty([], type_))
        filled = partitioner.insert(fill_op([partitioner.local(fill.inputs[0])], [empty.tensor], [type_]))
        inserted = tensor.InsertSliceOp.from_static_parameters(value, filled.results[0], low, list(_shape(value)))
        return partitioner.insert(inserted).result

    def splittable_loops(self, op: Operation) -> set[int]:
        whole = super().splittable_loops(op)
        pads = self._padded(op)
        if pads is None:
            return whole
        # Which padded dims may split depends on the shard count: `allows_option` and
        # `get_sharding_option` check that; here every padded dim is a candidate.
        return whole | {d for d, (lo, hi) in enumerate(zip(*pads)) if lo or hi}

    def _halo_dims(self, op: Operation, option: ShardingOption) -> dict[int, tuple[int, int]] | None:
        """Halos of the split padded dims (None: some cannot be split so)."""
        pads = self._padded(op)
        whole = super().splittable_loops(op)
        halos: dict[int, tuple[int, int]] = {}
        for dim, axes in enumerate(option.sharding_array):
            if not axes or dim in whole:
                continue
            if pads is None:
                return None
            if not _feeds_windows(op, dim, _shards(op, option.grid, axes)):
                return None
            halos[dim] = (pads[0][dim], pads[1][dim])
        return halos

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        option = super().get_sharding_option(op, operand_shardings, result_shardings)
        if option is None or option.empty or self._halo_dims(op, option) is not None:
            return option
        whole = super().splittable_loops(op)
        for dim, axes in enumerate(option.sharding_array):
            if dim not in whole:
                axes.clear()
        return option

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        return super().allows_option(op, option) and self._halo_dims(op, option) is not None

    def get_sharding_annotations(
        self, op: Operation, option: ShardingOption
    ) -> list[ShardingInfo | None] | None:
        shardings = super().get_sharding_annotations(op, option)
        halos = self._halo_dims(op, option)
        if shardings is None or not halos:
            return shardings
        shardings[-1] = _with_halos(shardings[-1], halos)
        if isinstance(op, tensor.InsertSliceOp) and option.grid is not None:
            shardings[1] = ShardingInfo.get(option.grid, [])
        return shardings

    def add_sharding_annotations(self, op: Operation, option: ShardingOption) -> bool:
        shardings = self.get_sharding_annotations(op, option)
        if shardings is None:
            return False
        n = len(op.operands)
        result = shardings[n]
        assert result is not None
        insert_result_annotation(result, op.results[0])
        for i in range(n):
            insert_operand_annotation(shardings[i], op, i)
        return True

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        (sharding,) = result_shardings
        pads = self._padded(op)
        whole = super().splittable_loops(op)
        split = [] if sharding is None else [d for d, axes in enumerate(sharding.split_axes) if axes and d not in whole]
        if not split:
            super().partition(op, operands, operand_shardings, result_shardings, partitioner)
            return
        assert sharding is not None and pads is not None
        source = operand_shardings[0]
        if source is None or source.split_axes != sharding.split_axes or source.static_halo_sizes:
            raise diagnostics.error(
                op,
                "Cannot partition: a pad split along a padded dimension needs its source "
                "split the same way, without halos",
            )
        ordinals = [d for d, axes in enumerate(sharding.split_axes) if axes]
        halos = sharding.static_halo_sizes
        for dim in split:
            k = ordinals.index(dim)
            got = tuple(halos[2 * k : 2 * k + 2]) if halos else (0, 0)
            if got != (pads[0][dim], pads[1][dim]):
                raise diagnostics.error(
                    op,
                    f"Cannot partition: the result's sharding {describe_sharding(sharding)} "
                    f"splits padded dimension {dim}; it needs halo sizes "
                    f"({pads[0][dim]}, {pads[1][dim]}) there, the padding",
                )
            if not _feeds_windows(op, dim, _shards(op, sharding.grid, sharding.split_axes[dim])):
                raise diagnostics.error(
                    op,
                    f"Cannot partition: padded dimension {dim} is split, but not every user "
                    "reads it as a convolution or pooling window that can be split with halos",
                )
        padded = self._emit_pad(op, operands[0], pads[0], pads[1], partitioner)
        halo = UpdateHaloOp(
            padded,
            sharding.grid,
            sharding.split_axes,
            list(sharding.static_halo_sizes) or [0, 0] * len(ordinals),
        )
        halo.location = op.location
        partitioner.insert(halo)
        partitioner.mapping[op.results[0]] = halo.result


    def reshard_result(
        self,
        op: Operation,
        source: Sharding,
        target: Sharding,
        local: SSAValue,
        partitioner: Partitioner,
        reshard: Callable[[Sharding, Sharding, Attribute, SSAValue], SSAValue],
    ) -> SSAValue | None:
        """The result split with halos in its source's frame, for a user that wants it
        otherwise (the fallback): each rank's core rows gathered along the padded split
        dimensions, padded there as the op pads, then the planner's resharding."""
        pads = self._padded(op)
        whole = super().splittable_loops(op)
        split = [d for d, axes in enumerate(source.split_axes) if axes and d not in whole]
        if not split or pads is None:
            return None
        local_shape = list(_shape(local))
        offsets, sizes = [0] * len(local_shape), list(local_shape)
        for dim in split:
            offsets[dim] = pads[0][dim]
            sizes[dim] -= pads[0][dim] + pads[1][dim]
        core = partitioner.insert(tensor.ExtractSliceOp.from_static_parameters(local, offsets, sizes)).result
        element = op.results[0].type.get_element_type()  # type: ignore[attr-defined]
        global_shape = list(_shape(op.results[0]))
        source_shape = [s - (pads[0][d] + pads[1][d] if d in split else 0) for d, s in enumerate(global_shape)]
        plain = Sharding(source.grid, source.split_axes)
        whole_split = Sharding(source.grid, [() if d in split else tuple(a) for d, a in enumerate(source.split_axes)])
        gathered = reshard(plain, whole_split, tensor_type(element, source_shape), core)
        low = [pads[0][d] if d in split else 0 for d in range(len(global_shape))]
        high = [pads[1][d] if d in split else 0 for d in range(len(global_shape))]
        padded = self._emit_pad(op, gathered, low, high, partitioner)
        return reshard(whole_split, target, op.results[0].type, padded)


def register() -> None:
    # Both dialects' own models first (each loads this module too: a tensor.pad may be
    # looked up before any linalg op, or after), then ours over theirs.
    load_models("linalg")
    load_models("tensor")
    # Every structured op: a conv or pooling op of any class (xDSL's, or a dialect
    # overlay's), a generic with window maps; the others behave as StructuredOpSharding.
    register_sharding_interface(LinalgStructuredOperation, ConvSharding())
    pad = PadSharding()
    register_sharding_interface(tensor.PadOp, pad)
    register_sharding_interface(tensor.InsertSliceOp, pad)
