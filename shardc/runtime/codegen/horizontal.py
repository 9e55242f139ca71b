"""Horizontal fusion: independent elementwise generics with one body run as one kernel call.

AdamW updates every parameter with the same elementwise body (m', v', p' in one pass,
`shardc.runtime.codegen.fusion`), one generic per parameter: ~50 calls per step at n_layer 4,
each with its own dispatch, most of them small (biases, layernorm gains) and so on the
numpy path, one ufunc call per op. As PyTorch's foreach/fused AdamW does, the generics
of a function that share a body run here as one call of one numba kernel that loops over
the members, each member's arrays passed flat in tuples (numba compiles a tuple type
once per length): `bench/adamw_step.py` measures what that saves.

A group is the generics of a function's entry block that are elementwise (all parallel,
tensor results), read only the function's own arguments or slices of them (so none
depends on another and any of them may run first: the group runs where the scheduler
puts its first member), read every array through the identity map with the member's
static shape (no broadcasting) and scalars through `()`, and agree on: the body (same
ops, attributes, types and wiring: constants by value), the scalar operands (by SSA
value: the same lr, step and grad_scale), the positions of array operands, the element
types and the donation pairs (`shardc.inplace`). Members differing in any of these are
other groups. A slice is a `tensor.extract_slice` of an argument at offsets computed by
index arithmetic from arguments, constants and this rank's place in the world: under
ZeRO each rank updates its share of every parameter, with the all-gather of one
parameter between two updates; those slices and their arithmetic move up to the
group's first member (the GPT step at n_layer 4, dp=2: 4 update calls a step, 27
before).

The kernel is rendered from the member's own loop nest (`kernels/fused.py`, built from
its templates over numbered names only, and checked by `check_generated`), with one
loop over the members around it; every element sees the same statements in the same
order as the member's own kernel, so results are bitwise the same. Each member runs as
rows of contiguous elements (one row where its arrays are contiguous, one row per
contiguous run of a strided share: a column block of a matrix), so the inner loop keeps
unit stride and vectorises. A donated operand stays one argument read and written
(`q[i] = f(q[i], ...)`), so updates stay in place and vectorised. A group runs member
by member, as without grouping, where its body takes more than one pass, under
`SHARDC_KERNELS=numpy`, when the whole group is smaller than `MIN_GROUP_ELEMENTS`, or
when an array arrives in another layout (an inner stride, a donated array not
contiguous).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from shardc.runtime.execute.code_check import check_generated
from shardc.runtime.codegen.donation import INPLACE_ATTR
from shardc.runtime.codegen.kernels import fused
from shardc.runtime.codegen.remake_casts import is_cast_copy
from shardc.runtime.execute.horizontal_run import CHUNK, Group, Member, run_group  # noqa: F401  (the run time, re-exported)

GROUP = True
"""False: every generic runs alone (the baseline of bench/adamw_step.py; read at compile
time, and not part of the disk cache's key)."""

def plan_groups(block: Block) -> dict[Operation, list[GenericOp]]:
    """Member -> its group (in block order), for the groups of two or more members."""
    if not GROUP:
        return {}
    by_key: dict[object, list[GenericOp]] = {}
    for op in block.ops:
        key = _key(op, block) if isinstance(op, GenericOp) else None
        if key is not None:
            by_key.setdefault(key, []).append(op)  # type: ignore[arg-type]
    out = {op: ops for ops in by_key.values() if len(ops) > 1 for op in ops}
    first = block.first_op
    for op in out:  # a member's fresh inits are defined before any member runs
        for v in op.outputs:  # type: ignore[attr-defined]
            empty = v.owner
            if isinstance(empty, Operation) and _fresh_init(v) and empty is not first:
                empty.detach()
                block.insert_op_before(empty, first)  # type: ignore[arg-type]
    _hoist_slices(block, [ops for ops in by_key.values() if len(ops) > 1])
    return out


def _hoist_slices(block: Block, groups: list[list[GenericOp]]) -> None:
    """Move the slices members read (`_slice_cone`: a slice of an argument and the pure
    index arithmetic of its offsets) up to their group's first member, where the group
    runs; each op keeps its place relative to the others moved."""
    order = {op: k for k, op in enumerate(block.ops)}
    for ops in groups:
        first = ops[0]  # block order
        moved: set[Operation] = set()
        for op in ops[1:]:
            for v in op.inputs:  # type: ignore[attr-defined]
                cone = _slice_cone(v, block)
                if cone:
                    moved.update(o for o in cone if order[o] > order[first])
        for o in sorted(moved, key=order.__getitem__):
            o.detach()
            block.insert_op_before(o, first)


_PURE = frozenset({"mpi.comm_world", "mpi.comm_rank", "affine.delinearize_index", "affine.apply"})
"""Ops besides `arith`'s that a slice's offsets may come from: queries with no effect
(this rank's place in the world), so they may run earlier."""


def _slice_cone(v: SSAValue, block: Block) -> list[Operation] | None:
    """For a `tensor.extract_slice` of an argument of `block` (a ZeRO rank's share of a
    parameter), with offsets computed in `block` by pure ops only (`arith`, `_PURE`)
    from arguments and constants: that slice and the ops it depends on. None for any
    other value."""
    owner = v.owner
    if not (isinstance(owner, Operation) and owner.name == "tensor.extract_slice" and owner.parent is block):
        return None
    src = owner.operands[0]
    if not (isinstance(src, BlockArgument) and src.block is block):
        return None
    cone: list[Operation] = [owner]
    seen: set[Operation] = {owner}
    todo = list(owner.operands[1:])
    while todo:
        w = todo.pop()
        if isinstance(w, BlockArgument):
            if w.block is not block:
                return None
            continue
        op = w.owner
        assert isinstance(op, Operation)
        if op in seen:
            continue
        if op.parent is not block or op.regions or not (op.name.startswith("arith.") or op.name in _PURE):
            return None
        seen.add(op)
        cone.append(op)
        todo.extend(op.operands)
    return cone


def _fresh_init(v: SSAValue) -> bool:
    """A statically shaped `tensor.empty`: defined anywhere alike, so it may move up.
    CSE makes one of each type for every layer's same-shaped slice (ZeRO's
    out-of-place updates), and its contents are undefined to every user alike."""
    owner = v.owner
    return isinstance(owner, Operation) and owner.name == "tensor.empty" and not owner.operands


def _key(op: GenericOp, block: Block) -> object | None:
    """What members of one group share, or None when `op` cannot be a member."""
    if not op.results or not all(t.data == IteratorType.PARALLEL for t in op.iterator_types.data):  # pyright: ignore[reportUnknownMemberType]
        return None
    if not all(isinstance(v.type, TensorType) for v in op.outputs):
        return None
    body = op.body.block
    if any(isinstance(o, IndexOp) or o.regions for o in body.walk()):
        return None
    if is_cast_copy(op):
        return None  # a bf16 copy, made right before its product (`remake_casts`): grouped, every copy would live from the first
    n_loops = len(op.iterator_types.data)
    shape: tuple[int, ...] | None = None
    positions: list[object] = []
    n_ins = len(op.inputs)
    for k, (v, m) in enumerate(zip(op.operands, (a.data for a in op.indexing_maps.data))):
        if k >= n_ins and _fresh_init(v) and body.args[k].first_use is None:
            pass  # an unread `tensor.empty` init (out of place): moved up by `plan_groups`
        elif not (isinstance(v, BlockArgument) and v.block is block) and not (k < n_ins and _slice_cone(v, block)):
            return None  # read only the function's arguments (or slices of them): no member feeds another
        if isinstance(v.type, TensorType):
            s = tuple(v.type.get_shape())
            if m != AffineMap.identity(n_loops) or any(d < 0 for d in s) or (shape is not None and s != shape):
                return None
            shape = s
            positions.append(("array", str(v.type.get_element_type())))
        elif m.results:
            return None
        else:
            positions.append(("scalar", v))  # by SSA value: the same lr in every member
    if shape is None:
        return None
    return (n_loops > 0, tuple(positions), _body_key(body), str(op.attributes.get(INPLACE_ATTR)), len(op.results))


def _body_key(body: Block) -> tuple[object, ...]:
    """The body's structure: op names, attributes, types and operand wiring."""
    num: dict[SSAValue, int] = {a: k for k, a in enumerate(body.args)}
    out: list[object] = [tuple(str(a.type) for a in body.args)]
    for op in body.ops:
        wires = tuple(num.get(o, ("outside", id(o))) for o in op.operands)
        attrs = tuple(sorted((k, str(v)) for k, v in [*op.properties.items(), *op.attributes.items()]))
        out.append((op.name, wires, attrs, tuple(str(r.type) for r in op.results)))
        for r in op.results:
            num[r] = len(num)
    return tuple(out)


def build_group(members: list[Member]) -> Group:
    """The group of `members` (their specs built), with its kernel where every member's
    fused body is one loop nest."""
    group = Group(members)
    kernels = [getattr(m.spec, "fused", None) for m in members]
    first = kernels[0]
    if any(not isinstance(k, fused.FusedKernel) for k in kernels):
        return group  # (a kernel storing bf16, `bf16_run.Bf16Results`, runs member by member)
    if len(first.stages) != 1 or first.stages[0].source is None or first.stages[0].reads:
        return group  # a numpy ufunc between nests: member by member
    if any(kind == "bits" for kind, _ in first.params):
        return group  # a bf16 input, passed as its bits (`fused_run.FusedKernel`): member by member
    def flat(k: fused.FusedKernel) -> object:  # the nest's text but for its loops (members' ranks differ)
        st = k.stages[0]
        n = st.nest
        return None if n is None or len(k.stages) != 1 else (n.header[:-1], n.loads, [(x, s) for x, s, _ in n.body], n.stores, st.writes, st.dtypes)

    if any(flat(k) != flat(first) or k.params != first.params or k.results != first.results for k in kernels):  # type: ignore[arg-type,union-attr]
        return group
    st = first.stages[0]
    assert st.nest is not None
    group.source = render_group(st.nest, first.params, st.writes)
    check_generated(ast.parse(group.source))
    group.arrays = [q for q, (kind, _) in enumerate(first.params) if kind == "array"]
    group.n_writes = len(st.writes)
    return group


def render_group(nest: object, params: Sequence[tuple[str, object]], writes: Sequence[int]) -> str:
    """The nest's statements inside a loop over the members: kernel argument `q{k}` of
    an array is a tuple of the members' flat arrays, `w{s}` (s in `writes`, the
    temporaries' slots) a tuple of their outputs; everything named comes from the
    nest's own numbering. The last argument, `r0`, is
    each member's layout (`horizontal_run._layout`): a member runs as `r0[m, 0]` rows of
    `r0[m, 1]` elements, the rows of the t-th array argument `r0[m, 2 + t]` elements
    apart (a ZeRO rank's slice of a parameter: a row of every matrix), so a row is one
    unit-stride inner loop; `i1` counts rows, `c{q}`/`d{k}` are the row's views of
    array `q{q}` and output `w{k}`."""
    n: fused.Nest = nest  # type: ignore[assignment]
    arrays = [q for q, (kind, _) in enumerate(params) if kind == "array"]
    sig = n.header[0]
    assert sig.endswith("):"), sig
    sig = sig[:-2] + ", r0):"
    pre = n.header[1:-1]  # the loop-invariant statements (the last line sizes the loops)
    lines = [sig, *pre, f"    for m in range(len(q{arrays[0]})):"]
    lines += [f"        a{q} = q{q}[m]" for q in arrays]
    lines += [f"        b{k} = w{k}[m]" for k in writes]
    # A contiguous member (one row) indexes every array by `i0` alone: with an offset
    # of its own per array LLVM vectorises the loop only behind a runtime overlap test
    # of every pair of arrays, which it gives up on for AdamW's seven (the 1-rank step
    # measured 3-6% slower with the rows loop alone).
    lines.append("        if r0[m, 0] == 1:")
    lines.append("            for i0 in range(r0[m, 1]):")
    for name, array, _q in n.loads:
        lines.append(f"                {name} = {_member(array)}[i0]")
    lines += [f"                {stmt}" for _, stmt, _ in n.body]
    lines += [f"                {_member(array)}[i0] = {name}" for array, name in n.stores]
    # A strided member runs row by row, each array's row taken as a view of its own
    # (`c{q}`, `d{k}`) indexed by `i0` alone, for the reason above: indexed as `a[i + i0]`
    # with an offset per array the loop stayed scalar, and a ZeRO rank's AdamW over its
    # column slices ran 3.5x slower than over contiguous copies (104 against 29 ms, GPT
    # n_layer 12 on 2 ranks, AMD EPYC).
    lines.append("        else:")
    lines.append("            for i1 in range(r0[m, 0]):")
    lines += [f"                {_row(a)} = {_member(a)}[i1 * r0[m, {2 + t}] : i1 * r0[m, {2 + t}] + r0[m, 1]]" for t, a in enumerate(f"q{q}" for q in arrays)]
    lines += [f"                {_row(f'w{k}')} = {_member(f'w{k}')}[i1 * r0[m, 1] : (i1 + 1) * r0[m, 1]]" for k in writes]
    lines.append("                for i0 in range(r0[m, 1]):")
    for name, array, _q in n.loads:
        lines.append(f"                    {name} = {_row(array)}[i0]")
    lines += [f"                    {stmt}" for _, stmt, _ in n.body]
    lines += [f"                    {_row(array)}[i0] = {name}" for array, name in n.stores]
    return "\n".join(lines) + "\n"


def _row(array: str) -> str:
    """A strided member's current row of a nest's argument (`q3` -> `c3`, `w0` -> `d0`)."""
    return _member(array, "cd")


def _member(array: str, prefixes: str = "ab") -> str:
    """The member's own array for a nest's argument name (`q3` -> `a3`, `w0` -> `b0`;
    other `prefixes` for inputs and outputs name other per-member values)."""
    assert array[0] in "qw" and array[1:].isdigit(), array
    return prefixes[array[0] == "w"] + array[1:]


__all__ = ["CHUNK", "GROUP", "Group", "Member", "build_group", "plan_groups", "render_group", "run_group"]
