"""MLIR's `mpi` dialect (upstream trunk), written for shardc.

Mirrors `mlir/include/mlir/Dialect/MPI/IR/{MPI,MPITypes,MPIOps}.td` and the patterns of
`mlir/lib/Dialect/MPI/IR/MPIOps.cpp`: the same op names, custom and generic syntax,
optional `!mpi.retval` results, verifier messages and canonicalizations. xDSL ships a
different, xDSL-specific `mpi` dialect; nothing here comes from it.

https://mlir.llvm.org/docs/Dialects/MPI/
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, TypeVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    I32,
    IntegerAttr,
    MemRefType,
    StringAttr,
    i1,
    i32,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrConstraint,
    BaseAttr,
    EqAttrConstraint,
    IRDLOperation,
    OptOperandDef,
    OptResultDef,
    irdl_attr_definition,
    operand_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.irdl.constraints import IntConstraint, InferenceContext, VerificationContext
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import AttrParser, Parser
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.printer import Printer
from xdsl.traits import HasCanonicalizationPatternsTrait, NoMemoryEffect
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from shardc.ir.op_init import fast_accessors

# ===----------------------------------------------------------------------=== #
# Types
# ===----------------------------------------------------------------------=== #


@irdl_attr_definition
class CommType(ParametrizedAttribute, TypeAttribute):
    """`!mpi.comm`: a handle of an MPI communicator (MPI_Comm)."""

    name = "mpi.comm"


@irdl_attr_definition
class RequestType(ParametrizedAttribute, TypeAttribute):
    """`!mpi.request`: the handle of a non-blocking operation (MPI_Request)."""

    name = "mpi.request"


@irdl_attr_definition
class RetvalType(ParametrizedAttribute, TypeAttribute):
    """`!mpi.retval`: the error code an MPI call returns; compare it with
    `mpi.retval_check` or map it with `mpi.error_class`."""

    name = "mpi.retval"


@irdl_attr_definition
class StatusType(ParametrizedAttribute, TypeAttribute):
    """`!mpi.status`: a reception status (MPI_Status). No op uses it yet upstream."""

    name = "mpi.status"


# ===----------------------------------------------------------------------=== #
# Enums and attributes
# ===----------------------------------------------------------------------=== #


class ErrorClass(StrEnum):
    """MPI's error classes, in the order of their codes (MPI_SUCCESS = 0, ...)."""

    MPI_SUCCESS = "MPI_SUCCESS"
    MPI_ERR_ACCESS = "MPI_ERR_ACCESS"
    MPI_ERR_AMODE = "MPI_ERR_AMODE"
    MPI_ERR_ARG = "MPI_ERR_ARG"
    MPI_ERR_ASSERT = "MPI_ERR_ASSERT"
    MPI_ERR_BAD_FILE = "MPI_ERR_BAD_FILE"
    MPI_ERR_BASE = "MPI_ERR_BASE"
    MPI_ERR_BUFFER = "MPI_ERR_BUFFER"
    MPI_ERR_COMM = "MPI_ERR_COMM"
    MPI_ERR_CONVERSION = "MPI_ERR_CONVERSION"
    MPI_ERR_COUNT = "MPI_ERR_COUNT"
    MPI_ERR_DIMS = "MPI_ERR_DIMS"
    MPI_ERR_DISP = "MPI_ERR_DISP"
    MPI_ERR_DUP_DATAREP = "MPI_ERR_DUP_DATAREP"
    MPI_ERR_ERRHANDLER = "MPI_ERR_ERRHANDLER"
    MPI_ERR_FILE = "MPI_ERR_FILE"
    MPI_ERR_FILE_EXISTS = "MPI_ERR_FILE_EXISTS"
    MPI_ERR_FILE_IN_USE = "MPI_ERR_FILE_IN_USE"
    MPI_ERR_GROUP = "MPI_ERR_GROUP"
    MPI_ERR_INFO = "MPI_ERR_INFO"
    MPI_ERR_INFO_KEY = "MPI_ERR_INFO_KEY"
    MPI_ERR_INFO_NOKEY = "MPI_ERR_INFO_NOKEY"
    MPI_ERR_INFO_VALUE = "MPI_ERR_INFO_VALUE"
    MPI_ERR_IN_STATUS = "MPI_ERR_IN_STATUS"
    MPI_ERR_INTERN = "MPI_ERR_INTERN"
    MPI_ERR_IO = "MPI_ERR_IO"
    MPI_ERR_KEYVAL = "MPI_ERR_KEYVAL"
    MPI_ERR_LOCKTYPE = "MPI_ERR_LOCKTYPE"
    MPI_ERR_NAME = "MPI_ERR_NAME"
    MPI_ERR_NO_MEM = "MPI_ERR_NO_MEM"
    MPI_ERR_NO_SPACE = "MPI_ERR_NO_SPACE"
    MPI_ERR_NO_SUCH_FILE = "MPI_ERR_NO_SUCH_FILE"
    MPI_ERR_NOT_SAME = "MPI_ERR_NOT_SAME"
    MPI_ERR_OP = "MPI_ERR_OP"
    MPI_ERR_OTHER = "MPI_ERR_OTHER"
    MPI_ERR_PENDING = "MPI_ERR_PENDING"
    MPI_ERR_PORT = "MPI_ERR_PORT"
    MPI_ERR_PROC_ABORTED = "MPI_ERR_PROC_ABORTED"
    MPI_ERR_QUOTA = "MPI_ERR_QUOTA"
    MPI_ERR_RANK = "MPI_ERR_RANK"
    MPI_ERR_READ_ONLY = "MPI_ERR_READ_ONLY"
    MPI_ERR_REQUEST = "MPI_ERR_REQUEST"
    MPI_ERR_RMA_ATTACH = "MPI_ERR_RMA_ATTACH"
    MPI_ERR_RMA_CONFLICT = "MPI_ERR_RMA_CONFLICT"
    MPI_ERR_RMA_FLAVOR = "MPI_ERR_RMA_FLAVOR"
    MPI_ERR_RMA_RANGE = "MPI_ERR_RMA_RANGE"
    MPI_ERR_RMA_SHARED = "MPI_ERR_RMA_SHARED"
    MPI_ERR_RMA_SYNC = "MPI_ERR_RMA_SYNC"
    MPI_ERR_ROOT = "MPI_ERR_ROOT"
    MPI_ERR_SERVICE = "MPI_ERR_SERVICE"
    MPI_ERR_SESSION = "MPI_ERR_SESSION"
    MPI_ERR_SIZE = "MPI_ERR_SIZE"
    MPI_ERR_SPAWN = "MPI_ERR_SPAWN"
    MPI_ERR_TAG = "MPI_ERR_TAG"
    MPI_ERR_TOPOLOGY = "MPI_ERR_TOPOLOGY"
    MPI_ERR_TRUNCATE = "MPI_ERR_TRUNCATE"
    MPI_ERR_TYPE = "MPI_ERR_TYPE"
    MPI_ERR_UNKNOWN = "MPI_ERR_UNKNOWN"
    MPI_ERR_UNSUPPORTED_DATAREP = "MPI_ERR_UNSUPPORTED_DATAREP"
    MPI_ERR_UNSUPPORTED_OPERATION = "MPI_ERR_UNSUPPORTED_OPERATION"
    MPI_ERR_VALUE_TOO_LARGE = "MPI_ERR_VALUE_TOO_LARGE"
    MPI_ERR_WIN = "MPI_ERR_WIN"
    MPI_ERR_LASTCODE = "MPI_ERR_LASTCODE"

    @property
    def code(self) -> int:
        """The class's integer value in MLIR's I32 enum."""
        return list(ErrorClass).index(self)


@irdl_attr_definition
class ErrorClassAttr(EnumAttribute[ErrorClass]):
    """`#mpi.errclass<MPI_SUCCESS>`; inside `mpi.retval_check` it prints as `<MPI_SUCCESS>`."""

    name = "mpi.errclass"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> ErrorClass:
        parser.parse_punctuation("<")
        pos = parser.pos
        name = parser.parse_optional_identifier()
        if name is None or name not in ErrorClass.__members__:
            parser.raise_error(
                "expected ::mlir::mpi::MPI_ErrorClassEnum to be one of: "
                + ", ".join(ErrorClass),
                at_position=pos,
            )
        parser.parse_punctuation(">")
        return ErrorClass(name)


class ReductionOp(IntEnum):
    """MPI's predefined reduction operations (MLIR's I32 `MPI_ReductionOpEnum`).

    An op stores one as its integer value (`op = 3 : i32` in generic form) and prints
    its name (`MPI_SUM`) in custom form.
    """

    MPI_OP_NULL = 0
    MPI_MAX = 1
    MPI_MIN = 2
    MPI_SUM = 3
    MPI_PROD = 4
    MPI_LAND = 5
    MPI_BAND = 6
    MPI_LOR = 7
    MPI_BOR = 8
    MPI_LXOR = 9
    MPI_BXOR = 10
    MPI_MINLOC = 11
    MPI_MAXLOC = 12
    MPI_REPLACE = 13


def reduction_op_attr(op: ReductionOp | str | int) -> IntegerAttr[I32]:
    """The `op` property for a reduction given by enum, name or code."""
    value = ReductionOp[op] if isinstance(op, str) else ReductionOp(op)
    return IntegerAttr(int(value), i32)


def _reduction_op_of(attr: Attribute) -> ReductionOp | None:
    """The reduction an `op` property holds, None when it is not a valid one."""
    if not isinstance(attr, IntegerAttr) or attr.type != i32:
        return None
    value = attr.value.data
    return ReductionOp(value) if value in ReductionOp._value2member_map_ else None


@irdl_custom_directive
class ReductionOpKeyword(CustomDirective):
    """Prints the `op` property as its enum keyword; parses a keyword or a string,
    as ODS does for an I32EnumAttr in an assembly format."""

    op: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        prefix = f"custom op '{state.op_type.name}' "
        pos = parser.pos
        name = parser.parse_optional_identifier()
        if name is None or name not in ReductionOp.__members__:
            if name is not None or (name := parser.parse_optional_str_literal()) is None:
                parser.raise_error(
                    prefix + "expected string or keyword containing one of the "
                    "following enum values for attribute 'op' ["
                    + ", ".join(ReductionOp.__members__)
                    + "]",
                    at_position=pos,
                )
            if name not in ReductionOp.__members__:
                parser.raise_error(
                    prefix + f'invalid op attribute specification: "{name}"',
                    at_position=pos,
                )
        self.op.set(state, reduction_op_attr(name))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.op.get(op)
        value = None if attr is None else _reduction_op_of(attr)
        if value is not None:
            printer.print_string(value.name)
        elif attr is not None:  # an unverified op: show what it holds
            printer.print_attribute(attr)


# ===----------------------------------------------------------------------=== #
# ODS-style verification with MLIR's messages
# ===----------------------------------------------------------------------=== #


@dataclass(frozen=True)
class _Typed(AttrConstraint):
    """A value type constraint with MLIR's summary text.

    Only `verify_ods_invariants` enforces it (with MLIR's message); the assembly
    format sees a constraint that accepts anything, so that a wrong type is a verifier
    error as in MLIR rather than a parse error. It still infers types the custom
    syntax leaves out (e.g. `!mpi.retval`).
    """

    inner: AttrConstraint
    summary: str

    def verify(self, attr: Attribute, constraint_context: VerificationContext) -> None:
        pass

    def holds(self, attr: Attribute) -> bool:
        return self.inner.verifies(attr)

    def can_infer(self, var_constraint_names: AbstractSet[str]) -> bool:
        return self.inner.can_infer(var_constraint_names)

    def infer(self, context: InferenceContext) -> Attribute:
        return self.inner.infer(context)

    def get_bases(self) -> set[type[Attribute]] | None:
        return self.inner.get_bases()

    def mapping_type_vars(
        self, type_var_mapping: Mapping[TypeVar, AttrConstraint | IntConstraint]
    ) -> _Typed:
        return self


@dataclass(frozen=True)
class _NonZeroRankMemRef(AttrConstraint):
    """A ranked memref of rank > 0 (ODS `AnyNon0RankedMemRef`)."""

    def verify(self, attr: Attribute, constraint_context: VerificationContext) -> None:
        if not isinstance(attr, MemRefType) or attr.get_num_dims() == 0:
            raise VerifyException(f"{attr} is not a memref of non-zero rank")

    def mapping_type_vars(
        self, type_var_mapping: Mapping[TypeVar, AttrConstraint | IntConstraint]
    ) -> _NonZeroRankMemRef:
        return self


_COMM = _Typed(BaseAttr(CommType), "MPI communicator handler")
_REQUEST = _Typed(BaseAttr(RequestType), "MPI asynchronous request handler")
_RETVAL = _Typed(BaseAttr(RetvalType), "MPI function call return value (!mpi.retval)")
_MEMREF = _Typed(BaseAttr(MemRefType), "memref of any type values")
_NON0_MEMREF = _Typed(_NonZeroRankMemRef(), "non-0-ranked.memref of any type values")
_I32 = _Typed(EqAttrConstraint(i32), "32-bit signless integer")
_I1 = _Typed(EqAttrConstraint(i1), "1-bit signless integer")


def _element_constraint(constr: object) -> _Typed:
    """The per-value constraint inside IRDL's range wrappers of an operand/result."""
    while not isinstance(constr, _Typed):
        constr = getattr(constr, "constraint", None) or getattr(constr, "constr")
    return constr


def _groups(
    defs: Sequence[tuple[str, object]], values: Sequence[SSAValue]
) -> list[tuple[str, bool, Sequence[SSAValue]]]:
    """Split values into ODS groups (name, is_optional, values); at most one group
    is optional, so it takes whatever the fixed groups leave."""
    n_fixed = sum(not isinstance(d, OptOperandDef | OptResultDef) for _, d in defs)
    n_opt = len(values) - n_fixed
    groups: list[tuple[str, bool, Sequence[SSAValue]]] = []
    pos = 0
    for name, d in defs:
        optional = isinstance(d, OptOperandDef | OptResultDef)
        size = max(n_opt, 0) if optional else 1
        groups.append((name, optional, values[pos : pos + size]))
        pos += size
    return groups


def _verify_count(kind: str, defs: Sequence[tuple[str, object]], found: int) -> str | None:
    """MLIR's operand/result count trait message (ZeroOperands, NOperands, ...)."""
    n_fixed = sum(not isinstance(d, OptOperandDef | OptResultDef) for _, d in defs)
    has_opt = n_fixed != len(defs)
    plural = "operands" if kind == "operand" else "results"
    if has_opt:
        if n_fixed and found < n_fixed:
            return f"expected {n_fixed} or more {plural}"
        return None
    if n_fixed == 0:
        return None if found == 0 else f"requires zero {plural}"
    if n_fixed == 1:
        if found == 1:
            return None
        return "requires a single operand" if kind == "operand" else "requires one result"
    if found != n_fixed:
        return f"expected {n_fixed} {plural}, but found {found}"
    return None


def _verify_values(op: IRDLOperation, kind: str) -> str | None:
    """Group sizes and value type constraints, in ODS order."""
    op_def = op.get_irdl_definition()
    defs = op_def.operands if kind == "operand" else op_def.results
    values = op.operands if kind == "operand" else op.results
    index = 0
    for name, optional, group in _groups(defs, values):
        if optional and len(group) > 1:
            return (
                f"{kind} group starting at #{index} requires 0 or 1 element, "
                f"but found {len(group)}"
            )
        constr = _element_constraint(dict(defs)[name].constr)
        for value in group:
            if not constr.holds(value.type):
                return f"{kind} #{index} must be {constr.summary}, but got '{value.type}'"
            index += 1
    return None


def _verify_properties(op: IRDLOperation) -> None:
    """What MLIR checks when it converts the property dictionary (at parse time)."""
    checks: dict[str, Callable[[Attribute], bool]] = getattr(op, "PROPERTY_CHECKS", {})
    for name, valid in checks.items():
        if name in op.properties and not valid(op.properties[name]):
            shown = ", ".join(f"{k} = {v}" for k, v in op.properties.items())
            raise VerifyException(
                f"invalid properties {{{shown}}} for op {op.name}: "
                f"Invalid attribute `{name}` in property conversion: {op.properties[name]}"
            )


def verify_ods_invariants(op: IRDLOperation) -> None:
    """Check what MLIR's generated verifier checks, in its order and with its texts:
    result and operand counts, required properties, then operand and result types."""
    _verify_properties(op)
    op_def = op.get_irdl_definition()
    prefix = f"'{op.name}' op "
    for message in (
        _verify_count("result", op_def.results, len(op.results)),
        _verify_count("operand", op_def.operands, len(op.operands)),
    ):
        if message is not None:
            raise VerifyException(prefix + message)
    for name in op_def.properties:
        if name not in op.properties:
            raise VerifyException(prefix + f"requires attribute '{name}'")
    for kind in ("operand", "result"):
        if (message := _verify_values(op, kind)) is not None:
            raise VerifyException(prefix + message)


_OpT = TypeVar("_OpT", bound=IRDLOperation)


def mpi_op(cls: type[_OpT]) -> type[_OpT]:
    """`irdl_op_definition`, with MLIR's generated invariant checks run first so that
    their messages, not xDSL's generic ones, report a malformed op. The assembly format
    compiles on first use."""
    from shardc.dialects.lazy_format import lazy_format_op_definition

    cls = lazy_format_op_definition(cls)
    checks_then_rest = cls.verify_

    def verify_(self: IRDLOperation) -> None:
        verify_ods_invariants(self)
        checks_then_rest(self)

    # shardc.ir.fast_verify runs the two parts itself, memoizing the generated checks
    verify_.shardc_verify_parts = (verify_ods_invariants, checks_then_rest)  # type: ignore[attr-defined]
    cls.verify_ = verify_  # type: ignore[method-assign]
    return cls


def _retval_type(retval: bool) -> list[Attribute]:
    return [RetvalType()] if retval else []


# ===----------------------------------------------------------------------=== #
# Canonicalization patterns
# ===----------------------------------------------------------------------=== #


def _has_static_shape(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and all(d >= 0 for d in type_.get_shape())


class FoldCast(RewritePattern):
    """A dynamically shaped buffer that is a `memref.cast` of a statically shaped one:
    use the static one (send, recv, isend, irecv)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, SendOp | RecvOp | ISendOp | IRecvOp):
            return
        if _has_static_shape(op.ref.type):
            return
        cast = op.ref.owner
        if not isinstance(cast, Operation) or cast.name != "memref.cast":
            return
        source = cast.operands[0]
        if not _has_static_shape(source.type):
            return
        op.operands[0] = source
        rewriter.notify_op_modified(op)


_DLTI_QUERYABLE = (
    "dlti.map",
    "dlti.dl_spec",
    "dlti.target_system_spec",
    "dlti.target_device_spec",
)


def _dlti_entries(attr: Attribute) -> Sequence[Attribute] | None:
    """The entries of a DLTI attribute MLIR can query (duck-typed: the shardc dlti
    overlay and xDSL's share the `entries` layout, not the classes)."""
    if attr.name not in _DLTI_QUERYABLE:
        return None
    return getattr(attr, "entries", None)


def _dlti_query(op: Operation, key: str) -> Attribute | None:
    """MLIR's `dlti::query(op, {key})`: the value of `key` in the closest DLTI map
    attached to `op` or an ancestor; None if that closest map lacks the key."""
    wanted = StringAttr(key)
    current: Operation | None = op
    while current is not None:
        for _, attr in sorted(current.attributes.items()):
            entries = _dlti_entries(attr)
            if entries is None:
                continue
            for entry in entries:
                if getattr(entry, "key", None) == wanted:
                    return getattr(entry, "value")
            return None
        current = current.parent_op()
    return None


def _emit_error(op: Operation, message: str) -> None:
    """Report an error without failing, as MLIR's `op->emitError()` in a pattern does;
    where shardc's diagnostic engine is missing, fail with the error instead."""
    try:
        from shardc.ir.diagnostics import emit
    except ImportError:  # pragma: no cover - the engine ships with shardc
        raise VerifyException(message) from None
    emit(op, "error", message)


class FoldToDLTIConst(RewritePattern):
    """`mpi.comm_rank`/`mpi.comm_size` of `mpi.comm_world` become an i32 constant when
    DLTI knows the world rank/size (`MPI:comm_world_rank`, `MPI:comm_world_size`).

    Upstream replaces a used `!mpi.retval` with itself and then erases the op (a
    crash); here a used retval keeps the op.
    """

    def __init__(self, op_type: type[CommRankOp | CommSizeOp], key: str):
        self.op_type = op_type
        self.key = key

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, self.op_type):
            return
        world = op.comm.owner
        if not isinstance(world, CommWorldOp):
            return
        value = _dlti_query(op, self.key)
        if value is None:
            return
        if not isinstance(value, IntegerAttr):
            _emit_error(op, f"Expected an integer attribute for {self.key}")
            return
        if op.retval is not None and op.retval.uses:
            return
        wrapped = (value.value.data + 2**31) % 2**32 - 2**31  # getI32IntegerAttr's cut
        const = arith.ConstantOp(IntegerAttr(wrapped, i32))
        new_results = [const.result] if op.retval is None else [None, const.result]
        rewriter.replace(op, const, new_results)


class _FoldCastPatterns(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (FoldCast(),)


class _FoldRankPatterns(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (FoldToDLTIConst(CommRankOp, "MPI:comm_world_rank"),)


class _FoldSizePatterns(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (FoldToDLTIConst(CommSizeOp, "MPI:comm_world_size"),)


# ===----------------------------------------------------------------------=== #
# Operations
# ===----------------------------------------------------------------------=== #

def _valid_reduction(attr: Attribute) -> bool:
    return _reduction_op_of(attr) is not None


class _ReductionOpConstraint(AttrConstraint):
    """An i32 integer that names one of MPI's predefined reductions."""

    def verify(self, attr: Attribute, constraint_context: VerificationContext) -> None:
        if not _valid_reduction(attr):
            raise VerifyException(
                "attribute 'op' failed to satisfy constraint: MPI operation class"
            )

    def mapping_type_vars(
        self, type_var_mapping: Mapping[TypeVar, AttrConstraint | IntConstraint]
    ) -> AttrConstraint:
        return self


@mpi_op
class InitOp(IRDLOperation):
    """`MPI_Init(NULL, NULL)`: starts the MPI library."""

    name = "mpi.init"

    retval = opt_result_def(_RETVAL)

    assembly_format = "attr-dict (`:` type($retval)^)?"

    def __init__(self, retval: bool = False):
        super().__init__(result_types=[_retval_type(retval)])


@mpi_op
class CommWorldOp(IRDLOperation):
    """`MPI_COMM_WORLD`: the predefined communicator of all processes."""

    name = "mpi.comm_world"

    comm = result_def(_COMM)

    assembly_format = "attr-dict `:` type(results)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self):
        super().__init__(result_types=[CommType()])


def _asm_names(op: IRDLOperation) -> list[str | None]:
    op_def = op.get_irdl_definition()
    names: list[str | None] = []
    for name, _, group in _groups(op_def.results, op.results):
        names.extend(name for _ in group)
    return names


@mpi_op
class CommRankOp(IRDLOperation):
    """`MPI_Comm_rank(comm, &rank)`: this process's rank in `comm`."""

    name = "mpi.comm_rank"

    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)
    rank = result_def(_I32)

    assembly_format = "`(` $comm `)` attr-dict `:` type(results)"
    traits = traits_def(NoMemoryEffect(), _FoldRankPatterns())

    def __init__(self, comm: SSAValue | Operation, retval: bool = False):
        super().__init__(operands=[comm], result_types=[_retval_type(retval), i32])

    def get_asm_result_names(self) -> Sequence[str | None]:
        return _asm_names(self)


@mpi_op
class CommSizeOp(IRDLOperation):
    """`MPI_Comm_size(comm, &size)`: the number of processes in `comm`."""

    name = "mpi.comm_size"

    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)
    size = result_def(_I32)

    assembly_format = "`(` $comm `)` attr-dict `:` type(results)"
    traits = traits_def(NoMemoryEffect(), _FoldSizePatterns())

    def __init__(self, comm: SSAValue | Operation, retval: bool = False):
        super().__init__(operands=[comm], result_types=[_retval_type(retval), i32])

    def get_asm_result_names(self) -> Sequence[str | None]:
        return _asm_names(self)


@mpi_op
class CommSplitOp(IRDLOperation):
    """`MPI_Comm_split(comm, color, key, &newcomm)`: one sub-communicator per color,
    ranked by key."""

    name = "mpi.comm_split"

    comm = operand_def(_COMM)
    color = operand_def(_I32)
    key = operand_def(_I32)
    retval = opt_result_def(_RETVAL)
    newcomm = result_def(_COMM)

    assembly_format = "`(` $comm `,` $color `,` $key `)` attr-dict `:` type(results)"

    def __init__(
        self,
        comm: SSAValue | Operation,
        color: SSAValue | Operation,
        key: SSAValue | Operation,
        retval: bool = False,
    ):
        super().__init__(
            operands=[comm, color, key], result_types=[_retval_type(retval), CommType()]
        )

    def get_asm_result_names(self) -> Sequence[str | None]:
        return _asm_names(self)


class _PointToPoint(IRDLOperation):
    """Shared builder of send/recv/isend/irecv: (buffer, tag, peer rank, comm)."""

    def __init__(
        self,
        ref: SSAValue | Operation,
        tag: SSAValue | Operation,
        rank: SSAValue | Operation,
        comm: SSAValue | Operation,
        retval: bool = False,
    ):
        results: list[list[Attribute] | Attribute] = [_retval_type(retval)]
        if len(type(self).get_irdl_definition().results) == 2:  # isend, irecv
            results.append(RequestType())
        super().__init__(operands=[ref, tag, rank, comm], result_types=results)


@mpi_op
class SendOp(_PointToPoint):
    """`MPI_Send(ptr, size, dtype, dest, tag, comm)`: blocking send of a buffer."""

    name = "mpi.send"

    ref = operand_def(_MEMREF)
    tag = operand_def(_I32)
    dest = operand_def(_I32)
    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)

    assembly_format = (
        "`(` $ref `,` $tag `,` $dest `,` $comm `)` attr-dict `:` "
        "type($ref) `,` type($tag) `,` type($dest) (`->` type($retval)^)?"
    )
    traits = traits_def(_FoldCastPatterns())


@mpi_op
class ISendOp(_PointToPoint):
    """`MPI_Isend(ptr, size, dtype, dest, tag, comm, &req)`: non-blocking send."""

    name = "mpi.isend"

    ref = operand_def(_MEMREF)
    tag = operand_def(_I32)
    dest = operand_def(_I32)
    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)
    req = result_def(_REQUEST)

    assembly_format = (
        "`(` $ref `,` $tag `,` $dest `,` $comm `)` attr-dict `:` "
        "type($ref) `,` type($tag) `,` type($dest) `->` type(results)"
    )
    traits = traits_def(_FoldCastPatterns())

    def get_asm_result_names(self) -> Sequence[str | None]:
        return _asm_names(self)


@mpi_op
class RecvOp(_PointToPoint):
    """`MPI_Recv(ptr, size, dtype, source, tag, comm, MPI_STATUS_IGNORE)`: blocking
    receive into a buffer."""

    name = "mpi.recv"

    ref = operand_def(_MEMREF)
    tag = operand_def(_I32)
    source = operand_def(_I32)
    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)

    assembly_format = (
        "`(` $ref `,` $tag `,` $source `,` $comm `)` attr-dict `:` "
        "type($ref) `,` type($tag) `,` type($source) (`->` type($retval)^)?"
    )
    traits = traits_def(_FoldCastPatterns())


@mpi_op
class IRecvOp(_PointToPoint):
    """`MPI_Irecv(ptr, size, dtype, source, tag, comm, &req)`: non-blocking receive."""

    name = "mpi.irecv"

    ref = operand_def(_MEMREF)
    tag = operand_def(_I32)
    source = operand_def(_I32)
    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)
    req = result_def(_REQUEST)

    assembly_format = (
        "`(` $ref `,` $tag `,` $source `,` $comm `)` attr-dict `:` "
        "type($ref) `,` type($tag) `,` type($source) `->` type(results)"
    )
    traits = traits_def(_FoldCastPatterns())

    def get_asm_result_names(self) -> Sequence[str | None]:
        return _asm_names(self)


@mpi_op
class AllGatherOp(IRDLOperation):
    """`MPI_Allgather`: every process receives the concatenation of all send buffers;
    the receive count is `num_elements(recvbuf) / comm_size`."""

    name = "mpi.allgather"

    sendbuf = operand_def(_MEMREF)
    recvbuf = operand_def(_MEMREF)
    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)

    assembly_format = (
        "`(` $sendbuf `,` $recvbuf `,` $comm `)` attr-dict `:` "
        "type($sendbuf) `,` type($recvbuf) (`->` type($retval)^)?"
    )

    def __init__(
        self,
        sendbuf: SSAValue | Operation,
        recvbuf: SSAValue | Operation,
        comm: SSAValue | Operation,
        retval: bool = False,
    ):
        super().__init__(
            operands=[sendbuf, recvbuf, comm], result_types=[_retval_type(retval)]
        )


class _Reduction(IRDLOperation):
    """Shared builder of allreduce and reduce_scatter_block."""

    PROPERTY_CHECKS: ClassVar[dict[str, Callable[[Attribute], bool]]] = {
        "op": _valid_reduction
    }

    def __init__(
        self,
        sendbuf: SSAValue | Operation,
        recvbuf: SSAValue | Operation,
        op: ReductionOp | str | int,
        comm: SSAValue | Operation,
        retval: bool = False,
    ):
        super().__init__(
            operands=[sendbuf, recvbuf, comm],
            result_types=[_retval_type(retval)],
            properties={"op": reduction_op_attr(op)},
        )

    @property
    def reduction(self) -> ReductionOp:
        """The reduction as an enum (the `op` property holds its i32 code)."""
        value = _reduction_op_of(self.properties["op"])
        assert value is not None, "verified ops hold a valid reduction"
        return value


@mpi_op
class AllReduceOp(_Reduction):
    """`MPI_Allreduce(sendbuf, recvbuf, op, comm)`: every process receives the
    element-wise reduction of all send buffers."""

    name = "mpi.allreduce"

    sendbuf = operand_def(_MEMREF)
    recvbuf = operand_def(_MEMREF)
    op = prop_def(_ReductionOpConstraint())
    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)

    assembly_format = (
        "`(` $sendbuf `,` $recvbuf `,` custom<ReductionOpKeyword>($op) `,` $comm `)` "
        "attr-dict `:` type($sendbuf) `,` type($recvbuf) (`->` type($retval)^)?"
    )
    custom_directives = (ReductionOpKeyword,)


@mpi_op
class ReduceScatterBlockOp(_Reduction):
    """`MPI_Reduce_scatter_block`: reduce element-wise across processes, then give each
    process one equal block of the result."""

    name = "mpi.reduce_scatter_block"

    sendbuf = operand_def(_NON0_MEMREF)
    recvbuf = operand_def(_NON0_MEMREF)
    op = prop_def(_ReductionOpConstraint())
    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)

    assembly_format = (
        "`(` $sendbuf `,` $recvbuf `,` custom<ReductionOpKeyword>($op) `,` $comm `)` "
        "attr-dict `:` type($sendbuf) `,` type($recvbuf) (`->` type($retval)^)?"
    )
    custom_directives = (ReductionOpKeyword,)

    def verify_(self) -> None:
        send, recv = self.sendbuf.type, self.recvbuf.type
        assert isinstance(send, MemRefType) and isinstance(recv, MemRefType)
        if send.get_element_type() != recv.get_element_type():
            raise VerifyException(
                f"'{self.name}' op sendbuf and recvbuf must have the same element type"
            )


@mpi_op
class BarrierOp(IRDLOperation):
    """`MPI_Barrier(comm)`: waits until every process of `comm` reaches it."""

    name = "mpi.barrier"

    comm = operand_def(_COMM)
    retval = opt_result_def(_RETVAL)

    assembly_format = "`(` $comm `)` attr-dict (`->` type($retval)^)?"

    def __init__(self, comm: SSAValue | Operation, retval: bool = False):
        super().__init__(operands=[comm], result_types=[_retval_type(retval)])


@mpi_op
class WaitOp(IRDLOperation):
    """`MPI_Wait(req, MPI_STATUS_IGNORE)`: blocks until a request completes.

    It has effects (as in MLIR 22.1.8): the newest trunk declares it free of memory
    effects, so canonicalize would erase every wait whose return code is unused and a
    receive would never complete. We keep the effect and note the difference.
    """

    name = "mpi.wait"

    req = operand_def(_REQUEST)
    retval = opt_result_def(_RETVAL)

    assembly_format = "`(` $req `)` attr-dict `:` type($req) (`->` type($retval)^)?"

    def __init__(self, req: SSAValue | Operation, retval: bool = False):
        super().__init__(operands=[req], result_types=[_retval_type(retval)])


@mpi_op
class FinalizeOp(IRDLOperation):
    """`MPI_Finalize()`: shuts the MPI library down."""

    name = "mpi.finalize"

    retval = opt_result_def(_RETVAL)

    assembly_format = "attr-dict (`:` type($retval)^)?"

    def __init__(self, retval: bool = False):
        super().__init__(result_types=[_retval_type(retval)])


@mpi_op
class RetvalCheckOp(IRDLOperation):
    """Compares a return value with an error class (`%ok = mpi.retval_check %rv =
    <MPI_SUCCESS> : i1`)."""

    name = "mpi.retval_check"

    val = operand_def(_RETVAL)
    errclass = prop_def(ErrorClassAttr)
    res = result_def(_I1)

    PROPERTY_CHECKS: ClassVar[dict[str, Callable[[Attribute], bool]]] = {
        "errclass": lambda a: isinstance(a, ErrorClassAttr)
    }

    assembly_format = "$val `=` $errclass attr-dict `:` type($res)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self, val: SSAValue | Operation, errclass: ErrorClass | str):
        super().__init__(
            operands=[val],
            result_types=[i1],
            properties={"errclass": ErrorClassAttr(ErrorClass(errclass))},
        )


@mpi_op
class ErrorClassOp(IRDLOperation):
    """`MPI_Error_class`: maps a return value to its error class."""

    name = "mpi.error_class"

    val = operand_def(_RETVAL)
    errclass = result_def(_RETVAL)

    assembly_format = "$val attr-dict `:` type($val)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self, val: SSAValue | Operation):
        super().__init__(operands=[val], result_types=[RetvalType()])


MPI = Dialect(
    "mpi",
    fast_accessors([
        InitOp,
        CommWorldOp,
        CommRankOp,
        CommSizeOp,
        CommSplitOp,
        SendOp,
        ISendOp,
        RecvOp,
        IRecvOp,
        AllGatherOp,
        AllReduceOp,
        ReduceScatterBlockOp,
        BarrierOp,
        WaitOp,
        FinalizeOp,
        RetvalCheckOp,
        ErrorClassOp,
    ]),
    [CommType, RequestType, RetvalType, StatusType, ErrorClassAttr],
)
