"""Source locations the way mlir-opt attaches them: `loc("file":line:col)` on every
parsed operation and block argument, and the helpers that turn positions and location
attributes into `file:line:col` for diagnostics.

xDSL's parser only records explicit `loc(...)`; `LocatingParser` hooks three of its
methods to add file locations (a line table built on first use, then a bisect per op).
It is a `FastParser` (shardc.ir.fast_parser) and builds affine expressions as MLIR does
(`MLIRAffineParsing`).
"""

from __future__ import annotations

import gc
import re
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    IntAttr,
    LocationAttr,
    ModuleOp,
    NameLoc,
    NoneAttr,
    StringAttr,
    UnknownLoc,
    UnregisteredOp,
)
from xdsl.ir import Attribute, AttributeInvT, BlockArgument, Operation, SSAValue
from xdsl.parser import UnresolvedOperand
from xdsl.utils.exceptions import MultipleSpansParseError
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from shardc.ir.affine_parser import MLIRAffineParsing
from shardc.ir.fast_parser import FastParser

_NEWLINE = re.compile("\n")


@dataclass
class SourceFile:
    """A named buffer with a line table, for positions -> (line, column) and back."""

    name: str
    text: str
    _lines: list[int] | None = field(default=None, init=False, repr=False)

    @property
    def _line_starts(self) -> list[int]:
        """Offsets where lines start, computed on first use."""
        if self._lines is None:
            self._lines = [0, *(m.end() for m in _NEWLINE.finditer(self.text))]
        return self._lines

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        index = bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def offset(self, line: int, col: int) -> int | None:
        if not 1 <= line <= len(self._line_starts):
            return None
        return self._line_starts[line - 1] + col - 1

    def line_text(self, line: int) -> str | None:
        if not 1 <= line <= len(self._line_starts):
            return None
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start : end if end != -1 else len(self.text)].removesuffix("\r")

    @property
    def num_lines(self) -> int:
        return len(self._line_starts)


def file_loc(name: str, line: int, col: int) -> FileLineColLoc:
    return FileLineColLoc(StringAttr(name), IntAttr(line), IntAttr(col))


def find_file_loc(loc: Attribute | None) -> FileLineColLoc | None:
    """The first file location inside `loc`, as MLIR's `findInstanceOf` finds it."""
    match loc:
        case FileLineColLoc():
            return loc
        case NameLoc():
            return find_file_loc(loc.location)
        case CallSiteLoc():
            return find_file_loc(loc.callee) or find_file_loc(loc.caller)
        case FusedLoc():
            for inner in loc.locations.data:  # pyright: ignore[reportUnknownMemberType]
                if (found := find_file_loc(inner)) is not None:
                    return found
            return None
        case _:
            return None


def op_location(op: Operation) -> LocationAttr:
    """The location of `op`, or of its closest located ancestor (like a pass would)."""
    current: Operation | None = op
    while current is not None:
        if find_file_loc(current.location) is not None:
            return current.location
        current = current.parent_op()
    return op.location


def _fast_file_loc(filename: StringAttr, line: IntAttr, col: IntAttr) -> FileLineColLoc:
    """A FileLineColLoc from parameters known to be valid, skipping the generic
    verification (a third of the cost of locating every op)."""
    loc = FileLineColLoc.__new__(FileLineColLoc)
    object.__setattr__(loc, "filename", filename)
    object.__setattr__(loc, "line", line)
    object.__setattr__(loc, "column", col)
    return loc


# --------------------------------------------------------------------------------------
# Parsing with locations
# --------------------------------------------------------------------------------------

_ALIAS_PREFIX = "\x00loc-alias:"


def _alias_placeholder(name: str) -> NameLoc:
    return NameLoc(StringAttr(_ALIAS_PREFIX + name), NoneAttr())


def _alias_name(loc: Attribute) -> str | None:
    if isinstance(loc, NameLoc) and loc.desc.data.startswith(_ALIAS_PREFIX):
        return loc.desc.data[len(_ALIAS_PREFIX) :]
    return None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a module is parsed: everything parsing
    allocates is kept (the IR) or freed by reference counting, and the collections the
    allocations trigger would scan the growing IR again and again (a quarter of the
    parse time of an 8,000-op program)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class LocatingParser(MLIRAffineParsing, FastParser):
    """An xDSL parser that gives each op the location of its name (MLIR's op location)
    and each block argument the location of its `%name`, unless the input says `loc(...)`.

    It also accepts location aliases defined after their use (`loc(#loc1)` with
    `#loc1 = loc(...)` at the end of the file), which is how mlir-opt prints debug info.
    """

    def __init__(
        self,
        ctx: Context,
        text: str,
        name: str,
        *,
        module_loc: tuple[int, int] = (0, 0),
    ) -> None:
        super().__init__(ctx, text, name)
        self.source = SourceFile(name, text)
        self._name_attr = StringAttr(name)
        self._op_name_starts: list[int] = []
        self._module_loc = module_loc
        self._forward_loc_aliases: dict[str, Span] = {}
        self._loc_aliases: dict[str, LocationAttr] = {}
        self._def_spans: dict[str, Span] = {}
        self._ints: dict[int, IntAttr] = {}

    # -- position helpers --------------------------------------------------------------

    def loc_at(self, offset: int) -> FileLineColLoc:
        line, col = self.source.line_col(offset)
        return _fast_file_loc(self._name_attr, self._int(line), self._int(col))

    def _int(self, value: int) -> IntAttr:
        if (attr := self._ints.get(value)) is None:
            attr = self._ints[value] = IntAttr(value)
        return attr

    @property
    def current_offset(self) -> int:
        return self._current_token.span.start

    @property
    def op_name_starts(self) -> list[int]:
        """Offsets of the names of the ops being parsed, outermost first (after a
        failed parse: the ops it stopped in)."""
        return self._op_name_starts

    # -- hooks -------------------------------------------------------------------------

    def _parse_op_result_list(self) -> list[tuple[Span, int]]:
        results = super()._parse_op_result_list()
        # The op name follows the result list: that is where MLIR locates the op.
        self._op_name_starts.append(self._current_token.span.start)
        return results

    def parse_operation(self) -> Operation:
        depth = len(self._op_name_starts)
        op = super().parse_operation()
        if len(self._op_name_starts) > depth:
            start = self._op_name_starts[depth]
            del self._op_name_starts[depth:]
            if op.location is UNKNOWN_LOC:
                op.location = self.loc_at(start)
            if op.regions:
                _locate_implicit_terminators(op)
                if op.name in _ARGS_AT_OPERANDS:
                    _locate_args_at_operands(op)
                elif op.name in _BODY_AT_OP:
                    _locate_body_at_op(op)
        return op

    def _get_op_by_name(self, name: str) -> type[Operation]:
        """xDSL's lookup, with mlir-opt's messages for unknown operations."""
        dialect_stack = self._parser_state.dialect_stack
        op_type = self._lookup_op(name)
        start = self._op_name_starts[-1] if self._op_name_starts else self.current_offset
        if op_type is not None and not issubclass(op_type, UnregisteredOp):
            return op_type
        custom = self.lexer.input.content[start : start + 1] != '"'
        if op_type is not None and not custom:
            return op_type  # generic syntax of an unregistered op, allowed
        dialect, dot, _ = name.partition(".")
        known_dialect = (
            bool(dot) and dialect != "test" and dialect in self.ctx.registered_dialect_names
        )  # xDSL registers a `test` dialect that mlir-opt does not have
        if custom and not dot:
            default = dialect_stack[-1] if dialect_stack else "builtin"
            self.raise_error(f"custom op '{name}' is unknown (tried '{default}.{name}' as well)", start)
        if custom and known_dialect:
            self.raise_error(f"custom op '{name}' is unknown", start)
        if custom:
            self.raise_error(f"Dialect `{dialect}' not found for custom op '{name}' ", start)
        if known_dialect:
            self.raise_error(
                f"unregistered operation '{name}' found in dialect ('{dialect}') that does not "
                "allow unknown operations",
                start,
            )
        self.raise_error(
            "operation being parsed with an unregistered dialect. If this is intended, please "
            "use -allow-unregistered-dialect with the MLIR tool used"
        )

    def resolve_operand(self, operand: UnresolvedOperand, type: AttributeInvT) -> SSAValue[AttributeInvT]:
        values = self.ssa_values.get(operand.operand_name)
        if values is not None and operand.index < len(values):
            if (prior := values[operand.index].type) != type:
                refs: list[tuple[Span, str | None]] = []
                if (span := self._def_spans.get(operand.operand_name)) is not None:
                    refs.append((span, "prior use here"))
                raise MultipleSpansParseError(
                    operand.span,
                    f"use of value '%{operand.operand_name}' expects different type than prior "
                    f"uses: '{type}' vs '{prior}'",
                    None,
                    refs,
                )
        return super().resolve_operand(operand, type)

    def _register_ssa_definition(self, name: str, values, span: Span) -> None:  # type: ignore[override]
        super()._register_ssa_definition(name, values, span)
        self._def_spans[name] = span
        for value in values:
            if isinstance(value, BlockArgument) and value.location is UNKNOWN_LOC:
                value.location = self.loc_at(span.start)

    def _parse_location(self) -> LocationAttr:
        token = self._current_token
        if token.kind == MLIRTokenKind.BARE_IDENT and token.text == "fused":
            # `fused<metadata>[...]`, which xDSL's location parser lacks
            self._consume_token()
            metadata: Attribute = NoneAttr()
            if self.parse_optional_punctuation("<") is not None:
                metadata = self.parse_attribute()
                self.parse_punctuation(">")
            locs = self.parse_comma_separated_list(self.Delimiter.SQUARE, self._parse_location)
            return FusedLoc(tuple(locs), metadata)
        if token.kind == MLIRTokenKind.HASH_IDENT and token.text not in self.attribute_aliases:
            self._consume_token(MLIRTokenKind.HASH_IDENT)
            if (known := self._loc_aliases.get(token.text)) is not None:
                return known
            self._forward_loc_aliases.setdefault(token.text, token.span)
            return _alias_placeholder(token.text)
        return super()._parse_location()

    def _parse_alias_def(self) -> None:
        token = self._current_token
        if token.kind == MLIRTokenKind.HASH_IDENT:
            # `#name = loc(...)`: a location alias, which xDSL's attribute parser lacks.
            self._consume_token(MLIRTokenKind.HASH_IDENT)
            if (
                self.parse_optional_punctuation("=") is not None
                and self._current_token.text == "loc"
            ):
                if token.text in self.attribute_aliases or token.text in self._loc_aliases:
                    self.raise_error(f"redefinition of attribute alias id '{token.text[1:]}'", token.span)
                loc = self.parse_optional_location()
                assert loc is not None
                self._loc_aliases[token.text] = loc
                return
            self._resume_from(token.span.start)
        super()._parse_alias_def()

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        with _collector_paused():
            if allow_implicit_module:
                module = self._parse_implicit_module()
            else:
                module = super().parse_module(False)
        if module.location is UNKNOWN_LOC:
            module.location = file_loc(self.source.name, *self._module_loc)
        if self._forward_loc_aliases:
            self._resolve_loc_aliases(module)
        return self.attach_file_metadata(module)

    def _parse_implicit_module(self) -> ModuleOp:
        """Top-level ops (and alias definitions) up to the end of input; an empty input
        is an empty module, as in MLIR."""
        ops: list[Operation] = []
        while (kind := self._current_token.kind) != MLIRTokenKind.EOF:
            if kind in (MLIRTokenKind.HASH_IDENT, MLIRTokenKind.EXCLAMATION_IDENT):
                self._parse_alias_def()
            elif kind == MLIRTokenKind.FILE_METADATA_BEGIN:
                self._parse_file_metadata_dictionary()
            elif (op := self.parse_optional_operation()) is not None:
                ops.append(op)
            else:
                self.raise_error("expected operation name in quotes")
        if self.forward_ssa_references:
            names = ", ".join("%" + name for name in self.forward_ssa_references)
            self.raise_error(f"use of undeclared SSA value name: [{names}]")
        if len(ops) == 1 and isinstance(ops[0], ModuleOp):
            return ops[0]
        return ModuleOp(ops)

    # -- forward location aliases ------------------------------------------------------

    def _resolve_loc_aliases(self, module: ModuleOp) -> None:
        for name, span in self._forward_loc_aliases.items():
            if name not in self._loc_aliases:
                self.raise_error("operation location alias was never defined", span)
        for op in module.walk():
            op.location = self._resolve(op.location)
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.args:
                        arg.location = self._resolve(arg.location)

    def _resolve(self, loc: LocationAttr) -> LocationAttr:
        if (name := _alias_name(loc)) is not None:
            return self._resolve(self._loc_aliases[name])
        match loc:
            case NameLoc():
                if isinstance(loc.location, NoneAttr):
                    return loc
                return NameLoc(loc.desc, self._resolve(loc.location))  # pyright: ignore[reportArgumentType]
            case CallSiteLoc():
                return CallSiteLoc(self._resolve(loc.callee), self._resolve(loc.caller))  # pyright: ignore[reportArgumentType]
            case FusedLoc():
                inner = tuple(self._resolve(x) for x in loc.locations.data)  # pyright: ignore
                return FusedLoc(inner, loc.metadata)
            case _:
                return loc


def _locate_implicit_terminators(op: Operation) -> None:
    """A terminator the op's parser added (`scf.yield` of an empty `scf.for` body) has
    the op's location, as MLIR's `ensureTerminator` gives it. Bodies built whole by a
    parser (linalg named ops, `linalg.fill`'s lone yield included; not transpose and
    broadcast, whose builders locate it at the op) keep unknown locations, as in MLIR."""
    if op.name.startswith("linalg.") and op.name not in _BODY_AT_OP | _ARGS_AT_OPERANDS:
        return
    for region in op.regions:
        for block in region.blocks:
            last = block.last_op
            if last is None or last.location is not UNKNOWN_LOC:
                continue
            if all(other.location is not UNKNOWN_LOC for other in block.ops if other is not last):
                last.location = op.location


#: Ops whose parser builds the body with one block argument per operand, located where
#: the operand is defined (MLIR's linalg.transpose/broadcast builders do this).
_ARGS_AT_OPERANDS = frozenset({"linalg.transpose", "linalg.broadcast"})


#: Ops whose short form (`linalg.map { arith.addf } ...`) has the parser build the
#: body ops, which MLIR locates at the op.
_BODY_AT_OP = frozenset({"linalg.map", "linalg.reduce"})


def _locate_body_at_op(op: Operation) -> None:
    for block in op.regions[0].blocks:
        for inner in block.ops:
            if inner.location is UNKNOWN_LOC:
                inner.location = op.location


def _value_location(value: SSAValue) -> LocationAttr:
    if isinstance(value, BlockArgument):
        return value.location
    owner = value.owner
    return owner.location if isinstance(owner, Operation) else UNKNOWN_LOC


def _locate_args_at_operands(op: Operation) -> None:
    block = op.regions[0].blocks.first
    if block is None:
        return
    for arg, operand in zip(block.args, op.operands):
        if arg.location is UNKNOWN_LOC:
            arg.location = _value_location(operand)


def is_unknown(loc: Attribute) -> bool:
    return isinstance(loc, UnknownLoc)

