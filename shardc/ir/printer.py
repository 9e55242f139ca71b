"""A printer whose output matches mlir-opt's byte for byte wherever practical.

xDSL's `Printer` keeps source names, prints `builtin.module` and `func.return`, lists
every result of a multi-result op and inlines affine maps. mlir-opt instead:

* names every value in a pre-pass (`SSANameState` in MLIR's AsmPrinter): numbers
  (`%0`, `%1`, ...) continue across the blocks of a region, and a nested region starts
  where its parent region's numbering ended; entry block arguments are `%argN`; ops may
  propose names (`%c0`, `%cst`, `%extracted_slice`, `%in`/`%out` block arguments), and a
  clash gets a `_N` suffix from one counter shared like the numbers;
* prints a multi-result op as `%0:2 = ...` and its uses as `%0#1`;
* drops the dialect prefix of an op whose dialect is the default of the enclosing
  region (`builtin` at the top and inside `module`, `func` inside `func.func`);
* hoists affine maps and integer sets into `#map`, `#map1`, `#set` aliases;
* sorts attribute dictionaries by name, and comments block labels with their
  predecessors (`^bb1:  // 2 preds: ^bb0, ^bb1`).

Names come from a registry of foreign ops (`register_asm_result_names`,
`register_asm_block_arg_names`, keyed by op class or op name) and, for our own dialects,
from duck-typed methods on the op: `get_asm_result_names(self) -> Sequence[str | None]`
(one entry per result; `None` leaves a result in the group of the result before it) and
`get_asm_block_arg_names(self, region) -> Sequence[str | None]`. Ops whose xDSL custom
printer disagrees with MLIR's get a replacement printer in `_OP_PRINTERS` (keyed by op
name, so no dialect module is imported to print a file that does not use it).

Floats follow LLVM's APFloat::toString exactly (including its truncation quirks), and
arrays elide `: i64` / `: f64` on their elements as MLIR does.

With `--mlir-print-debuginfo`, locations print as mlir-opt prints them: `loc(#locN)`
on ops, `#locN = loc(...)` aliases numbered in a first (silent) printing pass, block
argument locations inline (`_LocationAliases`). A diagnostic's "see current operation"
note numbers values as the op's closest isolated-from-above ancestor does
(`MLIRPrinter.print_op_in_scope`).

Builtin `dense_resource` blobs referenced by the printed IR follow the module in a
`{-# dialect_resources ... #-}` section, in first-use order (`shardc.ir.resources`).

Known differences left (xDSL does not hold what MLIR prints from, or lacks the op):
* generic form only: linalg.matmul ops built with xDSL's own class (not parsed, not
  shardc's overlay) have the body `addf(%mul, %acc)` where MLIR writes `addf(%acc, %mul)`;
* an empty `scf.index_switch` default region (`default {}`) is parsed by xDSL without
  the implicit `scf.yield` MLIR inserts.
"""

from __future__ import annotations

import math

from collections.abc import Callable, Iterable, Mapping, Sequence
from io import StringIO
from typing import IO

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseIntOrFPElementsAttr,
    MemRefType,
    NoneAttr,
    TensorType,
    FloatAttr,
    f64,
    i64,
    AnyFloat,
    IndexType,
    Float16Type,
    Float32Type,
    Float64Type,
    BFloat16Type,
    AffineMapAttr,
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    AffineSetAttr,
    IntegerType,
    ModuleOp,
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    LocationAttr,
    NameLoc,
    UnknownLoc,
)
from xdsl.ir import ParametrizedAttribute, Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintKind, AffineSet
from xdsl.printer import Printer
from xdsl.utils.identity import identity
from xdsl.traits import IsolatedFromAbove, IsTerminator

from shardc.ir import dense
from shardc.ir.traits import is_unregistered

ResultNamesFn = Callable[[Operation], Sequence[str | None]]
BlockArgNamesFn = Callable[[Operation, Region], Sequence[str | None]]
OpPrinterFn = Callable[["MLIRPrinter", Operation], None]

# ---------------------------------------------------------------------------
# Registries
# ---------------------------------------------------------------------------

_RESULT_NAMES: dict[type[Operation] | str, ResultNamesFn] = {}
_BLOCK_ARG_NAMES: dict[type[Operation] | str, BlockArgNamesFn] = {}
_OP_PRINTERS: dict[type[Operation] | str, OpPrinterFn] = {}

#: Ops implementing OpAsmOpInterface::getDefaultDialect, by op name.
DEFAULT_DIALECTS: dict[str, str] = {"builtin.module": "builtin", "func.func": "func"}


def register_asm_result_names(key: type[Operation] | str, fn: ResultNamesFn) -> None:
    """Name the results of a foreign op (class, looked up along the MRO, or op name)."""
    _RESULT_NAMES[key] = fn
    _LOOKUP_CACHE.clear()


def register_asm_block_arg_names(key: type[Operation] | str, fn: BlockArgNamesFn) -> None:
    """Name the entry block arguments of a foreign op's regions."""
    _BLOCK_ARG_NAMES[key] = fn
    _LOOKUP_CACHE.clear()


def register_op_printer(key: type[Operation] | str, fn: OpPrinterFn) -> None:
    """Replace the custom printer of an op (everything after its name)."""
    _OP_PRINTERS[key] = fn
    _LOOKUP_CACHE.clear()


_LOOKUP_CACHE: dict[tuple[int, type[Operation]], object] = {}


def _lookup(table: Mapping[type[Operation] | str, object], op: Operation) -> object:
    """Registry entry for `op`: its class or a base class, then its op name."""
    cls = type(op)
    key = (id(table), cls)
    try:
        return _LOOKUP_CACHE[key]
    except KeyError:
        pass
    found = None
    for base in cls.__mro__:
        if base in table:
            found = table[base]  # type: ignore[index]
            break
    if found is None and not is_unregistered(op):
        found = table.get(op.name)
    _LOOKUP_CACHE[key] = found
    return found


def _fixed(*names: str | None) -> ResultNamesFn:
    return lambda op: names


def _value_attr(op: Operation) -> Attribute | None:
    value = op.properties.get("value")
    return op.attributes.get("value") if value is None else value


def _constant_name(op: Operation) -> Sequence[str | None]:
    """`arith.constant`: `%true`/`%false`, `%c<value>[_<type>]`, else `%cst`."""
    value = _value_attr(op)
    if isinstance(value, IntegerAttr):
        ty = op.results[0].type
        v = value.value.data
        if isinstance(ty, IntegerType):
            if ty.width.data == 1:
                return ("true" if v else "false",)
            return (f"c{v}_{_type_text(ty)}",)
        return (f"c{v}",)
    return ("cst",)


def _type_text(ty: Attribute) -> str:
    stream = StringIO()
    Printer(stream=stream).print_attribute(ty)
    return stream.getvalue()


def _linalg_in_out(op: Operation, region: Region) -> Sequence[str | None]:
    ins = len(getattr(op, "inputs", ()))
    outs = len(region.blocks.first.args) - ins if region.blocks.first else 0  # type: ignore[union-attr]
    return ("in",) * ins + ("out",) * outs


def _linalg_in_init(op: Operation, region: Region) -> Sequence[str | None]:
    """linalg.reduce: as many inits as inputs."""
    ins = len(op.operands) // 2
    return ("in",) * ins + ("init",) * ins


for _name, _result in {
    "arith.addui_extended": ("sum", "overflow"),
    "arith.mului_extended": ("low", "high"),
    "arith.mulsi_extended": ("low", "high"),
    "tensor.cast": ("cast",),
    "tensor.collapse_shape": ("collapsed",),
    "tensor.concat": ("concat",),
    "tensor.dim": ("dim",),
    "tensor.expand_shape": ("expanded",),
    "tensor.extract": ("extracted",),
    "tensor.extract_slice": ("extracted_slice",),
    "tensor.from_elements": ("from_elements",),
    "tensor.gather": ("gather",),
    "tensor.generate": ("generated",),
    "tensor.insert": ("inserted",),
    "tensor.insert_slice": ("inserted_slice",),
    "tensor.pad": ("padded",),
    "tensor.rank": ("rank",),
    "tensor.reshape": ("reshape",),
    "tensor.scatter": ("scatter",),
    "tensor.splat": ("splat",),
    "memref.alloc": ("alloc",),
    "memref.alloca": ("alloca",),
    "memref.cast": ("cast",),
    "memref.collapse_shape": ("collapse_shape",),
    "memref.dim": ("dim",),
    "memref.expand_shape": ("expand_shape",),
    "memref.extract_aligned_pointer_as_index": ("intptr",),
    "memref.reinterpret_cast": ("reinterpret_cast",),
    "memref.reshape": ("reshape",),
    "memref.subview": ("subview",),
    "memref.transpose": ("transpose",),
    "memref.view": ("view",),
    "linalg.broadcast": ("broadcasted",),
    "linalg.map": ("mapped",),
    "linalg.reduce": ("reduced",),
    "linalg.transpose": ("transposed",),
}.items():
    _RESULT_NAMES[_name] = _fixed(*_result)
_RESULT_NAMES["arith.constant"] = _constant_name


def _strided_metadata_names(op: Operation) -> Sequence[str | None]:
    rank = (len(op.results) - 2) // 2
    tail: list[str | None] = []
    for name in ("sizes", "strides"):
        if rank:
            tail += [name] + [None] * (rank - 1)
    return ["base_buffer", "offset", *tail]


def _index_constant_name(op: Operation) -> Sequence[str | None]:
    value = _value_attr(op)
    return (f"idx{value.value.data}",) if isinstance(value, IntegerAttr) else (None,)


_RESULT_NAMES["memref.extract_strided_metadata"] = _strided_metadata_names
_RESULT_NAMES["index.constant"] = _index_constant_name
_BLOCK_ARG_NAMES["linalg.generic"] = _linalg_in_out
_BLOCK_ARG_NAMES["linalg.map"] = lambda op, region: _linalg_in_out(op, region)[:-1] + ("init",)
_BLOCK_ARG_NAMES["linalg.reduce"] = _linalg_in_init


# ---------------------------------------------------------------------------
# SSA naming (MLIR's SSANameState)
# ---------------------------------------------------------------------------


def _sanitize(name: str) -> str:
    """MLIR's sanitizeIdentifier: keep [A-Za-z0-9$._-], ' ' -> '_', hex otherwise."""
    ok = all(c.isascii() and (c.isalnum() or c in "$._-") for c in name)
    if ok and not name[0].isdigit():
        return name
    out: list[str] = []
    if name[0].isdigit() or not (name[0].isascii() and (name[0].isalnum() or name[0] in "$._-" or name[0] == " ")):
        out.append("_")
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch in "$._-"):
            out.append(ch)
        elif ch == " ":
            out.append("_")
        else:
            out.extend(f"{b:X}" for b in ch.encode())
    return "".join(out)


class _Namer:
    """Assigns mlir-opt's names to every value and block under a root op."""

    def __init__(self, use_hooks: bool) -> None:
        self.use_hooks = use_hooks
        #: printed text of each value at a use (`%0`, `%0#1`, `%arg0`)
        self.uses: dict[SSAValue, str] = {}
        #: result groups of multi-result ops: (start, size, head text)
        self.groups: dict[Operation, list[tuple[int, str]]] = {}
        self.blocks: dict[Block, str] = {}
        self.used: set[str] = set()
        self.next_value = 0
        self.next_arg = 0
        self.next_conflict = 0
        self._scopes: list[list[str]] = [[]]

    def unique(self, name: str) -> str:
        name = _sanitize(name)
        if name in self.used:
            used = self.used
            while True:
                probe = f"{name}_{self.next_conflict}"
                self.next_conflict += 1
                if probe not in used:
                    name = probe
                    break
        self.used.add(name)
        self._scopes[-1].append(name)
        return name

    def name_root(self, op: Operation) -> None:
        """Name `op`'s results and everything nested in it.

        Regions are processed from a stack, each starting from the counters its parent
        region ended with, in a scope that sees its ancestors' names. The generic form
        keeps the counters running instead (MLIR prints unique ids there), which makes
        the stack order (last region first) visible in the numbers.
        """
        self._scopes = [[]]
        self.used = set()
        self.next_value = self.next_arg = self.next_conflict = 0
        self.number_op(op)
        unique_ids = not self.use_hooks
        stack = [(r, self.next_value, self.next_arg, self.next_conflict, 1) for r in op.regions]
        scopes = self._scopes
        used = self.used
        while stack:
            region, value, arg, conflict, depth = stack.pop()
            if not unique_ids:
                self.next_value, self.next_arg, self.next_conflict = value, arg, conflict
            while len(scopes) > depth:
                for name in scopes.pop():
                    used.discard(name)
            scopes.append([])
            nested = self.number_region(region)
            depth = len(scopes)
            counters = (self.next_value, self.next_arg, self.next_conflict)
            for child in nested:
                for r in child.regions:
                    stack.append((r, *counters, depth))

    def number_region(self, region: Region) -> list[Operation]:
        """Number the region's own values; return its ops that have regions."""
        uses = self.uses
        parent = region.parent
        if self.use_hooks and parent is not None:
            fn = getattr(parent, "get_asm_block_arg_names", None)
            names = (
                fn(region) if fn is not None
                else (f(parent, region) if (f := _lookup(_BLOCK_ARG_NAMES, parent)) else None)  # type: ignore[operator]
            )
            if names and region.blocks.first is not None:
                for arg, name in zip(region.blocks.first.args, names):
                    if name:
                        uses[arg] = "%" + self.unique(name)
        nested: list[Operation] = []
        for index, block in enumerate(region.blocks):
            self.blocks[block] = f"bb{index}"
            entry = index == 0
            for arg in block.args:
                if arg in uses:
                    continue
                if entry:
                    uses[arg] = "%" + self.unique(f"arg{self.next_arg}")
                    self.next_arg += 1
                else:
                    uses[arg] = f"%{self.next_value}"
                    self.next_value += 1
            for op in block.ops:
                if op.results:
                    self.number_op(op)
                if op.regions:
                    nested.append(op)
        return nested

    def number_op(self, op: Operation) -> None:
        results = op.results
        if not results:
            return
        names: Sequence[str | None] | None = None
        if self.use_hooks:
            fn = getattr(op, "get_asm_result_names", None)
            if fn is not None:
                names = fn()
            elif (f := _lookup(_RESULT_NAMES, op)) is not None:
                names = f(op)  # type: ignore[operator]
        uses = self.uses
        if not names:
            head = f"%{self.next_value}"
            self.next_value += 1
            if len(results) == 1:
                uses[results[0]] = head
            else:
                for i, r in enumerate(results):
                    uses[r] = f"{head}#{i}"
                self.groups[op] = [(0, head)]
            return
        heads: list[tuple[int, str]] = []
        for i, name in enumerate(names):
            if name and i < len(results):
                heads.append((i, "%" + self.unique(name)))
        if not heads or heads[0][0] != 0:
            heads.insert(0, (0, f"%{self.next_value}"))
            self.next_value += 1
        if len(results) == 1:
            uses[results[0]] = heads[0][1]
            return
        bounds = [start for start, _ in heads] + [len(results)]
        for g, (start, head) in enumerate(heads):
            end = bounds[g + 1]
            if end - start == 1:
                uses[results[start]] = head
            else:
                for i in range(start, end):
                    uses[results[i]] = f"{head}#{i - start}"
        self.groups[op] = heads


# ---------------------------------------------------------------------------
# Affine maps and sets as MLIR prints them
# ---------------------------------------------------------------------------


def _affine_expr(
    e: AffineExpr,
    strong: bool = False,
    dims: Sequence[str] | None = None,
    syms: Sequence[str] | None = None,
) -> str:
    """MLIR's printAffineExpr; `dims`/`syms` replace `dN`/`sN` (SSA names in affine ops)."""
    if isinstance(e, AffineDimExpr):
        return dims[e.position] if dims is not None else f"d{e.position}"
    if isinstance(e, AffineSymExpr):
        return syms[e.position] if syms is not None else f"s{e.position}"
    if isinstance(e, AffineConstantExpr):
        return str(e.value)
    assert isinstance(e, AffineBinaryOpExpr)

    def sub(x: AffineExpr, s: bool = False) -> str:
        return _affine_expr(x, s, dims, syms)

    lhs, rhs, kind = e.lhs, e.rhs, e.kind
    if kind is not AffineBinaryOpKind.Add:
        if kind is AffineBinaryOpKind.Mul and isinstance(rhs, AffineConstantExpr) and rhs.value == -1:
            text = "-" + sub(lhs, True)
        else:
            text = f"{sub(lhs, True)} {_BINOP[kind]} {sub(rhs, True)}"
        return f"({text})" if strong else text
    text: str | None = None
    if (
        isinstance(rhs, AffineBinaryOpExpr)
        and rhs.kind is AffineBinaryOpKind.Mul
        and isinstance(rhs.rhs, AffineConstantExpr)
    ):
        c = rhs.rhs.value
        if c == -1:
            inner = sub(rhs.lhs, isinstance(rhs.lhs, AffineBinaryOpExpr) and rhs.lhs.kind is AffineBinaryOpKind.Add)
            text = f"{sub(lhs)} - {inner}"
        elif c < -1:
            text = f"{sub(lhs)} - {sub(rhs.lhs, True)} * {-c}"
    if text is None and isinstance(rhs, AffineConstantExpr) and rhs.value < 0:
        text = f"{sub(lhs)} - {-rhs.value}"
    if text is None:
        text = f"{sub(lhs)} + {sub(rhs)}"
    return f"({text})" if strong else text


def affine_expr_text(
    e: AffineExpr, dims: Sequence[str] | None = None, syms: Sequence[str] | None = None
) -> str:
    """An affine expression as MLIR prints it, with optional names for dims/symbols."""
    return _affine_expr(e, False, dims, syms)


_BINOP = {
    AffineBinaryOpKind.Mul: "*",
    AffineBinaryOpKind.FloorDiv: "floordiv",
    AffineBinaryOpKind.CeilDiv: "ceildiv",
    AffineBinaryOpKind.Mod: "mod",
}


def _dims_syms(num_dims: int, num_symbols: int) -> str:
    text = "(" + ", ".join(f"d{i}" for i in range(num_dims)) + ")"
    if num_symbols:
        text += "[" + ", ".join(f"s{i}" for i in range(num_symbols)) + "]"
    return text


def affine_map_text(m: AffineMap) -> str:
    """`(d0)[s0] -> (d0 + s0)`, as MLIR prints the body of an `affine_map<...>`."""
    results = ", ".join(_affine_expr(r) for r in m.results)
    return f"{_dims_syms(m.num_dims, m.num_symbols)} -> ({results})"


def integer_set_text(s: AffineSet) -> str:
    parts: list[str] = []
    for c in s.constraints:
        expr = c.lhs - c.rhs if not (isinstance(c.rhs, AffineConstantExpr) and c.rhs.value == 0) else c.lhs
        if c.kind is AffineConstraintKind.le:
            expr = -expr
        op = "==" if c.kind is AffineConstraintKind.eq else ">="
        parts.append(f"{_affine_expr(expr)} {op} 0")
    return f"{_dims_syms(s.num_dims, s.num_symbols)} : ({', '.join(parts)})"


_ALIAS_FREE: frozenset[type[Attribute]] = frozenset(
    {IntegerType, IndexType, Float16Type, Float32Type, Float64Type, BFloat16Type}
)


_SIGNIFICAND_BITS: dict[type[Attribute], int] = {
    Float16Type: 11,
    BFloat16Type: 8,
    Float32Type: 24,
    Float64Type: 53,
}


def apfloat_text(
    value: float, bits: int, precision: int = 0, max_padding: int = 3, truncate_zero: bool = True
) -> str:
    """The text LLVM's `APFloat::toString` gives for a finite `value` whose format has
    `bits` significand bits. Its quirks matter for byte-identical output: digits beyond
    what `precision` needs are cut off (not rounded) before the last digit is rounded,
    so `0.7` does not survive six digits while `0.3` does."""
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        digits, exp = "0", 0
    else:
        num, den = abs(value).as_integer_ratio()
        if den == 1:
            zeros = (num & -num).bit_length() - 1
            num, exp2 = num >> zeros, zeros
        else:
            exp2 = -(den.bit_length() - 1)
        if not precision:
            precision = 2 + bits * 59 // 196
        if exp2 >= 0:
            significand, exp = num << exp2, 0
        else:
            significand, exp = num * 5**-exp2, exp2
        required = (precision * 196 + 58) // 59
        active = significand.bit_length()
        if active > required and (tens := (active - required) * 59 // 196):
            exp += tens
            significand //= 10**tens
        digits = str(significand)
        stripped = digits.rstrip("0")
        exp += len(digits) - len(stripped)
        digits = stripped
        if len(digits) > precision:
            cut = len(digits) - precision
            head = digits[:precision]
            if digits[precision] >= "5":
                rounded = str(int(head) + 1)
                if len(rounded) > precision:  # carried through: one digit left
                    digits, exp = "1", exp + cut + precision
                else:
                    digits, exp = rounded, exp + cut
            else:
                digits, exp = head, exp + cut
            stripped = digits.rstrip("0")
            exp += len(digits) - len(stripped)
            digits = stripped
    n = len(digits)
    if not max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or n + exp > precision
    else:
        msd = exp + n - 1
        scientific = msd < 0 and -msd > max_padding
    if scientific:
        e = exp + n - 1
        mantissa = digits[0] + "." + (digits[1:] if n > 1 else ("0" if truncate_zero else ""))
        if not truncate_zero and precision > n - 1:
            mantissa += "0" * (precision - n + 1)
        e_digits = str(abs(e)).rjust(1 if truncate_zero else 2, "0")
        return f"{sign}{mantissa}{'E' if truncate_zero else 'e'}{'+' if e >= 0 else '-'}{e_digits}"
    if exp >= 0:
        return sign + digits + "0" * exp
    whole = exp + n
    if whole > 0:
        return f"{sign}{digits[:whole]}.{digits[whole:]}"
    return f"{sign}0.{'0' * -whole}{digits}"


builtins_type = type


def _own_print(printer: Printer, op: Operation) -> None:
    op.print(printer)


# ---------------------------------------------------------------------------
# Location aliases (--mlir-print-debuginfo)
# ---------------------------------------------------------------------------

_LOCATION_TYPES: frozenset[type[Attribute]] = frozenset(
    {FileLineColLoc, NameLoc, CallSiteLoc, FusedLoc, UnknownLoc}
)


def _nested_locations(loc: Attribute) -> tuple[Attribute, ...]:
    """The locations printed inside `loc` (a name's unknown child is not printed)."""
    match loc:
        case NameLoc():
            child = loc.location
            return () if isinstance(child, NoneAttr | UnknownLoc) else (child,)
        case CallSiteLoc():
            return (loc.callee, loc.caller)
        case FusedLoc():
            return tuple(loc.locations.data)  # pyright: ignore[reportUnknownMemberType]
        case _:
            return ()


def _quoted(text: str) -> str:
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    stream = StringIO()
    Printer(stream=stream).print_string_literal(text)
    return stream.getvalue()


class _LocationAliases:
    """MLIR's `#locN` aliases. As MLIR does, a first printing pass records every
    location printed: an op's when the op starts, a block argument's where it is
    printed (a custom format that leaves a block argument out leaves its location
    out). Aliases are numbered by nesting depth (locations without nested ones first),
    then by first use. Aliases a block argument reaches (it prints its own location
    inline) are defined before the IR, the others after it."""

    def __init__(self) -> None:
        self.collecting = False
        self.names: dict[Attribute, str] = {}
        self._order: list[Attribute] = []
        self._depth: dict[Attribute, int] = {}
        self._early: set[Attribute] = set()

    def visit(self, loc: Attribute, early: bool) -> None:
        """Record a location as the printer meets it (ops: before anything of theirs
        is printed; block arguments: where their location is printed)."""
        self._visit(loc, self._order, early)

    def finish(self) -> None:
        """Name the locations recorded: by depth, then by first visit."""
        order = self._order
        ranked = sorted(range(len(order)), key=lambda i: (self._depth[order[i]], i))
        self.names = {order[i]: f"#loc{n or ''}" for n, i in enumerate(ranked)}

    def _visit(self, loc: Attribute, order: list[Attribute], early: bool) -> int:
        depth = self._depth.get(loc)
        if depth is None:
            order.append(loc)
            self._depth[loc] = 0  # placeholder while the nested ones are visited
            inner = [self._visit(c, order, early) for c in _nested_locations(loc)]
            depth = self._depth[loc] = 1 + max(inner) if inner else 0
        if early and loc not in self._early:
            self._early.add(loc)
            for c in _nested_locations(loc):
                self._visit(c, order, True)
        return depth

    def body(self, loc: Attribute, top: bool = True) -> str:
        """What goes inside `loc(...)`; nested locations by their aliases."""
        if not top and (alias := self.names.get(loc)) is not None:
            return alias
        match loc:
            case FileLineColLoc():
                return f"{_quoted(loc.filename.data)}:{loc.line.data}:{loc.column.data}"
            case NameLoc():
                inner = _nested_locations(loc)
                child = f"({self.body(inner[0], False)})" if inner else ""
                return _quoted(loc.desc.data) + child
            case CallSiteLoc():
                return f"callsite({self.body(loc.callee, False)} at {self.body(loc.caller, False)})"
            case FusedLoc():
                meta = "" if isinstance(loc.metadata, NoneAttr) else f"<{_type_text(loc.metadata)}>"
                inner = ", ".join(self.body(x, False) for x in _nested_locations(loc))
                return f"fused{meta}[{inner}]"
            case _:
                return "unknown"

    def definitions(self, *, early: bool, nested: bool) -> str:
        """`#locN = loc(...)` lines of one group, in alias order."""
        lines: list[str] = []
        for loc, name in self.names.items():
            if (loc in self._early) == early and (self._depth[loc] > 0) == nested:
                lines.append(f"{name} = loc({self.body(loc)})\n")
        lines.sort(key=lambda line: int(line[4 : line.index(" ")] or 0))
        return "".join(lines)


# ---------------------------------------------------------------------------
# The printer
# ---------------------------------------------------------------------------


_TENSOR_TEXT_LIMIT = 10_000


_TYPE_TEXT: dict[int, tuple[Attribute, str]] = {}
"""The text of each plain tensor or memref type object printed so far, by its id (the
entry holds the type, so the id stays its own): no encoding, layout or memory space, an
integer, index or float element type."""


def _plain_type(attribute: Attribute) -> bool:
    if type(attribute) is MemRefType:
        return (
            type(attribute.layout) is NoneAttr  # type: ignore[attr-defined]
            and type(attribute.memory_space) is NoneAttr  # type: ignore[attr-defined]
            and isinstance(attribute.element_type, IntegerType | IndexType | AnyFloat)  # type: ignore[attr-defined]
        )
    return _plain_tensor(attribute)


def _plain_tensor(attribute: Attribute) -> bool:
    return type(attribute.encoding) is NoneAttr and isinstance(  # type: ignore[attr-defined]
        attribute.element_type, IntegerType | IndexType | AnyFloat  # type: ignore[attr-defined]
    )


class MLIRPrinter(Printer):
    """xDSL's printer with mlir-opt's naming, op-name elision, result groups, aliases."""

    def __init__(self, stream: IO[str] | None = None, **kwargs: object) -> None:
        super().__init__(stream, **kwargs)  # type: ignore[arg-type]
        self._namer = _Namer(use_hooks=not self.print_generic_format)
        self._named: set[Operation] = set()
        self._default_dialect: list[str] = ["builtin"]
        #: alias name of each aliased attribute, in order of first use
        self._aliases: dict[Attribute, str] = {}
        self._alias_counts: dict[str, int] = {}
        self._depth = 0
        self._previsited: set[Operation] = set()
        self._scoped = False
        #: --mlir-print-debuginfo: alias of every location, and which must precede the IR
        self._locs = _LocationAliases()
        self._op_loc = False
        #: depth of the op whose custom printer is running (-1: none)
        self._custom_depth = -1
        self._text_write = self.stream.write if self._encode is identity else None
        #: the builtin resource keys the printed IR references, in first-use order, and
        #: the name each prints as
        self._resource_keys: dict[str, str] = {}

    def print_string(self, text: str, *, indent: int | None = None) -> None:
        """xDSL's, with a short path for text without a newline (most of it)."""
        write = self._text_write
        if write is not None and "\n" not in text:
            self._current_column += len(text)
            write(text)
            return
        super().print_string(text, indent=indent)

    def print_resource_handle(self, dialect: str, handle: str) -> None:
        if dialect == "builtin":
            from shardc.ir.resources import key_text, written_key

            name = self._resource_keys.get(handle)
            if name is None:
                # the name the file wrote, unless a blob printed earlier has it
                taken = set(self._resource_keys.values())
                name = want = written_key(handle)
                n = 0
                while name in taken:
                    n += 1
                    name = f"{want}_{n}"
                self._resource_keys[handle] = name
            self.print_string(key_text(name))
        else:
            super().print_resource_handle(dialect, handle)

    def resource_section(self, module: Operation | None = None) -> str:
        """`{-# ... #-}` as mlir-opt writes it after the module: `dialect_resources` for
        the referenced keys that have a blob, then the `external_resources` the module's
        file had (nothing when there are neither)."""
        from shardc.ir.resources import blob_of, external_resources, key_text, string_literal

        entries = [(key_text(name), blob) for key, name in self._resource_keys.items() if (blob := blob_of(key))]
        sections = []
        if entries:
            # a blob without data keeps no alignment in MLIR: it prints as 0x00000000
            lines = ",\n".join(f'      {key}: "{"0x00000000" if len(blob) == 10 else blob}"' for key, blob in entries)
            sections.append("  dialect_resources: {\n    builtin: {\n" + lines + "\n    }\n  }")
        groups = external_resources(module) if module is not None else []
        if groups:
            text = ",\n".join(
                f"    {key_text(name)}: {{\n"
                + ",\n".join(
                    f"      {key_text(k)}: {('true' if v else 'false') if isinstance(v, bool) else string_literal(v)}"
                    for k, v in values
                )
                + "\n    }"
                for name, values in groups
            )
            sections.append("  external_resources: {\n" + text + "\n  }")
        if not sections:
            return ""
        return "{-#\n" + ",\n".join(sections) + "\n#-}\n\n"

    def print_op_in_scope(self, op: Operation) -> None:
        """Print `op` alone, with the numbers it has when its closest isolated-from-above
        ancestor (or itself, or its topmost ancestor) is printed: what mlir-opt shows in
        a diagnostic's "see current operation" note (MLIR's local-scope printing)."""
        root = op
        while not root.has_trait(IsolatedFromAbove, value_if_unregistered=False):
            parent = root.parent_op()
            if parent is None:
                break
            root = parent
        self._namer.name_root(root)
        self._named.add(op)
        self._scoped = True
        self.print_op(op)

    # -- names ---------------------------------------------------------------

    def print_ssa_value(self, value: SSAValue) -> str:
        text = self._namer.uses.get(value)
        if text is None:
            if self._scoped:
                # MLIR's text for a value its numbering of the scope did not reach
                self.print_string("<<UNKNOWN SSA VALUE>>")
                return "<<UNKNOWN SSA VALUE>>"
            return super().print_ssa_value(value)
        self.print_string(text)
        return text[1:]

    def _print_results(self, op: Operation) -> None:
        results = op.results
        if not results:
            return
        groups = self._namer.groups.get(op)
        if groups is None:
            text = self._namer.uses.get(results[0])
            if text is None:
                return super()._print_results(op)
            self.print_string(text)
        else:
            bounds = [start for start, _ in groups] + [len(results)]
            parts = []
            for g, (start, head) in enumerate(groups):
                size = bounds[g + 1] - start
                parts.append(f"{head}:{size}" if size > 1 else head)
            self.print_string(", ".join(parts))
        self.print_string(" = ")

    def _populate_block_name(self, block: Block, block_index: int | None = None) -> None:
        name = self._namer.blocks.get(block)
        if name is None:
            if block.parent is not None:
                name = f"bb{block.parent.get_block_index(block)}"
            else:
                name = f"bb{self._get_new_valid_block_id()}"
        self._blocks[block] = name

    # -- structure -----------------------------------------------------------

    def print_op(self, op: Operation) -> None:
        if self._depth == 0 and op not in self._named:
            self._namer.name_root(op)
            self._named.add(op)

        self._depth += 1
        try:
            self._print_op(op)
        finally:
            self._depth -= 1

    def _print_op(self, op: Operation) -> None:
        if self._locs.collecting:
            self._locs.visit(op.location, False)
        begin = self._current_column
        self._print_results(op)
        custom = None
        if is_unregistered(op):
            self.print_string_literal(op.op_name.data)  # escaped: the name is IR text
        elif self.print_generic_format or Operation.print is type(op).print:
            self.print_string(f'"{op.name}"')
        else:
            name = op.name
            default = self._default_dialect[-1]
            if default and name.startswith(default) and name[len(default) : len(default) + 1] == "." and name.count(".") == 1:
                name = name[len(default) + 1 :]
            self.print_string(name)
            custom = _lookup(_OP_PRINTERS, op) or _own_print
        if custom is None and op not in self._previsited:
            self._previsit(op)
        end = self._current_column
        if op in self.diagnostic.op_messages:
            for message in self.diagnostic.op_messages[op]:
                self._add_message_on_next_line(message, begin, end)
        if is_unregistered(op):
            op_name = op.op_name
            del op.attributes["op_name__"]
            self.print_op_with_default_format(op)
            op.attributes["op_name__"] = op_name
        elif custom is not None:
            outer, self._custom_depth = self._custom_depth, self._depth
            try:
                custom(self, op)  # type: ignore[operator]
            finally:
                self._custom_depth = outer
            if self.print_debuginfo:
                self.print_string(" ")
                self._print_op_location(op)
        else:
            self.print_op_with_default_format(op)

    def _previsit(self, op: Operation) -> None:
        """Register the aliases of a generically printed op in mlir-opt's order:
        nested regions first, then operand and result types, then attributes."""
        self._previsited.add(op)
        visit = self._visit_aliases
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    visit(arg.type)
                for child in block.ops:
                    self._previsit(child)
        for operand in op.operands:
            visit(operand.type)
        for result in op.results:
            visit(result.type)
        attrs = {**op.properties, **op.attributes}
        for name in sorted(attrs):
            visit(attrs[name])

    def _visit_aliases(self, attr: Attribute) -> None:
        cls = type(attr)
        if cls is AffineMapAttr:
            self._alias(attr, "map")
        elif cls is AffineSetAttr:
            self._alias(attr, "set")
        elif cls is ArrayAttr:
            for a in attr.data:  # type: ignore[attr-defined]
                self._visit_aliases(a)
        elif cls is DictionaryAttr:
            data = attr.data  # type: ignore[attr-defined]
            for name in sorted(data):
                self._visit_aliases(data[name])
        elif isinstance(attr, ParametrizedAttribute) and cls not in _ALIAS_FREE:
            for p in attr.parameters:
                self._visit_aliases(p)

    def print_successors(self, successors: Sequence[Block]) -> None:
        """Generic form: `(%x)[^bb1, ^bb2]`, no space before the bracket."""
        if successors:
            with self.in_square_brackets():
                self.print_list(successors, self.print_block_name)

    def print_float(self, value: float, type: AnyFloat) -> None:
        """`1.500000e+00` when six digits give the value back, else APFloat's default
        spelling (`0.10000000000000001`, `9.9999999999999995E-8`), else the bits in hex."""
        bits = _SIGNIFICAND_BITS.get(builtins_type(type))
        if bits is None:
            super().print_float(value, type)
            return
        if not (math.isnan(value) or math.isinf(value)):
            short = apfloat_text(value, bits, 6, 0, False)
            if type.unpack(type.pack((float(short),)), 1)[0] == value:
                self.print_string(short)
                return
            text = apfloat_text(value, bits)
            if "." in text:
                self.print_string(text)
                return
        self.print_string("0x" + type.pack((value,))[::-1].hex().upper())

    def print_region(
        self,
        region: Region,
        print_entry_block_args: bool = True,
        print_empty_block: bool = True,
        print_block_terminators: bool = True,
    ) -> None:
        parent = region.parent
        default = ""
        if parent is not None and not is_unregistered(parent):
            default = DEFAULT_DIALECTS.get(parent.name, "")
        self._default_dialect.append(default)
        try:
            super().print_region(region, print_entry_block_args, print_empty_block, print_block_terminators)
        finally:
            self._default_dialect.pop()

    def print_block(
        self,
        block: Block,
        print_block_args: bool = True,
        print_block_terminator: bool = True,
    ) -> None:
        if print_block_args:
            self._print_new_line()
            if block not in self._blocks:
                self._populate_block_name(block)
            self.print_block_name(block)
            if block.args:
                with self.in_parens():
                    self.print_list(block.args, self.print_block_argument)
            self.print_string(":")
            self._print_predecessors(block)
        with self.indented():
            for op in block.ops:
                if not print_block_terminator and op.has_trait(IsTerminator, value_if_unregistered=False):
                    continue
                self._print_new_line()
                self.print_op(op)

    def _print_predecessors(self, block: Block) -> None:
        if block.parent is None:
            self.print_string("  // block is not in a region!")
            return
        preds = block.predecessors()
        if not preds:
            if block.parent.blocks.first is not block:
                self.print_string("  // no predecessors")
            return
        if len(preds) == 1:
            self.print_string(f"  // pred: ^{self._get_block_name(preds[0])}")
            return
        region = block.parent
        order = sorted(preds, key=lambda b: region.get_block_index(b) if b.parent is region else 0)
        names = ", ".join(f"^{self._get_block_name(p)}" for p in order)
        self.print_string(f"  // {len(preds)} preds: {names}")

    # -- locations (--mlir-print-debuginfo) -----------------------------------

    def print_operation_type(self, op: Operation) -> None:
        """Generic form: `: (types) -> types loc(#locN)`."""
        self.print_function_type(op.operand_types, op.result_types)
        # (a custom printer that prints its op's type this way prints no location)
        if self.print_debuginfo and self._custom_depth != self._depth:
            self.print_string(" ")
            self._print_op_location(op)

    def _print_op_location(self, op: Operation) -> None:
        self._op_loc = True
        try:
            self.print_attribute(op.location)
        finally:
            self._op_loc = False

    def _print_location(self, loc: Attribute) -> None:
        """An op's location by its alias, `loc(#loc3)`; any other (a block argument's)
        inline, its nested locations by their aliases, as MLIR prints them."""
        alias = self._locs.names.get(loc) if self._op_loc else None
        if self._locs.collecting and not self._op_loc:
            self._locs.visit(loc, True)
        self._op_loc = False
        self.print_string(f"loc({alias})" if alias else f"loc({self._locs.body(loc)})")

    # -- attributes ----------------------------------------------------------

    def print_attribute(self, attribute: Attribute) -> None:
        cls = type(attribute)
        if cls is TensorType or cls is MemRefType:
            # A plain tensor or memref type prints the same in every printer state; the
            # passes share type objects, so their text is found by identity (a type's
            # own hash is a Python call over its parameters).
            hit = _TYPE_TEXT.get(id(attribute))
            if hit is not None:
                self.print_string(hit[1])
                return
            if _plain_type(attribute):
                scratch = StringIO()
                if cls is TensorType:
                    Printer.print_attribute(MLIRPrinter(stream=scratch), attribute)
                else:
                    MLIRPrinter(stream=scratch)._print_memref_type(attribute)  # type: ignore[arg-type]
                text = scratch.getvalue()
                if len(_TYPE_TEXT) >= _TENSOR_TEXT_LIMIT:
                    _TYPE_TEXT.clear()
                _TYPE_TEXT[id(attribute)] = (attribute, text)  # the entry keeps it alive
                self.print_string(text)
                return
        if cls in _LOCATION_TYPES:
            self._print_location(attribute)
        elif cls is AffineMapAttr or cls is AffineSetAttr:
            self.print_string(self._alias(attribute, "map" if cls is AffineMapAttr else "set"))
        elif cls is DictionaryAttr:
            self.print_attr_dict(attribute.data)  # type: ignore[attr-defined]
        elif cls is MemRefType:
            self._print_memref_type(attribute)  # type: ignore[arg-type]
        elif cls is ArrayAttr:
            self.print_string("[")
            self.print_list(attribute.data, self._print_array_element)  # type: ignore[attr-defined]
            self.print_string("]")
        elif cls is DenseIntOrFPElementsAttr and self._print_large_dense(attribute):  # type: ignore[arg-type]
            pass
        else:
            super().print_attribute(attribute)

    def _print_large_dense(self, attr: DenseIntOrFPElementsAttr) -> bool:
        """A dense attribute of more than 100 elements printed as xDSL prints it (one
        element if all are equal, else its bytes in hex) from its buffer, without a
        Python object per element; False (nothing printed) for any other."""
        if len(attr) <= 100 or not dense.has_buffer(attr):
            return False
        element = attr.get_element_type()
        self.print_string("dense<")
        if dense.is_splat(attr):
            first = next(attr.iter_values())
            if isinstance(element, AnyFloat):
                self.print_float(first, element)  # type: ignore[arg-type]
            else:
                self.print_int(first, element)  # type: ignore[arg-type]
        else:
            self.print_string(f'"0x{attr.data.data.hex().upper()}"')
        self.print_string("> : ")
        self.print_attribute(attr.get_type())
        return True

    def _print_memref_type(self, ty: MemRefType) -> None:
        """As xDSL prints it, but an i64 memory space prints without its type."""
        self.print_string("memref<")
        if ty.shape.data:
            self.print_dimension_list(ty.get_shape())
            self.print_string("x")
        self.print_attribute(ty.element_type)
        if not isinstance(ty.layout, NoneAttr):
            self.print_string(", ")
            self.print_attribute(ty.layout)
        if not isinstance(ty.memory_space, NoneAttr):
            self.print_string(", ")
            self._print_array_element(ty.memory_space)
        self.print_string(">")

    def _print_array_element(self, attribute: Attribute) -> None:
        """Inside arrays MLIR drops the `: i64` of integers and the `: f64` of floats."""
        cls = type(attribute)
        if cls is IntegerAttr and attribute.type == i64:  # type: ignore[attr-defined]
            self.print_string(str(attribute.value.data))  # type: ignore[attr-defined]
        elif cls is FloatAttr and attribute.type == f64:  # type: ignore[attr-defined]
            value = attribute.value.data  # type: ignore[attr-defined]
            if math.isnan(value) or math.isinf(value):
                super().print_attribute(attribute)
            else:
                self.print_float(value, f64)
        else:
            self.print_attribute(attribute)

    def _alias(self, attribute: Attribute, base: str) -> str:
        name = self._aliases.get(attribute)
        if name is None:
            n = self._alias_counts.get(base, 0)
            self._alias_counts[base] = n + 1
            name = f"#{base}{'_' if n and base[-1].isdigit() else ''}{n or ''}"
            self._aliases[attribute] = name
        return name

    def alias_definitions(self) -> str:
        """The alias definitions that precede the IR, MLIR's order: locations without
        nested locations that a block argument uses, `#map`s, `#set`s, then the other
        such locations."""
        maps = [(n, a) for a, n in self._aliases.items() if isinstance(a, AffineMapAttr)]
        sets = [(n, a) for a, n in self._aliases.items() if isinstance(a, AffineSetAttr)]
        lines = [f"{n} = affine_map<{affine_map_text(a.data)}>\n" for n, a in maps]  # type: ignore[attr-defined]
        lines += [f"{n} = affine_set<{integer_set_text(a.data)}>\n" for n, a in sets]  # type: ignore[attr-defined]
        return self._locs.definitions(early=True, nested=False) + "".join(lines) + self._locs.definitions(early=True, nested=True)

    def deferred_alias_definitions(self) -> str:
        """The location aliases printed after the IR (those only ops use)."""
        return self._locs.definitions(early=False, nested=False) + self._locs.definitions(early=False, nested=True)

    def print_attr_dict(self, attr_dict: Mapping[str, Attribute]) -> None:
        super().print_attr_dict(dict(sorted(attr_dict.items())))

    def print_op_attributes(
        self,
        attributes: Mapping[str, Attribute],
        *,
        reserved_attr_names: Iterable[str] = (),
        print_keyword: bool = False,
    ) -> bool:
        return super().print_op_attributes(
            dict(sorted(attributes.items())),
            reserved_attr_names=reserved_attr_names,
            print_keyword=print_keyword,
        )

    def _print_op_properties(self, properties: dict[str, Attribute]) -> None:
        super()._print_op_properties(dict(sorted(properties.items())))


# ---------------------------------------------------------------------------
# Op printers replacing xDSL's where they differ from MLIR
# ---------------------------------------------------------------------------


def _print_reassociation(printer: MLIRPrinter, attr: Attribute) -> None:
    assert isinstance(attr, ArrayAttr)
    groups = ", ".join(
        "[" + ", ".join(str(i.value.data) for i in group.data) + "]"  # type: ignore[attr-defined]
        for group in attr.data
    )
    printer.print_string(f"[{groups}]")


def _print_reshape(printer: MLIRPrinter, op: Operation) -> None:
    """tensor/memref collapse_shape and expand_shape: `%x [[0, 1]] ...`."""
    printer.print_string(" ")
    printer.print_operand(op.operands[0])
    printer.print_string(" ")
    _print_reassociation(printer, op.properties["reassociation"])
    if op.name.endswith("expand_shape"):
        printer.print_string(" output_shape ")
        _print_mixed(printer, op.operands[1:], op.properties["static_output_shape"])
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_attribute(op.operands[0].type)
    printer.print_string(" into ")
    printer.print_attribute(op.results[0].type)


def _print_mixed(printer: MLIRPrinter, dynamic: Sequence[SSAValue], static: Attribute) -> None:
    """`[4, %d, 8]`: static sizes with dynamic values where the static one is `?`."""
    values = iter(dynamic)
    printer.print_string("[")
    for i, v in enumerate(static.get_values()):  # type: ignore[attr-defined]
        if i:
            printer.print_string(", ")
        if v == DYNAMIC_INDEX:
            printer.print_operand(next(values))
        else:
            printer.print_string(str(v))
    printer.print_string("]")


def _print_linalg_ins_outs(printer: MLIRPrinter, op: Operation) -> None:
    """`ins(%a : t) outs(%b : t)` for the one-input, one-init linalg ops."""
    for keyword, value in (("ins", op.operands[0]), ("outs", op.operands[1])):
        printer.print_string(f" {keyword}(")
        printer.print_operand(value)
        printer.print_string(" : ")
        printer.print_attribute(value.type)
        printer.print_string(")")


def _print_linalg_dims_op(keyword: str) -> OpPrinterFn:
    """linalg.transpose / broadcast: MLIR ends the line with a space after the dims."""

    def print_op(printer: MLIRPrinter, op: Operation) -> None:
        _print_linalg_ins_outs(printer, op)
        printer.print_string(f" {keyword} = [")
        printer.print_string(", ".join(str(d) for d in op.properties[keyword].get_values()))  # type: ignore[attr-defined]
        printer.print_string("] ")
        printer.print_op_attributes(op.attributes)

    return print_op


def _print_linalg_reduce(printer: MLIRPrinter, op: Operation) -> None:
    """linalg.reduce in its long form: the combiner's arguments on their own line."""
    _print_linalg_dims_op("dimensions")(printer, op)
    region = op.regions[0]
    with printer.indented():
        printer._print_new_line()
        printer.print_string("(")
        printer.print_list(region.blocks.first.args, printer.print_block_argument)  # type: ignore[union-attr]
        printer.print_string(") ")
        printer.print_region(region, print_entry_block_args=False)


def _print_index_switch(printer: MLIRPrinter, op: Operation) -> None:
    """scf.index_switch: MLIR leaves a space at the end of the header line."""
    printer.print_string(" ")
    printer.print_operand(op.operands[0])
    printer.print_op_attributes({k: v for k, v in op.attributes.items() if k != "cases"})
    if op.results:
        printer.print_string(" -> ")
        printer.print_list(op.result_types, printer.print_attribute)
    printer.print_string(" ")
    cases = op.properties.get("cases") or op.attributes["cases"]
    for value, region in zip(cases.get_values(), op.regions[1:]):  # type: ignore[attr-defined]
        printer._print_new_line()
        printer.print_string(f"case {value} ")
        printer.print_region(region)
    printer._print_new_line()
    printer.print_string("default ")
    printer.print_region(op.regions[0])


def _print_affine_apply_like(printer: MLIRPrinter, op: Operation) -> None:
    """affine.apply/min/max: `#map(%d0)[%s0]`."""
    m = op.properties["map"]
    assert isinstance(m, AffineMapAttr)
    printer.print_string(" ")
    printer.print_attribute(m)
    dims = op.operands[: m.data.num_dims]
    syms = op.operands[m.data.num_dims :]
    printer.print_string("(")
    printer.print_list(dims, printer.print_operand)
    printer.print_string(")")
    if syms:
        printer.print_string("[")
        printer.print_list(syms, printer.print_operand)
        printer.print_string("]")
    printer.print_op_attributes(op.attributes)


def _print_scf_reduce(printer: MLIRPrinter, op: Operation) -> None:
    """scf.reduce: `(%a, %b : f32, f32) {...}, {...}`; MLIR leaves the space before the
    (possibly empty) region list."""
    if op.operands:
        printer.print_string("(")
        printer.print_list(op.operands, printer.print_operand)
        printer.print_string(" : ")
        printer.print_list(op.operand_types, printer.print_attribute)
        printer.print_string(")")
    printer.print_string(" ")
    printer.print_list(op.regions, printer.print_region)
    printer.print_op_attributes(op.attributes)


_OP_PRINTERS["scf.reduce"] = _print_scf_reduce
for _name in ("tensor.collapse_shape", "tensor.expand_shape", "memref.collapse_shape", "memref.expand_shape"):
    _OP_PRINTERS[_name] = _print_reshape
_OP_PRINTERS["linalg.transpose"] = _print_linalg_dims_op("permutation")
_OP_PRINTERS["linalg.broadcast"] = _print_linalg_dims_op("dimensions")


def _overlay_printer(module: str, cls_name: str) -> OpPrinterFn:
    """Print an op built from xDSL's class with the overlay's printer (same fields)."""

    def print_op(printer: MLIRPrinter, op: Operation) -> None:
        import importlib

        getattr(importlib.import_module(module), cls_name).print(op, printer)

    return print_op


for _name, _module, _cls in (
    ("func.func", "shardc.dialects.func", "FuncOp"),
    ("linalg.generic", "shardc.dialects.linalg", "GenericOp"),
    ("linalg.reduce", "shardc.dialects.linalg", "ReduceOp"),  # the short `{ arith.addf }` form
    ("affine.load", "shardc.dialects.affine", "LoadOp"),
    ("affine.store", "shardc.dialects.affine", "StoreOp"),
    ("scf.execute_region", "shardc.dialects.scf", "ExecuteRegionOp"),
):
    _OP_PRINTERS[_name] = _overlay_printer(_module, _cls)
_OP_PRINTERS["scf.index_switch"] = _print_index_switch


def _binary_printer(base_name: str, props: frozenset[str]) -> OpPrinterFn:
    """`%r = arith.mulf %a, %b : f32` for arith's binary ops in their plain form (no
    attribute, no property but a default `fastmath`), straight from the op: xDSL's
    declarative-format machinery was a third of the profile of printing the GPT step's
    lowered module, whose bodies are these ops (n_layer 12: 0.51-0.54 -> 0.47 s). Anything else, or a class whose format is not its base's
    `$lhs , $rhs ... : type($result)`, goes to the op's own printer. Keyed by op name,
    so that the printer imports no dialect; the base class is looked up on first use."""
    fmt: list[object] = []

    def print_op(printer: MLIRPrinter, op: Operation) -> None:
        if not fmt:
            from xdsl.dialects import arith

            fmt.append(getattr(arith, base_name).assembly_format)
        if op.attributes or getattr(type(op), "assembly_format", None) is not fmt[0] or len(op.operands) != 2 or len(op.results) != 1:
            return op.print(printer)
        for key, value in op.properties.items():
            if key not in props or value != _default_fastmath():
                return op.print(printer)
        a, b = op.operands
        printer.print_string(" ")
        printer.print_ssa_value(a)
        printer.print_string(", ")
        printer.print_ssa_value(b)
        printer.print_string(" : ")
        printer.print_attribute(op.results[0].type)

    return print_op


_FASTMATH_NONE: list[Attribute] = []


def _default_fastmath() -> Attribute:
    if not _FASTMATH_NONE:
        from xdsl.dialects.arith import FastMathFlagsAttr

        _FASTMATH_NONE.append(FastMathFlagsAttr("none"))
    return _FASTMATH_NONE[0]


_print_float_binary = _binary_printer("FloatingPointLikeBinaryOperation", frozenset({"fastmath"}))
for _name in ("addf", "subf", "mulf", "divf", "maximumf", "maxnumf", "minimumf", "minnumf"):
    _OP_PRINTERS[f"arith.{_name}"] = _print_float_binary
_print_int_binary = _binary_printer("SignlessIntegerBinaryOperation", frozenset())
for _name in ("divui", "divsi", "floordivsi", "ceildivsi", "ceildivui", "remui", "remsi", "minui", "maxui", "minsi", "maxsi", "andi", "ori", "xori", "shrui", "shrsi"):
    _OP_PRINTERS[f"arith.{_name}"] = _print_int_binary
for _name in ("affine.apply", "affine.min", "affine.max"):
    _OP_PRINTERS[_name] = _print_affine_apply_like


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def print_module(
    module: ModuleOp,
    stream: IO[str],
    *,
    generic: bool = False,
    debuginfo: bool = False,
) -> None:
    """Print a module exactly as mlir-opt prints one input chunk: aliases, the module,
    and the blank line mlir-opt ends each module with."""
    body = StringIO()
    printer = MLIRPrinter(stream=body, print_generic_format=generic, print_debuginfo=debuginfo)
    if debuginfo:
        # MLIR names locations in a first printing pass that prints nothing
        dry = MLIRPrinter(stream=StringIO(), print_generic_format=generic, print_debuginfo=True)
        dry._locs.collecting = True  # pyright: ignore[reportPrivateUsage]
        dry.print_op(module)
        dry._locs.collecting = False  # pyright: ignore[reportPrivateUsage]
        dry._locs.finish()  # pyright: ignore[reportPrivateUsage]
        printer._locs = dry._locs  # pyright: ignore[reportPrivateUsage]
    printer.print_op(module)
    stream.write(printer.alias_definitions())
    stream.write(body.getvalue())
    stream.write("\n")
    stream.write(printer.deferred_alias_definitions())
    stream.write("\n")
    stream.write(printer.resource_section(module))


def module_to_string(module: Operation, *, generic: bool = False) -> str:
    """The text `print_module` writes, as a string."""
    out = StringIO()
    print_module(module, out, generic=generic)  # type: ignore[arg-type]
    return out.getvalue()
