"""MLIR's `shard` dialect, all 22 ops of trunk `ShardOps.td`, as shardc's own xDSL dialect.

Syntax, property names and diagnostics follow upstream MLIR, so mlir-opt and shardc-opt
read each other's output. Verifier messages are MLIR's text after `error: `; checks that
MLIR runs in `verifySymbolUses` (those needing the grid) run last in `verify_`.

Conventions of the Python helpers:
- a grid shape is a tuple whose dynamic (`?`) dimensions are `None`
  (`GridOp.shape_tuple`); raw attribute values use `DYNAMIC` (i64 min) as MLIR does;
- split axes are a tuple of tuples of grid axes, one inner tuple per tensor dimension;
- `Sharding` is a hashable value view of a `shard.sharding` op with MLIR's equality.

Rewrite patterns live in `shard_canonicalization.py`.
Parts adapted in form from xDSL's `xdsl/dialects/shard.py` (Apache-2.0).
"""

from __future__ import annotations

from functools import lru_cache

from abc import ABC
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import auto
from math import prod
from typing import Any, ClassVar, NoReturn, Self, TypeAlias

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    I16,
    I64,
    ArrayAttr,
    DenseArrayBase,
    FlatSymbolRefAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    UnrankedTensorType,
    i16,
    i32,
    i64,
)
from xdsl.dialects.utils import DynamicIndexList, EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    OpaqueSyntaxAttribute,
    Operation,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    IRDLOperationInvT,
    OptPropertyDef,
    VarConstraint,
    irdl_attr_definition,
    operand_def,
    opt_attr_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl.constraints import EqAttrConstraint, VerificationContext
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    TypeDirective,
    ParsingState,
    PrintingState,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasCanonicalizationPatternsTrait, Pure, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.lexer import Span
from xdsl.utils.str_enum import StrEnum

from shardc.ir import diagnostics
from shardc.ir.traits import has_trait, is_instance
from shardc.ir.diagnostics import Severity
from shardc.ir.locations import file_loc
from shardc.ir.op_init import fast_accessors, init_op

DYNAMIC = DYNAMIC_INDEX
"""MLIR's `ShapedType::kDynamic` (i64 min): a `?` in shapes and in static/dynamic lists."""

# =========================================================================================
# Types and attributes
# =========================================================================================

GridAxesAttr: TypeAlias = DenseArrayBase[I16]
"""A list of grid axes (`array<i16: ...>`), MLIR's `Shard_GridAxesAttr`."""


# Attributes are immutable and passes build the same few over and over (propagation makes
# thousands of shardings): building and verifying one costs far more than a cache lookup.


@lru_cache(maxsize=4096)
def _grid_axes(axes: tuple[int, ...]) -> GridAxesAttr:
    return DenseArrayBase.from_list(i16, axes)


@lru_cache(maxsize=4096)
def _i64_array(values: tuple[int, ...]) -> DenseArrayBase[I64]:
    return DenseArrayBase.from_list(i64, values)


def grid_axes_attr(axes: Iterable[int] = ()) -> GridAxesAttr:
    return _grid_axes(tuple(axes))


def i64_array(values: Iterable[int] = ()) -> DenseArrayBase[I64]:
    return _i64_array(tuple(values))


@lru_cache(maxsize=4096)
def _symbol_ref(name: str) -> SymbolRefAttr:
    return SymbolRefAttr(name)


def array_values(attr: DenseArrayBase) -> tuple[int, ...]:
    """`attr.get_values()`, unpacked once per attribute object (attributes are immutable;
    the tuple is kept in the instance, outside its dataclass fields, so equality, hashing
    and printing are unchanged)."""
    cached = attr.__dict__.get("_shardc_values")
    if cached is None:
        cached = attr.get_values()
        object.__setattr__(attr, "_shardc_values", cached)
    return cached  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def _split_axes_attr(axes: tuple[tuple[int, ...], ...]) -> GridAxesArrayAttr:
    return GridAxesArrayAttr(axes)


@irdl_attr_definition
class GridAxesArrayAttr(ParametrizedAttribute, OpaqueSyntaxAttribute):
    """Per tensor dimension, the grid axes it is split along: `#shard<axisarray[[0], []]>`."""

    name = "shard.axisarray"

    axes: ArrayAttr[GridAxesAttr]

    def __init__(self, axes: Iterable[Iterable[int]] | ArrayAttr[GridAxesAttr]):
        if not isinstance(axes, ArrayAttr):
            axes = ArrayAttr(grid_axes_attr(sub) for sub in axes)
        # MLIR's syntax has at least one sub-array: a replicated value is `[[]]`; only a
        # 0-d value's sharding is `[]` (see `for_scalar`).
        super().__init__(axes if axes.data else ArrayAttr((grid_axes_attr(),)))

    @classmethod
    def for_scalar(cls) -> GridAxesArrayAttr:
        """`[]`: what trunk's propagation gives a 0-d tensor (no dimension to split), and
        prints; mlir-opt does not read it back, shardc does."""
        return cls.new((ArrayAttr(()),))

    def as_tuple(self) -> tuple[tuple[int, ...], ...]:
        cached = self.__dict__.get("_shardc_tuple")
        if cached is None:
            cached = tuple(array_values(sub) for sub in self.axes.data)
            object.__setattr__(self, "_shardc_tuple", cached)
        return cached

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        return (ArrayAttr(_parse_split_axes(parser, "")),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(
            "[" + ", ".join("[" + ", ".join(map(str, sub)) + "]" for sub in self.as_tuple()) + "]"
        )


class ReductionKind(StrEnum):
    """How partial values are combined (MLIR's `Shard_ReductionKind`)."""

    SUM = auto()
    MAX = auto()
    MIN = auto()
    PRODUCT = auto()
    AVERAGE = auto()
    BITWISE_AND = auto()
    BITWISE_OR = auto()
    BITWISE_XOR = auto()
    GENERIC = auto()


@irdl_attr_definition
class ReductionKindAttr(EnumAttribute[ReductionKind], OpaqueSyntaxAttribute):
    """`#shard<partial max>`; bare in op syntax, where mlir-opt prints it after two spaces
    (`reduction =  max`): its parameter printer starts with the space, as MLIR's does."""

    name = "shard.partial"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(" ")
        super().print_parameter(printer)


@irdl_attr_definition
class ShardingType(ParametrizedAttribute, TypeAttribute):
    """`!shard.sharding`: the value a `shard.sharding` op defines."""

    name = "shard.sharding"


SUM = ReductionKindAttr(ReductionKind.SUM)

# =========================================================================================
# Python conveniences: grid lookup, shape arithmetic, the Sharding value
# =========================================================================================


def _symbol_name(symbol: str | StringAttr | SymbolRefAttr) -> str:
    if isinstance(symbol, SymbolRefAttr):
        return symbol.string_value()
    return symbol.data if isinstance(symbol, StringAttr) else symbol


def lookup_grid(op: Operation, symbol: str | StringAttr | SymbolRefAttr) -> GridOp | None:
    """The `shard.grid` named `symbol` in the symbol table nearest to `op` (or None),
    like MLIR's `getGridOrNull` (`lookupNearestSymbolFrom`)."""
    anchor: Operation | None = op
    while anchor is not None and not has_trait(anchor, SymbolTable):
        anchor = anchor.parent_op()
    if anchor is None:
        return None
    name = symbol if isinstance(symbol, SymbolRefAttr) else SymbolRefAttr(_symbol_name(symbol))
    found = SymbolTable.lookup_symbol(anchor, name)
    return found if isinstance(found, GridOp) else None


def collective_group_size(axes: Iterable[int], grid_shape: Sequence[int | None]) -> int | None:
    """Processes in each group induced by `axes` (None if any of them is dynamic)."""
    sizes: list[int] = []
    for axis in axes:
        size = grid_shape[axis]
        if size is None or size == DYNAMIC:
            return None
        sizes.append(size)
    return prod(sizes)


def shard_dimension(size: int | None, shards: int | None) -> int | None:
    """Local size of a tensor dimension of `size` split evenly in `shards` (None: dynamic)."""
    if size is None or shards is None or size == DYNAMIC or shards == DYNAMIC:
        return None
    return size // shards


_SHARDINGS: dict[tuple[int, int, int, int], tuple[tuple[Attribute | None, ...], Sharding]] = {}
_GRID_SHAPES: dict[int, tuple[Attribute, tuple[int | None, ...]]] = {}
"""`GridOp.shape_tuple` by the id of the shape attribute (kept alive by its entry)."""


@dataclass(frozen=True)
class Sharding:
    """A value view of a `shard.sharding` op, hashable, with MLIR's `Sharding::operator==`:
    same grid, same split axes up to trailing empty ones, same static and dynamic halo
    sizes and sharded-dims offsets (dynamic values compared by identity)."""

    grid: str
    split_axes: tuple[tuple[int, ...], ...] = ()
    static_halo_sizes: tuple[int, ...] = ()
    static_sharded_dims_offsets: tuple[int, ...] = ()
    dynamic_halo_sizes: tuple[SSAValue, ...] = ()
    dynamic_sharded_dims_offsets: tuple[SSAValue, ...] = ()

    def __post_init__(self):
        axes = tuple(tuple(sub) for sub in self.split_axes)
        while axes and not axes[-1]:
            axes = axes[:-1]
        object.__setattr__(self, "split_axes", axes)

    @staticmethod
    def of(value: SSAValue | ShardingOp) -> Sharding:
        """The sharding a `shard.sharding` op (or its result) defines."""
        op = value if is_instance(value, ShardingOp) else value.owner
        if not is_instance(op, ShardingOp):
            raise ValueError("expected a value defined by shard.sharding")
        if op._operands:  # pyright: ignore[reportPrivateUsage]
            return Sharding._of(op)
        # Without dynamic entries the sharding is a function of the op's four
        # properties, which the passes share between ops: remembered by their identity
        # (the entry keeps them alive, so an id is not reused while it is there).
        props = op.properties
        attrs = (
            props.get("grid"),
            props.get("split_axes"),
            props.get("static_halo_sizes"),
            props.get("static_sharded_dims_offsets"),
        )
        key = (id(attrs[0]), id(attrs[1]), id(attrs[2]), id(attrs[3]))
        found = _SHARDINGS.get(key)
        if found is None:
            if len(_SHARDINGS) >= 4096:
                _SHARDINGS.clear()
            found = _SHARDINGS[key] = (attrs, Sharding._of(op))
        return found[1]

    @staticmethod
    def _of(op: ShardingOp) -> Sharding:
        if not op.split_axes.axes.data:
            return Sharding(op.grid.string_value())
        if op.operands:
            dynamic = (tuple(op.dynamic_halo_sizes), tuple(op.dynamic_sharded_dims_offsets))
        else:  # the common case: no segment sizes to read
            dynamic = ((), ())
        return Sharding(
            op.grid.string_value(),
            op.split_axes.as_tuple(),
            array_values(op.static_halo_sizes),
            array_values(op.static_sharded_dims_offsets),
            *dynamic,
        )

    @property
    def is_fully_replicated(self) -> bool:
        return not any(self.split_axes)

    def equal_split_axes(self, other: Sharding) -> bool:
        return self.grid == other.grid and self.split_axes == other.split_axes

    def equal_halo_and_shard_sizes(self, other: Sharding) -> bool:
        return (
            self.static_halo_sizes == other.static_halo_sizes
            and self.dynamic_halo_sizes == other.dynamic_halo_sizes
            and self.static_sharded_dims_offsets == other.static_sharded_dims_offsets
            and self.dynamic_sharded_dims_offsets == other.dynamic_sharded_dims_offsets
        )

    def to_op(self) -> ShardingOp:
        return ShardingOp(
            self.grid,
            self.split_axes or ((),),  # MLIR's syntax wants at least one sub-array
            halo_sizes=mixed_values(self.static_halo_sizes, self.dynamic_halo_sizes),
            sharded_dims_offsets=mixed_values(
                self.static_sharded_dims_offsets, self.dynamic_sharded_dims_offsets
            ),
        )

    def shard_shape(
        self, shape: Sequence[int], grid_shape: Sequence[int | None]
    ) -> tuple[int, ...]:
        """The local shape (DYNAMIC for unknown dims) of a tensor of global `shape`, as
        MLIR's `shardShapedType`; static halos and offsets are taken into account."""
        return shard_shape(
            shape,
            grid_shape,
            self.split_axes,
            self.static_sharded_dims_offsets,
            self.static_halo_sizes,
        )


def mixed_values(static: Sequence[int], dynamic: Sequence[SSAValue]) -> list[int | SSAValue]:
    """A static list with DYNAMIC markers and its dynamic values, merged in one list."""
    values = iter(dynamic)
    return [next(values) if s == DYNAMIC else s for s in static]


def shard_shape(
    shape: Sequence[int],
    grid_shape: Sequence[int | None],
    split_axes: Sequence[Sequence[int]],
    sharded_dims_offsets: Sequence[int] = (),
    halo_sizes: Sequence[int] = (),
) -> tuple[int, ...]:
    """Per-device shape of a tensor (DYNAMIC for unknown dims), MLIR's `shardShape`."""
    out = list(shape)
    if not out:
        return ()
    gshape = [DYNAMIC if s is None else s for s in grid_shape]
    if sharded_dims_offsets:
        pos = 1
        static_grid = DYNAMIC not in gshape
        for dim, axes in enumerate(split_axes):
            if not axes:
                continue
            size = sharded_dims_offsets[pos]
            same = static_grid
            if same:
                shards = sum(gshape[a] for a in axes)
                offs = sharded_dims_offsets[pos - 1 : pos + shards]
                same = all(b - a == size for a, b in zip(offs[1:], offs[2:]))
                pos += shards + 1
            out[dim] = size if same else DYNAMIC
        return tuple(out)
    for dim, axes in enumerate(split_axes):
        local = shard_dimension(shape[dim], collective_group_size(axes, gshape))
        out[dim] = DYNAMIC if local is None else local
    halo_dim = 0
    for dim, axes in enumerate(split_axes):
        if halo_sizes and out[dim] != DYNAMIC and axes:
            lo, hi = halo_sizes[2 * halo_dim], halo_sizes[2 * halo_dim + 1]
            if lo >= 0 and hi >= 0:
                out[dim] += lo + hi
                halo_dim += 1
            else:
                out[dim] = DYNAMIC
    return tuple(out)


# =========================================================================================
# Verification helpers: MLIR's message texts
# =========================================================================================


def _op_error(op: Operation, message: str) -> VerifyException:
    """MLIR's `emitOpError`: the message prefixed with `'<op name>' op `."""
    return VerifyException(f"'{op.name}' op {message}")


def _rank(t: Attribute) -> int | None:
    return len(t.get_shape()) if isinstance(t, TensorType | MemRefType) else None


def _is_ranked_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType)


def _is_non0_ranked_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType) and _rank(t) != 0


def _is_memref_or_ranked_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType | MemRefType)


def _is_non0_ranked_memref_or_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType | MemRefType) and _rank(t) != 0


TypeCheck: TypeAlias = tuple[Callable[[Attribute], bool], str]
"""A type predicate and MLIR's description of the types it accepts."""

RANKED_TENSOR: TypeCheck = (_is_ranked_tensor, "ranked tensor of any type values")
NON0_RANKED_TENSOR: TypeCheck = (_is_non0_ranked_tensor, "non-0-ranked.tensor of any type values")
MEMREF_OR_RANKED_TENSOR: TypeCheck = (
    _is_memref_or_ranked_tensor,
    "memref of any type values or ranked tensor of any type values",
)
NON0_MEMREF_OR_TENSOR: TypeCheck = (
    _is_non0_ranked_memref_or_tensor,
    "non-0-ranked.memref of any type values or non-0-ranked.tensor of any type values",
)


def _check_type(op: Operation, what: str, index: int, t: Attribute, check: TypeCheck) -> None:
    predicate, description = check
    if not predicate(t):
        raise _op_error(op, f"{what} #{index} must be {description}, but got '{t}'")


def _check_index_results(op: Operation, variadic: bool) -> None:
    for i, r in enumerate(op.results):
        if not isinstance(r.type, IndexType):
            what = "variadic of index" if variadic else "index"
            raise _op_error(op, f"result #{i} must be {what}, but got '{r.type}'")


def _shape(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, TensorType | MemRefType)
    return tuple(t.get_shape())


def _element_type(t: Attribute) -> Attribute:
    assert isinstance(t, TensorType | MemRefType)
    return t.get_element_type()


def _check_dim(expected: int, got: int, axis: int) -> None:
    if got != DYNAMIC and expected != got:
        raise VerifyException(
            f"Dimension size mismatch for result axis {axis}. Expected "
            f"{'dynamic' if expected == DYNAMIC else expected}, but got {got}."
        )


def _mul(a: int, b: int) -> int:
    return DYNAMIC if DYNAMIC in (a, b) else a * b


def _div(a: int, b: int) -> int:
    return DYNAMIC if DYNAMIC in (a, b) else a // b


def _group_size(axes: Sequence[int], grid: GridOp) -> int:
    size = collective_group_size(axes, grid.shape.get_values())
    return DYNAMIC if size is None else size


def _verify_grid_axes(axes: Sequence[int], grid: GridOp) -> None:
    if len(set(axes)) != len(axes):
        raise VerifyException("Grid axes contains duplicate elements.")
    rank = grid.rank
    for axis in axes:
        if not 0 <= axis < rank:
            raise VerifyException(
                f"0-based grid axis index {axis} is out of bounds. The referenced grid "
                f'"{grid.sym_name.data}" is of rank {rank}.'
            )


def _grid_or_error(op: Operation, symbol: FlatSymbolRefAttr) -> GridOp:
    grid = lookup_grid(op, symbol)
    if grid is None:
        raise VerifyException(f'Undefined required grid symbol "{symbol.string_value()}".')
    return grid


def _verify_in_group_device(
    name: str, device: Sequence[int], grid_axes: Sequence[int], grid: GridOp
) -> None:
    if len(device) != len(grid_axes):
        raise VerifyException(
            f'In-group device "{name}" has unexpected multi-index size {len(device)}. '
            f"Expected {len(grid_axes)}."
        )
    gshape = grid.shape.get_values()
    for i, (coord, axis) in enumerate(zip(device, grid_axes)):
        size = gshape[axis]
        if coord != DYNAMIC and size != DYNAMIC and size <= coord:
            raise VerifyException(
                f'Out of bounds coordinate {i} for in-group device "{name}". '
                f"Got {coord}, but expected value in the range [0, {size - 1}]."
            )


def _verify_gather_shapes(
    operand: Attribute, result: Attribute, axis: int, group_size: int
) -> None:
    rank = len(_shape(result))
    if not 0 <= axis < rank:
        raise VerifyException(f"Gather axis {axis} is out of bounds [0, {rank}).")
    for d, (in_size, out_size) in enumerate(zip(_shape(operand), _shape(result))):
        _check_dim(_mul(group_size, in_size) if d == axis else in_size, out_size, d)


def _check_axis(kind: str, axis: int, rank: int) -> None:
    # MLIR checks only the gather axis (and crashes on the others); same wording here.
    if not 0 <= axis < rank:
        raise VerifyException(f"{kind} axis {axis} is out of bounds [0, {rank}).")


def _verify_scatter_shapes(
    operand: Attribute, result: Attribute, axis: int, group_size: int, kind: str
) -> None:
    in_shape, out_shape = _shape(operand), _shape(result)
    _check_axis(kind, axis, len(out_shape))
    for d, (in_size, out_size) in enumerate(zip(in_shape, out_shape)):
        if d != axis:
            _check_dim(in_size, out_size, d)
    in_size = in_shape[axis]
    if DYNAMIC not in (in_size, group_size) and in_size % group_size:
        raise VerifyException(
            f"Operand dimension size {in_size} is not divisible by collective device "
            f"group size {group_size} for tensor axis {axis}."
        )
    _check_dim(_div(in_size, group_size), out_shape[axis], axis)


def _verify_all_to_all_shapes(
    operand: Attribute, result: Attribute, split: int, concat: int, group_size: int
) -> None:
    in_shape, out_shape = _shape(operand), _shape(result)
    _check_axis("Split", split, len(out_shape))
    _check_axis("Concat", concat, len(out_shape))
    for d, (in_size, out_size) in enumerate(zip(in_shape, out_shape)):
        if d not in (split, concat) or split == concat:
            _check_dim(in_size, out_size, d)
    if split == concat:
        return
    split_size = _div(in_shape[split], group_size)
    if split_size != DYNAMIC and in_shape[split] % group_size:
        split_size = DYNAMIC
    _check_dim(_mul(in_shape[concat], group_size), out_shape[concat], concat)
    _check_dim(split_size, out_shape[split], split)


@dataclass(frozen=True)
class _Defaults(EqAttrConstraint[Attribute]):
    """Infers `attr` for operands whose type the syntax omits, but accepts any type:
    `_check_defaulted_operands` reports a mismatch with MLIR's message."""

    def verify(self, attr: Attribute, constraint_context: VerificationContext) -> None:
        pass


INDEX = _Defaults(IndexType())
I64_VALUE = _Defaults(i64)
_TYPE_NAMES = {IndexType(): "index", i64: "64-bit signless integer"}


def _check_defaulted_operands(op: IRDLOperation) -> None:
    """MLIR's `operand #i must be variadic of index, but got ...` for `_Defaults` operands."""
    index = 0
    for name, operand_def in type(op).get_irdl_definition().operands:
        values = getattr(op, name)
        values = (values,) if isinstance(values, SSAValue) else tuple(values)
        constr = getattr(operand_def.constr, "constr", None)
        if isinstance(constr, _Defaults):
            for i, v in enumerate(values):
                if v.type != constr.attr:
                    raise _op_error(
                        op,
                        f"operand #{index + i} must be variadic of "
                        f"{_TYPE_NAMES[constr.attr]}, but got '{v.type}'",
                    )
        index += len(values)


class _TypeOf(VarConstraint[Attribute]):
    """Infers a type from another operand or result while parsing (AllTypesMatch,
    TypesMatchWith) but never fails: `verify_` checks it with MLIR's message."""

    def verify(self, attr: Attribute, constraint_context: VerificationContext) -> None:
        if constraint_context.get_variable(self.name) is None:
            constraint_context.set_attr_variable(self.name, attr)


# =========================================================================================
# Parsing with MLIR's diagnostics
# =========================================================================================
# mlir-opt reports some parse failures as a chain of errors (the cause, then the construct
# that failed); xDSL's parser stops at one exception, so all but the last are emitted as
# diagnostics first. Positions follow MLIR: `expected '<token>'` sits right after the
# previous token (Parser::emitWrongTokenError), other errors at the offending token.

_I16 = (-(2**15), 2**15 - 1)
_I64 = (-(2**63), 2**63 - 1)
_AXES_PARAMETER = (
    "failed to parse Shard_GridAxesArrayAttr parameter 'axes' which is to be a "
    "`::llvm::ArrayRef<GridAxesAttr>`"
)
_ParseErrors: TypeAlias = list[tuple[int, str]]


def _fail(parser: AttrParser, errors: _ParseErrors) -> NoReturn:
    *causes, (pos, message) = errors
    for cause_pos, cause in causes:
        where = Span(cause_pos, cause_pos, parser.lexer.input).get_location()
        diagnostics.emit(file_loc(where.file, where.line, where.col), Severity.ERROR, cause)
    parser.raise_error(message, pos, pos)


def _after_previous_token(parser: AttrParser) -> int:
    before = parser.lexer.input.content[: parser.pos].rstrip()
    return len(before) if before else parser.pos


def _op_name_position(parser: AttrParser) -> int:
    """Where the op being parsed starts (MLIR's `getNameLoc`); shardc's LocatingParser
    records it, a plain xDSL parser falls back to the current token."""
    starts: list[int] | None = getattr(parser, "_op_name_starts", None)
    return starts[-1] if starts else parser.pos


def _custom_op(state: ParsingState) -> str:
    """MLIR's prefix for errors emitted through an op's custom parser."""
    return f"custom op '{state.op_type.name}' "


def _parse_bounded_integer(
    parser: AttrParser, bounds: tuple[int, int], prefix: str, errors: _ParseErrors
) -> int | None:
    pos = parser.pos
    value = parser.parse_optional_integer(allow_boolean=False)
    if value is None:
        errors.append((pos, prefix + "expected integer value"))
    elif not bounds[0] <= value <= bounds[1]:
        errors.append((pos, prefix + "integer value too large"))
        value = None
    return value


def _parse_grid_axes(parser: AttrParser, prefix: str) -> tuple[list[int], _ParseErrors]:
    """`[0, 1]` as MLIR's DenseI16ArrayAttr parser reads it: the axes and the errors it
    reports (none for valid input). Like MLIR, a bad element still expects the `]`."""
    if parser.parse_optional_punctuation("[") is None:
        return [], [(_after_previous_token(parser), "expected '['")]
    axes: list[int] = []
    errors: _ParseErrors = []
    if parser.parse_optional_punctuation("]") is not None:
        return axes, errors
    while (axis := _parse_bounded_integer(parser, _I16, prefix, errors)) is not None:
        axes.append(axis)
        if parser.parse_optional_punctuation(",") is None:
            break
    if parser.parse_optional_punctuation("]") is None:
        errors.append((_after_previous_token(parser), "expected ']'"))
    return axes, errors


def _parse_split_axes(parser: AttrParser, prefix: str) -> list[GridAxesAttr]:
    """`[[0], [], [1, 2]]`, MLIR's `[` $axes `]` for GridAxesArrayAttr; also `[]`, which
    mlir-opt prints for a 0-d value's sharding but does not read back."""
    if parser.parse_optional_punctuation("[") is None:
        _fail(parser, [(_after_previous_token(parser), "expected '['")])
    subs: list[GridAxesAttr] = []
    if parser.parse_optional_punctuation("]") is not None:
        return subs
    while True:
        axes, errors = _parse_grid_axes(parser, prefix)
        if errors:
            _fail(parser, [*errors, (parser.pos, prefix + _AXES_PARAMETER)])
        subs.append(grid_axes_attr(axes))
        if parser.parse_optional_punctuation(",") is None:
            break
    if parser.parse_optional_punctuation("]") is None:
        _fail(parser, [(_after_previous_token(parser), "expected ']'")])
    return subs


def _print_axes(printer: Printer, axes: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(map(str, axes)) + "]")


@irdl_custom_directive
class GridAxes(CustomDirective):
    """An i16 grid-axes property in op syntax (`grid_axes = [0, 1]`), range-checked with
    MLIR's messages instead of xDSL's unchecked dense-array parser."""

    axes: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        axes, errors = _parse_grid_axes(parser, _custom_op(state))
        if errors:
            _fail(parser, errors)
        self.axes.set(state, grid_axes_attr(axes))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.axes.get(op)
        if isinstance(attr, DenseArrayBase):
            _print_axes(printer, attr.get_values())
        elif attr is not None:
            printer.print_attribute(attr)

    def is_present(self, op: IRDLOperation) -> bool:
        return self.axes.is_present(op)

    def is_anchorable(self) -> bool:
        return True

    def set_empty(self, state: ParsingState) -> None:
        pass  # the property keeps its default value


@irdl_custom_directive
class SplitAxes(CustomDirective):
    """A `GridAxesArrayAttr` property in op syntax (`split_axes = [[0], []]`), with MLIR's
    custom-op prefix on its diagnostics."""

    axes: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        subs = _parse_split_axes(parser, _custom_op(state))
        self.axes.set(state, GridAxesArrayAttr(ArrayAttr(subs)) if subs else GridAxesArrayAttr.for_scalar())

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.axes.get(op)
        if isinstance(attr, GridAxesArrayAttr):
            attr.print_parameters(printer)
        elif attr is not None:
            printer.print_attribute(attr)


@irdl_custom_directive
class IndexList(DynamicIndexList):
    """MLIR's `custom<DynamicIndexList>`: `[1, %v, 3]` with i64 range checks and MLIR's
    messages (the element's error, then `expected SSA value or integer` at the op)."""

    dynamic_position: VariadicOperandVariable
    static_position: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        prefix = _custom_op(state)
        dynamic: list[UnresolvedOperand] = []
        static: list[int] = []
        errors: _ParseErrors = []
        if parser.parse_optional_punctuation("[") is None:
            errors.append((_after_previous_token(parser), "expected '[' in dynamic index list"))
        elif parser.parse_optional_punctuation("]") is None:
            while True:
                if (operand := parser.parse_optional_unresolved_operand()) is not None:
                    dynamic.append(operand)
                    static.append(DYNAMIC)
                elif (value := _parse_bounded_integer(parser, _I64, prefix, errors)) is not None:
                    static.append(value)
                else:
                    break
                if parser.parse_optional_punctuation(",") is None:
                    if parser.parse_optional_punctuation("]") is None:
                        errors.append(
                            (_after_previous_token(parser), "expected ']' in dynamic index list")
                        )
                    break
        if errors:
            _fail(parser, [*errors, (_op_name_position(parser), prefix + "expected SSA value or integer")])
        self.dynamic_position.set(state, dynamic)
        self.static_position.set(state, i64_array(static))


@irdl_custom_directive
class OptionalIndexList(IndexList):
    """`IndexList` for an optional property: when its group is absent the property stays
    unset (MLIR's `OptionalAttr`), instead of becoming an empty array."""

    dynamic_position: VariadicOperandVariable
    static_position: AttributeVariable

    def set_empty(self, state: ParsingState):
        self.dynamic_position.set(state, [])

    def is_present(self, op: IRDLOperation) -> bool:
        return self.static_position.get(op) is not None


def _parse_grid_shape(parser: Parser) -> list[int]:
    """`2x?x4` (or `[]`), as MLIR's `custom<DimensionList>` reads it, with its messages."""
    failed = "custom op 'shard.grid' Failed parsing dimension list."
    if parser.parse_optional_punctuation("[") is not None:
        if parser.parse_optional_punctuation("]") is None:
            _fail(parser, [(_after_previous_token(parser), "expected ']'"), (parser.pos, failed)])
        return []
    if not _at_dimension(parser):
        _fail(parser, [(parser.pos, failed + ' Did you mean an empty list? It must be denoted by "[]".')])
    dims: list[int] = []
    while True:
        pos = parser.pos
        dim = parser.parse_shape_dimension() if _at_dimension(parser) else None
        if dim is None or dim > _I64[1]:
            _fail(parser, [(pos, "invalid dimension"), (pos, failed)])
        dims.append(dim)
        if not parser.lexer.input.content.startswith("x", parser.pos):
            return dims
        parser.parse_shape_delimiter()


def _at_dimension(parser: Parser) -> bool:
    next_char = parser.lexer.input.content[parser.pos : parser.pos + 1]
    return next_char.isdigit() or next_char == "?"


class _CheckedType(CustomDirective, ABC):
    """`type($x)` for an ODS constraint with a C++ type class: MLIR's generated parser
    checks the kind of type right away (custom syntax only; generic syntax reaches the
    verifier and its `operand #0 must be ...` message)."""

    type: TypeDirective

    def accepts(self, t: Attribute) -> bool:
        raise NotImplementedError

    def error(self, t: Attribute) -> str:
        raise NotImplementedError

    def error_position(self, parser: Parser, type_position: int) -> int:
        return type_position

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        t = parser.parse_type()
        if not self.accepts(t):
            _fail(parser, [(self.error_position(parser, pos), _custom_op(state) + self.error(t))])
        self.type.set(state, [t])

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_list(self.type.get(op), printer.print_attribute)


@irdl_custom_directive
class TensorTypeOf(_CheckedType):
    """`AnyNon0RankedTensor` (C++ class TensorType): any tensor, ranked or not."""

    type: TypeDirective

    def accepts(self, t: Attribute) -> bool:
        return isinstance(t, TensorType | UnrankedTensorType)

    def error(self, t: Attribute) -> str:
        return "invalid kind of type specified"


@irdl_custom_directive
class RankedTensorTypeOf(_CheckedType):
    """`AnyRankedTensor` (C++ class RankedTensorType)."""

    type: TypeDirective

    def accepts(self, t: Attribute) -> bool:
        return isinstance(t, TensorType)

    def error(self, t: Attribute) -> str:
        return f"invalid kind of type specified: expected builtin.tensor, but found '{t}'"


@irdl_custom_directive
class IndexTypeOf(_CheckedType):
    """`Index` (C++ class IndexType)."""

    type: TypeDirective

    def accepts(self, t: Attribute) -> bool:
        return isinstance(t, IndexType)

    def error(self, t: Attribute) -> str:
        return f"invalid kind of type specified: expected builtin.index, but found '{t}'"


@irdl_custom_directive
class HaloResultType(_CheckedType):
    """update_halo's result type, which also gives its destination's type
    (TypesMatchWith): MLIR checks its constraint while parsing, reported at the op."""

    type: TypeDirective

    def accepts(self, t: Attribute) -> bool:
        return NON0_MEMREF_OR_TENSOR[0](t)

    def error(self, t: Attribute) -> str:
        return f"'result' must be {NON0_MEMREF_OR_TENSOR[1]}, but got '{t}'"

    def error_position(self, parser: Parser, type_position: int) -> int:
        return _op_name_position(parser)


@irdl_custom_directive
class IntegerProperty(CustomDirective):
    """An index or i64 integer property in op syntax (`gather_axis = 1`), rejecting values
    beyond 64 bits with MLIR's message."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        _parse_integer_property(parser, self.value, state)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.value.get(op)
        if isinstance(attr, IntegerAttr):
            printer.print_string(str(attr.value.data))
        elif attr is not None:
            printer.print_attribute(attr)


@irdl_custom_directive
class GridRef(CustomDirective):
    """The grid an op refers to: a flat symbol reference (`@grid`). Anything else is
    rejected where it is written, with the message of MLIR's `parseAttribute` into a
    FlatSymbolRefAttr, instead of failing verification later."""

    grid: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        attr = parser.parse_attribute()
        if not isinstance(attr, SymbolRefAttr) or attr.nested_references.data:
            _fail(parser, [(pos, _custom_op(state) + "invalid kind of attribute specified")])
        self.grid.set(state, attr)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.grid.get(op))  # pyright: ignore[reportArgumentType]


def _parse_integer_property(parser: Parser, value: AttributeVariable, state: ParsingState) -> None:
    pos = parser.pos
    number = parser.parse_integer(allow_boolean=False)
    if not _I64[0] <= number <= _I64[1]:
        _fail(parser, [(pos, "integer constant out of range for attribute")])
    value.set(state, IntegerAttr(number, _ATTR_CONSTRAINTS[value.name][0]))


_LEGACY_KEYWORDS = {"scatter_dim": "scatter_axis"}
"""Properties trunk renamed, trunk's name -> MLIR 22.1.8's. Both spellings are read (in
op syntax and in generic form); trunk's is printed."""
_LEGACY_NAMES = {old: new for new, old in _LEGACY_KEYWORDS.items()}


@irdl_custom_directive
class ScatterDim(CustomDirective):
    """`scatter_dim = 1` (trunk) or `scatter_axis = 1` (MLIR 22.1.8), printed as trunk's."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        name = self.value.name
        if parser.parse_optional_keyword(_LEGACY_KEYWORDS[name]) is None:
            if parser.parse_optional_keyword(name) is None:
                _fail(parser, [(parser.pos, f"{_custom_op(state)}expected '{name}'")])
        parser.parse_punctuation("=")
        _parse_integer_property(parser, self.value, state)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_string(f"{self.value.name} = ")
        attr = self.value.get(op)
        if isinstance(attr, IntegerAttr):
            printer.print_string(str(attr.value.data))
        elif attr is not None:
            printer.print_attribute(attr)


class _RenamedProperties(IRDLOperation, ABC):
    """Ops with a property trunk renamed: `create` (the generic parser, pattern code)
    takes 22.1.8's name too, and the old name stays readable from Python."""

    @classmethod
    def create(cls, *, properties: Mapping[str, Attribute] = {}, **kwargs: Any) -> Self:
        if any(old in properties for old in _LEGACY_NAMES):
            properties = {_LEGACY_NAMES.get(k, k): v for k, v in properties.items()}
        return super().create(properties=properties, **kwargs)

    @property
    def scatter_axis(self) -> IntegerAttr[IndexType]:
        """22.1.8's name of `scatter_dim`."""
        return self.scatter_dim  # pyright: ignore[reportAttributeAccessIssue]


_DIRECTIVES = (GridAxes, SplitAxes, IndexList, OptionalIndexList, TensorTypeOf, RankedTensorTypeOf,
    IndexTypeOf, HaloResultType, IntegerProperty, ScatterDim, GridRef,
)

# =========================================================================================
# Op definition: MLIR's checks on properties come first
# =========================================================================================

_ATTR_CONSTRAINTS: dict[str, tuple[Attribute, str]] = {
    **{
        name: (IndexType(), "index attribute")
        for name in ("concat_axis", "gather_axis", "scatter_dim", "shift_axis", "slice_axis", "split_axis")
    },
    "offset": (i64, "64-bit signless integer attribute"),
}
"""Integer properties and the description MLIR's constraint failure gives for them."""

_SEGMENTS = "operandSegmentSizes"


@lru_cache(maxsize=256)
def _segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, sizes)


@lru_cache(maxsize=1)
def _index() -> IndexType:
    return IndexType()


@lru_cache(maxsize=1)
def _sharding_type() -> ShardingType:
    return ShardingType()


@lru_cache(maxsize=1)
def _unit() -> UnitAttr:
    return UnitAttr()


def _default_segment_sizes(op: IRDLOperation) -> None:
    """MLIR's property storage reads a missing `operandSegmentSizes` as all zeros: valid
    for an op without operands (the property is then materialized), else this error."""
    if op.operands:
        raise _op_error(
            op,
            f"operand count ({len(op.operands)}) does not match with the total size (0) "
            f"specified in attribute '{_SEGMENTS}'",
        )
    count = len(type(op).get_irdl_definition().operands)
    op.properties[_SEGMENTS] = DenseArrayBase.from_list(i32, [0] * count)


def _shard_op(cls: type[IRDLOperationInvT]) -> type[IRDLOperationInvT]:
    """`irdl_op_definition`, verifying first what MLIR's generated verifier checks first:
    required properties in name order (`requires attribute 'x'`, not xDSL's `property 'x'
    expected`), then integer properties' types. The assembly format compiles on first use."""
    from shardc.dialects.lazy_format import lazy_format_op_definition

    cls = lazy_format_op_definition(cls)
    properties = cls.get_irdl_definition().properties
    required = sorted(
        name
        for name, prop in properties.items()
        if not isinstance(prop, OptPropertyDef)
        and prop.default_value is None
        and name != _SEGMENTS
    )
    typed = sorted(name for name in properties if name in _ATTR_CONSTRAINTS)
    irdl_verify = cls.verify_

    def precheck(self: IRDLOperation) -> None:
        if _SEGMENTS in properties and _SEGMENTS not in self.properties:
            _default_segment_sizes(self)
        for name in required:
            if name not in self.properties:
                raise _op_error(self, f"requires attribute '{name}'")
        for name in typed:
            attr = self.properties.get(name)
            expected, description = _ATTR_CONSTRAINTS[name]
            if attr is not None and not (isinstance(attr, IntegerAttr) and attr.type == expected):
                raise _op_error(
                    self, f"attribute '{name}' failed to satisfy constraint: {description}"
                )

    def verify_(self: IRDLOperation) -> None:
        precheck(self)
        irdl_verify(self)

    # shardc.ir.fast_verify runs the two parts itself, memoizing irdl_verify's checks
    verify_.shardc_verify_parts = (precheck, irdl_verify)  # type: ignore[attr-defined]
    cls.verify_ = verify_
    return cls



# =========================================================================================
# Canonicalization traits (patterns in shard_canonicalization.py, imported lazily)
# =========================================================================================


def _patterns(*names: str) -> tuple[Any, ...]:
    """The named patterns of `shardc.dialects.shard_canonicalization`, imported by name on
    first use: that module builds its patterns on this one's ops."""
    import importlib

    module = importlib.import_module("shardc.dialects.shard_canonicalization")
    return tuple(getattr(module, name)() for name in names)


class _EmptyGridAxesCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls):
        return _patterns("RemoveEmptyGridAxesCollective")


class _ShardingCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls):
        return _patterns("NormalizeSharding")


class _ShardCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls):
        return _patterns("FoldDuplicateShard")


# =========================================================================================
# Grid ops
# =========================================================================================


def _group_name(name: str, count: int) -> list[str | None]:
    """Names as MLIR's getAsmResultNames sets them: on the first result only, so that the
    results print as one group (`%name:2`); None after it continues the group."""
    return [name, *[None] * (count - 1)] if count else []


_VISIBILITIES = ("private", "public", "nested")


@_shard_op
class GridOp(IRDLOperation):
    """A device/process grid symbol: `shard.grid @g(shape = 2x?x4)`."""

    name = "shard.grid"

    sym_name = prop_def(SymbolNameConstraint())
    shape = prop_def(DenseArrayBase[I64])
    sym_visibility = opt_attr_def(StringAttr)

    traits = traits_def(SymbolOpInterface(), Pure())

    def __init__(self, name: str, shape: Sequence[int | None], visibility: str | None = None):
        dims = [DYNAMIC if d is None else d for d in shape]
        super().__init__(
            properties={"sym_name": StringAttr(name), "shape": i64_array(dims)},
            attributes={"sym_visibility": StringAttr(visibility) if visibility else None},
        )

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def shape_tuple(self) -> tuple[int | None, ...]:
        """The grid shape, None for dynamic dimensions (decoded once per shape attribute:
        partition and the lowering ask for it per collective and per local type)."""
        shape = self.shape
        found = _GRID_SHAPES.get(id(shape))
        if found is None:
            if len(_GRID_SHAPES) > 4096:
                _GRID_SHAPES.clear()
            # the entry keeps `shape` alive: its id is not reused meanwhile
            found = _GRID_SHAPES[id(shape)] = (shape, tuple(None if d == DYNAMIC else d for d in shape.get_values()))
        return found[1]

    def group_size(self, axes: Iterable[int] | None = None) -> int | None:
        """Processes in a group over `axes` (all axes by default); None if dynamic."""
        shape = self.shape_tuple
        return collective_group_size(range(len(shape)) if axes is None else axes, shape)

    @classmethod
    def parse(cls, parser: Parser) -> GridOp:
        # Trunk's `"private" @g(...)`, MLIR 22.1.8's `@g(...) {sym_visibility = "private"}`
        # and the bare `private @g(...)` are read; trunk's is printed.
        visibility = parser.parse_optional_str_literal()
        if visibility is None:
            visibility = next(
                (k for k in _VISIBILITIES if parser.parse_optional_keyword(k) is not None), None
            )
        name = parser.parse_symbol_name()
        parser.parse_punctuation("(")
        parser.parse_keyword("shape")
        parser.parse_punctuation("=")
        dims = _parse_grid_shape(parser)
        parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        op = cls.create(
            properties={"sym_name": name, "shape": i64_array(dims)}, attributes=attrs
        )
        if visibility is not None:
            op.attributes["sym_visibility"] = StringAttr(visibility)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        attributes = dict(self.attributes)
        visibility = attributes.pop("sym_visibility", None)
        if isinstance(visibility, StringAttr):
            printer.print_string_literal(visibility.data)
            printer.print_string(" ")
        elif visibility is not None:
            attributes["sym_visibility"] = visibility
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(shape = ")
        dims = self.shape.get_values()
        if dims:
            printer.print_dimension_list(dims)
        else:
            printer.print_string("[]")
        printer.print_string(")")
        printer.print_op_attributes(attributes)

    def verify_(self) -> None:
        visibility = self.attributes.get("sym_visibility")
        if visibility is not None and (
            not isinstance(visibility, StringAttr) or visibility.data not in _VISIBILITIES
        ):
            got = f'"{visibility.data}"' if isinstance(visibility, StringAttr) else str(visibility)
            raise _op_error(
                self,
                'visibility expected to be one of ["public", "private", "nested"], but got '
                + got,
            )
        if self.rank <= 0:
            raise _op_error(self, "rank of grid is expected to be a positive integer")
        if any(d < 0 and d != DYNAMIC for d in self.shape.get_values()):
            raise _op_error(
                self, "dimension size of a grid is expected to be non-negative or dynamic"
            )


class _GridQueryOp(IRDLOperation, ABC):
    """Ops returning one index per grid axis (all axes when `axes` is empty)."""

    grid = prop_def(FlatSymbolRefAttr)
    axes = prop_def(GridAxesAttr, default_value=grid_axes_attr())
    result = var_result_def(AnyAttr())

    traits = traits_def(Pure())

    def __init__(self, grid: str | GridOp, axes: Sequence[int] = ()):
        name = grid.sym_name.data if isinstance(grid, GridOp) else grid
        count = len(axes) if axes or not isinstance(grid, GridOp) else grid.rank
        # IRDLOperation's builder, without its generic argument checking (partition
        # makes one per partitioned reduction), from cached attributes
        init_op(
            self,
            properties={"grid": _symbol_ref(name), "axes": grid_axes_attr(axes)},
            result_types=[_index()] * count,
        )

    def verify_(self) -> None:
        _check_index_results(self, variadic=True)
        grid = _grid_or_error(self, self.grid)
        axes = self.axes.get_values()
        _verify_grid_axes(axes, grid)
        expected = len(axes) if axes else grid.rank
        if len(self.result) != expected:
            raise VerifyException(
                f"Unexpected number of results {len(self.result)}. Expected {expected}."
            )


@_shard_op
class GridShapeOp(_GridQueryOp):
    """The sizes of (some) grid axes: `%s:2 = shard.grid_shape @g : index, index`."""

    name = "shard.grid_shape"

    custom_directives = _DIRECTIVES
    assembly_format = "custom<GridRef>($grid) (`axes` `=` custom<GridAxes>($axes)^)? attr-dict `:` type($result)"

    def get_asm_result_names(self) -> Sequence[str | None]:
        return _group_name("grid_shape", len(self.results))


@_shard_op
class ProcessMultiIndexOp(_GridQueryOp):
    """This process's coordinates on (some) grid axes."""

    name = "shard.process_multi_index"

    custom_directives = _DIRECTIVES
    assembly_format = "`on` custom<GridRef>($grid) (`axes` `=` custom<GridAxes>($axes)^)? attr-dict `:` type($result)"

    def get_asm_result_names(self) -> Sequence[str | None]:
        # Upstream names this op's results like process_linear_index's.
        return _group_name("proc_linear_idx", len(self.results))


@_shard_op
class ProcessLinearIndexOp(IRDLOperation):
    """This process's linear index on the grid (row-major)."""

    name = "shard.process_linear_index"

    grid = prop_def(FlatSymbolRefAttr)
    result = result_def(AnyAttr())

    traits = traits_def(Pure())

    custom_directives = _DIRECTIVES
    assembly_format = "`on` custom<GridRef>($grid) attr-dict `:` custom<IndexTypeOf>(type($result))"

    def __init__(self, grid: str):
        super().__init__(properties={"grid": SymbolRefAttr(grid)}, result_types=[IndexType()])

    def get_asm_result_names(self) -> Sequence[str | None]:
        return ["proc_linear_idx"]

    def verify_(self) -> None:
        _check_index_results(self, variadic=False)
        _grid_or_error(self, self.grid)


@_shard_op
class NeighborsLinearIndicesOp(IRDLOperation):
    """Linear indices of the previous and next process along `split_axes` (-1: none)."""

    name = "shard.neighbors_linear_indices"

    grid = prop_def(FlatSymbolRefAttr)
    device = var_operand_def(INDEX)
    split_axes = prop_def(GridAxesAttr)
    neighbor_down = result_def(AnyAttr())
    neighbor_up = result_def(AnyAttr())

    traits = traits_def(Pure())

    custom_directives = _DIRECTIVES
    assembly_format = (
        "`on` custom<GridRef>($grid) `[` $device `]` `split_axes` `=` custom<GridAxes>($split_axes) attr-dict `:` type(results)"
    )

    def __init__(self, grid: str, device: Sequence[SSAValue], split_axes: Sequence[int]):
        super().__init__(
            operands=[device],
            properties={"grid": SymbolRefAttr(grid), "split_axes": grid_axes_attr(split_axes)},
            result_types=[IndexType(), IndexType()],
        )

    def get_asm_result_names(self) -> Sequence[str | None]:
        return ["down_linear_idx", "up_linear_idx"]

    def verify_(self) -> None:
        _check_defaulted_operands(self)
        _check_index_results(self, variadic=False)
        _grid_or_error(self, self.grid)


# =========================================================================================
# Sharding ops
# =========================================================================================


def _split_mixed(values: Sequence[int | SSAValue]) -> tuple[list[int], list[SSAValue]]:
    static = [v if isinstance(v, int) else DYNAMIC for v in values]
    return static, [v for v in values if isinstance(v, SSAValue)]


def _check_dynamic_count(op: Operation, name: str, static: Sequence[int], n: int) -> None:
    # MLIR does not check this (and crashes printing such an op); we give a diagnostic.
    if list(static).count(DYNAMIC) != n:
        raise _op_error(
            op, f"expected {list(static).count(DYNAMIC)} dynamic {name} values, got {n}"
        )


@_shard_op
class ShardingOp(IRDLOperation):
    """How a tensor is distributed on a grid: split axes per dimension, and optionally halo
    sizes or explicit shard offsets (mutually exclusive; static or dynamic entries)."""

    name = "shard.sharding"

    grid = prop_def(FlatSymbolRefAttr)
    split_axes = prop_def(GridAxesArrayAttr)
    static_sharded_dims_offsets = prop_def(DenseArrayBase[I64], default_value=i64_array())
    dynamic_sharded_dims_offsets = var_operand_def(I64_VALUE)
    static_halo_sizes = prop_def(DenseArrayBase[I64], default_value=i64_array())
    dynamic_halo_sizes = var_operand_def(I64_VALUE)
    result = result_def(ShardingType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure(), _ShardingCanonicalization())

    custom_directives = _DIRECTIVES
    assembly_format = (
        "custom<GridRef>($grid) `split_axes` `=` custom<SplitAxes>($split_axes) "
        "(`halo_sizes` `=` custom<IndexList>($dynamic_halo_sizes, $static_halo_sizes)^)? "
        "(`sharded_dims_offsets` `=` custom<IndexList>"
        "($dynamic_sharded_dims_offsets, $static_sharded_dims_offsets)^)? "
        "attr-dict `:` type($result)"
    )

    def __init__(
        self,
        grid: str | FlatSymbolRefAttr,
        split_axes: Iterable[Iterable[int]] | GridAxesArrayAttr,
        halo_sizes: Sequence[int | SSAValue] = (),
        sharded_dims_offsets: Sequence[int | SSAValue] = (),
    ):
        if not halo_sizes and not sharded_dims_offsets:  # the common case, in short
            if not is_instance(split_axes, GridAxesArrayAttr):
                split_axes = _split_axes_attr(tuple(tuple(sub) for sub in split_axes))
            empty = _i64_array(())
            init_op(
                self,
                properties={
                    "grid": grid if is_instance(grid, SymbolRefAttr) else _symbol_ref(grid),
                    "split_axes": split_axes,
                    "static_sharded_dims_offsets": empty,
                    "static_halo_sizes": empty,
                    _SEGMENTS: _segment_sizes((0, 0)),
                },
                result_types=[_sharding_type()],
            )
            return
        static_halos, dyn_halos = _split_mixed(halo_sizes)
        static_offs, dyn_offs = _split_mixed(sharded_dims_offsets)
        if not isinstance(split_axes, GridAxesArrayAttr):
            split_axes = _split_axes_attr(tuple(tuple(sub) for sub in split_axes))
        # What IRDLOperation's builder makes of it, from cached attributes: propagation
        # builds thousands of these.
        init_op(
            self,
            operands=[*dyn_offs, *dyn_halos],
            properties={
                "grid": grid if isinstance(grid, SymbolRefAttr) else _symbol_ref(grid),
                "split_axes": split_axes,
                "static_sharded_dims_offsets": i64_array(static_offs),
                "static_halo_sizes": i64_array(static_halos),
                _SEGMENTS: _segment_sizes((len(dyn_offs), len(dyn_halos))),
            },
            result_types=[_sharding_type()],
        )

    @property
    def split_axes_tuple(self) -> tuple[tuple[int, ...], ...]:
        return self.split_axes.as_tuple()

    @property
    def sharding(self) -> Sharding:
        return Sharding.of(self)

    def get_asm_result_names(self) -> Sequence[str | None]:
        return ["sharding"]

    def verify_(self) -> None:
        _check_defaulted_operands(self)
        seen: set[int] = set()
        for axis in (a for sub in self.split_axes_tuple for a in sub):
            if axis < 0:
                raise VerifyException("grid axis is expected to be non-negative")
            if axis in seen:
                raise VerifyException("grid axis duplicated")
            seen.add(axis)
        halos = self.static_halo_sizes.get_values()
        offsets = self.static_sharded_dims_offsets.get_values()
        if halos and offsets:
            raise _op_error(self, "halo sizes and shard offsets are mutually exclusive")
        split_dims = sum(1 for sub in self.split_axes_tuple if sub)
        if halos and len(halos) != 2 * split_dims:
            raise VerifyException("halo sizes must be specified for all split axes.")
        _check_dynamic_count(self, "halo size", halos, len(self.dynamic_halo_sizes))
        _check_dynamic_count(
            self, "sharded dims offset", offsets, len(self.dynamic_sharded_dims_offsets)
        )
        self._verify_symbol_uses(offsets)

    def _verify_symbol_uses(self, offsets: Sequence[int]) -> None:
        grid = _grid_or_error(self, self.grid)
        gshape = grid.shape.get_values()
        if not offsets:
            return
        if DYNAMIC in gshape:
            raise VerifyException(
                "sharded dims offsets are not allowed for device grids with dynamic shape."
            )
        pos = 0
        for axes in self.split_axes_tuple:
            if not axes:
                continue
            shards = sum(gshape[a] for a in axes if 0 <= a < len(gshape))
            last = 0
            for i in range(shards + 1):
                if len(offsets) <= pos + i:
                    raise VerifyException("sharded dims offsets has wrong size.")
                if offsets[pos + i] != DYNAMIC:
                    if offsets[pos + i] < last:
                        raise VerifyException("sharded dims offsets must be non-decreasing.")
                    last = offsets[pos + i]
            pos += shards + 1


@_shard_op
class GetShardingOp(IRDLOperation):
    """The sharding of a tensor value."""

    name = "shard.get_sharding"

    source = operand_def(AnyAttr())
    result = result_def(ShardingType)

    traits = traits_def(Pure())

    custom_directives = _DIRECTIVES
    assembly_format = "$source attr-dict `:` custom<RankedTensorTypeOf>(type($source)) `->` type($result)"

    def __init__(self, source: SSAValue):
        super().__init__(operands=[source], result_types=[ShardingType()])

    def get_asm_result_names(self) -> Sequence[str | None]:
        return [None]

    def verify_(self) -> None:
        _check_type(self, "operand", 0, self.source.type, RANKED_TENSOR)


@_shard_op
class ShardShapeOp(IRDLOperation):
    """The local shard shape of a tensor of shape `dims` on process `device`."""

    name = "shard.shard_shape"

    dims = prop_def(DenseArrayBase[I64])
    dims_dynamic = var_operand_def(INDEX)
    sharding = operand_def(ShardingType)
    device = prop_def(DenseArrayBase[I64])
    device_dynamic = var_operand_def(INDEX)
    result = var_result_def(AnyAttr())

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    custom_directives = _DIRECTIVES
    assembly_format = (
        "`dims` `=` custom<IndexList>($dims_dynamic, $dims) "
        "`sharding` `=` $sharding "
        "`device` `=` custom<IndexList>($device_dynamic, $device) "
        "attr-dict `:` type(results)"
    )

    def __init__(
        self,
        dims: Sequence[int | SSAValue],
        sharding: SSAValue,
        device: Sequence[int | SSAValue],
    ):
        static_dims, dyn_dims = _split_mixed(dims)
        static_dev, dyn_dev = _split_mixed(device)
        super().__init__(
            operands=[dyn_dims, sharding, dyn_dev],
            properties={"dims": i64_array(static_dims), "device": i64_array(static_dev)},
            result_types=[[IndexType()] * len(dims)],
        )

    def get_asm_result_names(self) -> Sequence[str | None]:
        return _group_name("shard_shape", len(self.results))

    def verify_(self) -> None:
        _check_defaulted_operands(self)
        _check_index_results(self, variadic=True)
        dims, device = self.dims.get_values(), self.device.get_values()
        _check_dynamic_count(self, "dims", dims, len(self.dims_dynamic))
        _check_dynamic_count(self, "device", device, len(self.device_dynamic))


@_shard_op
class ShardOp(IRDLOperation):
    """Annotates a tensor with a sharding, for its producer or (`annotate_for_users`) for
    its users."""

    name = "shard.shard"

    T: ClassVar = _TypeOf("T", AnyAttr())
    src = operand_def(T)
    sharding = operand_def(ShardingType)
    annotate_for_users = opt_prop_def(UnitAttr)
    result = result_def(T)

    traits = traits_def(Pure(), _ShardCanonicalization())

    custom_directives = _DIRECTIVES
    assembly_format = (
        "$src `to` $sharding (`annotate_for_users` $annotate_for_users^)? "
        "attr-dict `:` custom<RankedTensorTypeOf>(type($result))"
    )

    def __init__(self, src: SSAValue, sharding: SSAValue, annotate_for_users: bool = False):
        # IRDLOperation's builder, without its generic argument checking (hot in passes).
        src = SSAValue.get(src)
        init_op(
            self,
            operands=[src, SSAValue.get(sharding)],
            result_types=[src.type],
            properties={"annotate_for_users": _unit()} if annotate_for_users else {},
        )

    @property
    def for_users(self) -> bool:
        # the property accessor's read, without its call (asked tens of thousands of times)
        return self.properties.get("annotate_for_users") is not None

    def get_asm_result_names(self) -> Sequence[str | None]:
        # trunk's name (MLIR 22.1.8 printed `%sharding_annotated`)
        return ["sharded"]

    def verify_(self) -> None:
        _check_type(self, "operand", 0, self.src.type, RANKED_TENSOR)
        _check_type(self, "result", 0, self.result.type, RANKED_TENSOR)
        if self.src.type != self.result.type:
            raise _op_error(self, "failed to verify that all of {result, src} have same type")


# =========================================================================================
# Collective communication ops
# =========================================================================================


class CollectiveOp(IRDLOperation, ABC):
    """Common part of the collectives: a grid, the grid axes forming the groups, one tensor
    in and one out. Subclasses state MLIR's type rules in `TYPE_RULES`."""

    grid = prop_def(FlatSymbolRefAttr)
    grid_axes = prop_def(GridAxesAttr, default_value=grid_axes_attr())

    INPUT: ClassVar[TypeCheck] = NON0_RANKED_TENSOR
    RESULT: ClassVar[TypeCheck] = NON0_RANKED_TENSOR
    SAME: ClassVar[tuple[str, ...]] = ()
    """MLIR's traits relating input and result: element_type, rank, shape (the
    SameOperandsAndResult* family) or all_shape, all_element_type, all_rank (AllXMatch)."""

    ASM_NAME: ClassVar[str]

    @property
    def grid_axes_tuple(self) -> tuple[int, ...]:
        return array_values(self.grid_axes)

    def get_asm_result_names(self) -> Sequence[str | None]:
        return [self.ASM_NAME]

    def verify_(self) -> None:
        in_t, out_t = self.operands[0].type, self.results[0].type
        _check_type(self, "operand", 0, in_t, self.INPUT)
        _check_defaulted_operands(self)
        _check_type(self, "result", 0, out_t, self.RESULT)
        for name in ("root", "source", "destination"):
            static = self.properties.get(name)
            if isinstance(static, DenseArrayBase):
                dynamic = getattr(self, f"{name}_dynamic")
                _check_dynamic_count(self, f"{name} index", static.get_values(), len(dynamic))
        for rule in self.SAME:
            agree, message = _SAME_RULES[rule]
            if not agree(in_t, out_t):
                raise _op_error(self, message)
        grid = _grid_or_error(self, self.grid)
        _verify_grid_axes(self.grid_axes_tuple, grid)
        self.verify_with_grid(grid)

    def verify_with_grid(self, grid: GridOp) -> None:
        """Checks needing the grid (MLIR's verifySymbolUses), after the axes are valid."""


_ALL = "failed to verify that all of {input, result} have same"
def _same(get: Callable[[Attribute], object]) -> Callable[[Attribute, Attribute], bool]:
    return lambda a, b: get(a) == get(b)


def _compatible_shapes(a: Attribute, b: Attribute) -> bool:
    """MLIR's verifyCompatibleShape: same rank, and static sizes agree where both are."""
    sa, sb = _shape(a), _shape(b)
    return len(sa) == len(sb) and all(x == y or DYNAMIC in (x, y) for x, y in zip(sa, sb))


_SAME_RULES: dict[str, tuple[Callable[[Attribute, Attribute], bool], str]] = {
    # MLIR's SameOperandsAndResult* traits (shapes: compatible, `?` matches any size) ...
    "element_type": (
        _same(_element_type),
        "requires the same element type for all operands and results",
    ),
    "rank": (_same(_rank), "result type has different rank than operands"),
    "shape": (_compatible_shapes, "requires the same shape for all operands and results"),
    # ... and its AllShapesMatch / AllElementTypesMatch / AllRanksMatch (exact).
    "all_shape": (_same(_shape), f"{_ALL} shape"),
    "all_element_type": (_same(_element_type), f"{_ALL} element type"),
    "all_rank": (_same(_rank), f"{_ALL} rank"),
}

_GRID_AXES = "(`grid_axes` `=` custom<GridAxes>($grid_axes)^)?"


class _RootedOp(CollectiveOp, ABC):
    """Collectives with an in-group `root` device (static and dynamic coordinates)."""

    root = prop_def(DenseArrayBase[I64])
    root_dynamic = var_operand_def(INDEX)

    def verify_with_grid(self, grid: GridOp) -> None:
        _verify_in_group_device("root", self.root.get_values(), self.grid_axes_tuple, grid)


@_shard_op
class AllGatherOp(CollectiveOp):
    """Concatenates the group's tensors along `gather_axis`, on every device. Takes
    memrefs as well as tensors, as trunk does (its ShardToMPI lowers both)."""

    name = "shard.all_gather"

    input = operand_def(AnyAttr())
    gather_axis = prop_def(IntegerAttr[IndexType])
    result = result_def(AnyAttr())

    INPUT: ClassVar = NON0_MEMREF_OR_TENSOR
    RESULT: ClassVar = NON0_MEMREF_OR_TENSOR
    SAME: ClassVar = ("element_type", "rank")
    ASM_NAME: ClassVar = "all_gather"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} `gather_axis` `=` custom<IntegerProperty>($gather_axis) "
        "attr-dict `:` type($input) `->` type($result)"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        _verify_gather_shapes(
            self.input.type,
            self.result.type,
            self.gather_axis.value.data,
            _group_size(self.grid_axes_tuple, grid),
        )


@_shard_op
class AllReduceOp(CollectiveOp):
    """Element-wise reduction over the group, replicated on every device."""

    name = "shard.all_reduce"

    input = operand_def(AnyAttr())
    reduction = prop_def(ReductionKindAttr, default_value=SUM)
    result = result_def(AnyAttr())

    INPUT: ClassVar = MEMREF_OR_RANKED_TENSOR
    RESULT: ClassVar = MEMREF_OR_RANKED_TENSOR
    SAME: ClassVar = ("shape",)
    ASM_NAME: ClassVar = "all_reduce"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} (`reduction` `=` $reduction^)? "
        "attr-dict `:` type($input) `->` type($result)"
    )


@_shard_op
class AllSliceOp(CollectiveOp):
    """Each device keeps its own slice of the (replicated) input along `slice_axis`."""

    name = "shard.all_slice"

    input = operand_def(AnyAttr())
    slice_axis = prop_def(IntegerAttr[IndexType])
    result = result_def(AnyAttr())

    SAME: ClassVar = ("element_type", "rank")
    ASM_NAME: ClassVar = "all_slice"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} `slice_axis` `=` custom<IntegerProperty>($slice_axis) "
        "attr-dict `:` custom<TensorTypeOf>(type($input)) `->` custom<TensorTypeOf>(type($result))"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        _verify_scatter_shapes(
            self.input.type,
            self.result.type,
            self.slice_axis.value.data,
            _group_size(self.grid_axes_tuple, grid),
            "Slice",
        )


@_shard_op
class AllToAllOp(CollectiveOp):
    """Splits along `split_axis`, exchanges within the group, concatenates on
    `concat_axis`."""

    name = "shard.all_to_all"

    input = operand_def(AnyAttr())
    split_axis = prop_def(IntegerAttr[IndexType])
    concat_axis = prop_def(IntegerAttr[IndexType])
    result = result_def(AnyAttr())

    SAME: ClassVar = ("element_type", "rank")
    ASM_NAME: ClassVar = "all_to_all"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} `split_axis` `=` custom<IntegerProperty>($split_axis) "
        "`concat_axis` `=` custom<IntegerProperty>($concat_axis) attr-dict `:` custom<TensorTypeOf>(type($input)) `->` custom<TensorTypeOf>(type($result))"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        _verify_all_to_all_shapes(
            self.input.type,
            self.result.type,
            self.split_axis.value.data,
            self.concat_axis.value.data,
            _group_size(self.grid_axes_tuple, grid),
        )


_ROOT = "`root` `=` custom<IndexList>($root_dynamic, $root)"


@_shard_op
class BroadcastOp(_RootedOp):
    """Copies the root device's tensor to every device of its group."""

    name = "shard.broadcast"

    input = operand_def(AnyAttr())
    root = prop_def(DenseArrayBase[I64])
    root_dynamic = var_operand_def(INDEX)
    result = result_def(AnyAttr())

    INPUT: ClassVar = RANKED_TENSOR
    RESULT: ClassVar = RANKED_TENSOR
    SAME: ClassVar = ("all_shape", "all_element_type")
    ASM_NAME: ClassVar = "broadcast"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} {_ROOT} attr-dict `:` functional-type(operands, results)"
    )


@_shard_op
class GatherOp(_RootedOp):
    """Concatenates the group's tensors along `gather_axis` on the root device."""

    name = "shard.gather"

    input = operand_def(AnyAttr())
    gather_axis = prop_def(IntegerAttr[IndexType])
    root = prop_def(DenseArrayBase[I64])
    root_dynamic = var_operand_def(INDEX)
    result = result_def(AnyAttr())

    SAME: ClassVar = ("all_rank", "all_element_type")
    ASM_NAME: ClassVar = "gather"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} `gather_axis` `=` custom<IntegerProperty>($gather_axis) {_ROOT} "
        "attr-dict `:` functional-type(operands, results)"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        super().verify_with_grid(grid)
        _verify_gather_shapes(
            self.input.type,
            self.result.type,
            self.gather_axis.value.data,
            _group_size(self.grid_axes_tuple, grid),
        )


@_shard_op
class RecvOp(CollectiveOp):
    """Receives a tensor from the in-group device `source`."""

    name = "shard.recv"

    input = operand_def(AnyAttr())
    source = opt_prop_def(DenseArrayBase[I64])
    source_dynamic = var_operand_def(INDEX)
    result = result_def(AnyAttr())

    RESULT: ClassVar = RANKED_TENSOR
    SAME: ClassVar = ("all_shape", "all_element_type")
    ASM_NAME: ClassVar = "recv"
    traits = traits_def(_EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} "
        "(`source` `=` custom<OptionalIndexList>($source_dynamic, $source)^)? "
        "attr-dict `:` functional-type(operands, results)"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        if self.source is not None:
            _verify_in_group_device(
                "source", self.source.get_values(), self.grid_axes_tuple, grid
            )


@_shard_op
class ReduceOp(_RootedOp):
    """Element-wise reduction over the group, result on the root device."""

    name = "shard.reduce"

    input = operand_def(AnyAttr())
    reduction = prop_def(ReductionKindAttr, default_value=SUM)
    root = prop_def(DenseArrayBase[I64])
    root_dynamic = var_operand_def(INDEX)
    result = result_def(AnyAttr())

    INPUT: ClassVar = RANKED_TENSOR
    RESULT: ClassVar = RANKED_TENSOR
    SAME: ClassVar = ("all_shape",)
    ASM_NAME: ClassVar = "reduce"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} (`reduction` `=` $reduction^)? {_ROOT} "
        "attr-dict `:` functional-type(operands, results)"
    )


@_shard_op
class ReduceScatterOp(_RenamedProperties, CollectiveOp):
    """Reduction over the group, then each device keeps its slice along
    `scatter_dim`. Takes memrefs as well as tensors, as trunk does."""

    name = "shard.reduce_scatter"

    input = operand_def(AnyAttr())
    reduction = prop_def(ReductionKindAttr, default_value=SUM)
    scatter_dim = prop_def(IntegerAttr[IndexType])
    result = result_def(AnyAttr())

    INPUT: ClassVar = NON0_MEMREF_OR_TENSOR
    RESULT: ClassVar = MEMREF_OR_RANKED_TENSOR
    SAME: ClassVar = ("rank",)
    ASM_NAME: ClassVar = "reduce_scatter"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} (`reduction` `=` $reduction^)? "
        "custom<ScatterDim>($scatter_dim) attr-dict `:` type($input) `->` type($result)"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        _verify_scatter_shapes(
            self.input.type,
            self.result.type,
            self.scatter_dim.value.data,
            _group_size(self.grid_axes_tuple, grid),
            "Scatter",
        )


@_shard_op
class ScatterOp(_RenamedProperties, _RootedOp):
    """Splits the root device's tensor along `scatter_dim` across its group."""

    name = "shard.scatter"

    input = operand_def(AnyAttr())
    scatter_dim = prop_def(IntegerAttr[IndexType])
    root = prop_def(DenseArrayBase[I64])
    root_dynamic = var_operand_def(INDEX)
    result = result_def(AnyAttr())

    RESULT: ClassVar = RANKED_TENSOR
    SAME: ClassVar = ("all_rank", "all_element_type")
    ASM_NAME: ClassVar = "scatter"
    traits = traits_def(Pure(), _EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} custom<ScatterDim>($scatter_dim) {_ROOT} "
        "attr-dict `:` functional-type(operands, results)"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        super().verify_with_grid(grid)
        _verify_scatter_shapes(
            self.input.type,
            self.result.type,
            self.scatter_dim.value.data,
            _group_size(self.grid_axes_tuple, grid),
            "Scatter",
        )


@_shard_op
class SendOp(CollectiveOp):
    """Sends the tensor to the in-group device `destination`."""

    name = "shard.send"

    input = operand_def(AnyAttr())
    destination = prop_def(DenseArrayBase[I64])
    destination_dynamic = var_operand_def(INDEX)
    result = result_def(AnyAttr())

    RESULT: ClassVar = RANKED_TENSOR
    SAME: ClassVar = ("all_shape", "all_element_type")
    ASM_NAME: ClassVar = "send"
    traits = traits_def(_EmptyGridAxesCanonicalization())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} "
        "`destination` `=` custom<IndexList>($destination_dynamic, $destination) "
        "attr-dict `:` functional-type(operands, results)"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        _verify_in_group_device(
            "destination", self.destination.get_values(), self.grid_axes_tuple, grid
        )


@_shard_op
class ShiftOp(CollectiveOp):
    """Shifts tensors by `offset` along grid axis `shift_axis` (circular with `rotate`)."""

    name = "shard.shift"

    input = operand_def(AnyAttr())
    shift_axis = prop_def(IntegerAttr[IndexType])
    offset = prop_def(IntegerAttr[I64])
    rotate = opt_prop_def(UnitAttr)
    result = result_def(AnyAttr())

    RESULT: ClassVar = RANKED_TENSOR
    SAME: ClassVar = ("element_type", "shape")
    ASM_NAME: ClassVar = "shift"
    traits = traits_def(Pure())
    custom_directives = _DIRECTIVES
    assembly_format = (
        f"$input `on` custom<GridRef>($grid) {_GRID_AXES} `shift_axis` `=` custom<IntegerProperty>($shift_axis) `offset` `=` custom<IntegerProperty>($offset) "
        "(`rotate` $rotate^)? attr-dict `:` custom<TensorTypeOf>(type($input)) `->` custom<RankedTensorTypeOf>(type($result))"
    )

    def verify_with_grid(self, grid: GridOp) -> None:
        axis = self.shift_axis.value.data
        if axis not in self.grid_axes_tuple:
            raise VerifyException(
                f"Invalid shift axis {axis}. It must be one of the grouping grid axes."
            )


@_shard_op
class UpdateHaloOp(IRDLOperation):
    """Refreshes the halo regions of `destination` from its neighbours along
    `split_axes`."""

    name = "shard.update_halo"

    T: ClassVar = _TypeOf("T", AnyAttr())
    destination = operand_def(T)
    grid = prop_def(FlatSymbolRefAttr)
    split_axes = prop_def(GridAxesArrayAttr)
    halo_sizes = var_operand_def(I64_VALUE)
    static_halo_sizes = prop_def(DenseArrayBase[I64], default_value=i64_array())
    result = result_def(T)

    traits = traits_def(Pure())
    custom_directives = _DIRECTIVES
    assembly_format = (
        "$destination `on` custom<GridRef>($grid) `split_axes` `=` custom<SplitAxes>($split_axes) "
        "(`halo_sizes` `=` custom<IndexList>($halo_sizes, $static_halo_sizes)^)? "
        "attr-dict `:` custom<HaloResultType>(type($result))"
    )

    def __init__(
        self,
        destination: SSAValue,
        grid: str,
        split_axes: Iterable[Iterable[int]],
        halo_sizes: Sequence[int | SSAValue] = (),
    ):
        static, dynamic = _split_mixed(halo_sizes)
        super().__init__(
            operands=[destination, dynamic],
            properties={
                "grid": SymbolRefAttr(grid),
                "split_axes": GridAxesArrayAttr(split_axes),
                "static_halo_sizes": i64_array(static),
            },
            result_types=[destination.type],
        )

    def get_asm_result_names(self) -> Sequence[str | None]:
        return [None]

    def verify_(self) -> None:
        _check_type(self, "operand", 0, self.destination.type, NON0_MEMREF_OR_TENSOR)
        _check_defaulted_operands(self)
        _check_type(self, "result", 0, self.result.type, NON0_MEMREF_OR_TENSOR)
        if self.result.type != self.destination.type:
            raise _op_error(self, "failed to verify that result has same type as destination")
        _check_dynamic_count(
            self, "halo size", self.static_halo_sizes.get_values(), len(self.halo_sizes)
        )
        _grid_or_error(self, self.grid)


COLLECTIVE_OPS: tuple[type[CollectiveOp], ...] = (
    AllGatherOp,
    AllReduceOp,
    AllSliceOp,
    AllToAllOp,
    BroadcastOp,
    GatherOp,
    RecvOp,
    ReduceOp,
    ReduceScatterOp,
    ScatterOp,
    SendOp,
    ShiftOp,
)

Shard = Dialect(
    "shard",
    fast_accessors([
        GridOp,
        GridShapeOp,
        ProcessLinearIndexOp,
        ProcessMultiIndexOp,
        NeighborsLinearIndicesOp,
        ShardingOp,
        ShardOp,
        GetShardingOp,
        ShardShapeOp,
        *COLLECTIVE_OPS,
        UpdateHaloOp,
    ]),
    [GridAxesArrayAttr, ReductionKindAttr, ShardingType],
)
