"""Row-chain fusion before code generation: elementwise generics and last-axis
reductions that follow one another over the same rows run as one row kernel
(`shardc.runtime.codegen.kernels.rows`).

After elementwise fusion (`shardc.runtime.codegen.fusion`) a softmax is still several
full-array passes (scale and mask, row max, exp, row sum, ...): a reduction ends every
fused chain. This rewrite of the runtime's private copy of the module (not a pipeline
pass) finds such chains by their shape, not by who built them: walking a block in
order, a chain starts at a full elementwise generic or a last-axis reduction and takes
every later generic of the same space (rows..., n) that reads one of its results
(`kernels.rows.classify`), until an op outside it reads one of its results (the chain
runs where its last member was, so nothing may read its values before). A chain with
a reduction and at least two members whose kernel builds becomes one
`shardc_rt.row_chain` op holding its members in its region: the emitter calls the row
kernel and, where that declines (numba absent, `SHARDC_KERNELS=numpy`, a small space,
an unexpected operand), runs the members as before, from a nested function. The same
chains fire on torch-mlir's softmax and layernorm (keepdim row tensors included);
its max/argmax reduction, a multi-result generic, is not a member.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, region_def, traits_def, var_operand_def, var_result_def
from xdsl.traits import IsTerminator

from shardc.runtime.codegen.builder import FunctionBuilder, register, targets, tuple_expr
from shardc.runtime.codegen.fusion import after
from shardc.runtime.codegen.kernels.arith import dt_expr
from shardc.runtime.codegen.kernels.fused import BF16_BITS
from shardc.runtime.codegen.kernels.rows import FULL, RED, build_row_kernel, classify, static_shape
from shardc.runtime.execute.kernels.bf16_run import bfloat16

ENABLED = True
"""False: `fuse_rows` forms no chain (a baseline for benchmarks and tests; read at
compile time, so turn the compile cache off, `SHARDC_CACHE=0`, when switching it)."""


@irdl_op_definition
class RowYieldOp(IRDLOperation):
    """The values a row chain gives to the ops after it."""

    name = "shardc_rt.row_yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator())

    def __init__(self, values: list[SSAValue]):
        super().__init__(operands=[values])


@irdl_op_definition
class RowChainOp(IRDLOperation):
    """A row chain: its members in its region (they read the values outside directly;
    `inputs` lists those, so that schedules see the dependences)."""

    name = "shardc_rt.row_chain"
    inputs = var_operand_def()
    outs = var_result_def()
    body = region_def("single_block")

    def __init__(self, inputs: list[SSAValue], result_types: list[object], body: Region):
        super().__init__(operands=[inputs], result_types=[result_types], regions=[body])


def fuse_rows(module: ModuleOp) -> int:
    """Wrap every row chain of `module` in a `shardc_rt.row_chain`, in place; returns
    how many."""
    if not ENABLED:
        return 0
    count = 0
    kinds: _Kinds = {}  # `_kind`'s memo for this call (ops are asked again and again while chains grow)
    for block in _blocks(module):
        ops = list(block.ops)
        order = {op: k for k, op in enumerate(ops)}
        for members, space in _chains(block, order, kinds):
            for part in _split(members, ops, order):
                if len(part) >= 2 and any(_kind(o, space, kinds) == RED for o in part) and _wrap(part, space, kinds):
                    count += 1
    return count


def _blocks(op: Operation) -> list[Block]:
    """The blocks under `op`, not those of generic bodies (no chain there)."""
    out: list[Block] = []
    for r in op.regions:
        for b in r.blocks:
            out.append(b)
            for o in b.ops:
                if o.regions and not isinstance(o, GenericOp | RowChainOp):
                    out += _blocks(o)
    return out


_Kinds = dict[tuple[Operation, tuple[int, ...]], str | None]


def _kind(op: Operation, space: tuple[int, ...], kinds: _Kinds) -> str | None:
    """`classify`, once per op and space in a `fuse_rows` call: `kinds` is that call's
    memo (local to it, so nothing outlives the ops it was made for)."""
    key = (op, space)
    if key not in kinds:
        kinds[key] = classify(op, space)
    return kinds[key]


def _space(op: Operation, kinds: _Kinds) -> tuple[int, ...] | None:
    """The row space an op would start a chain in."""
    if not isinstance(op, GenericOp) or not op.results:
        return None
    s = static_shape(op.inputs[0]) if op.inputs else None
    if s is not None and len(s) >= 2 and _kind(op, s, kinds) == RED:
        return None if _onehot(op) else s
    out = static_shape(op.outputs[0]) if op.outputs else None
    if out is not None and len(out) >= 2 and _kind(op, out, kinds) == FULL:
        return out
    return None


_OPEN = 16
"""Chains open at once (each full generic starts one; most never grow)."""


class _Chain:
    def __init__(self, op: Operation, space: tuple[int, ...]):
        self.members = [op]
        self.space = space
        self.seal = float("inf")  # the position of the first op outside it that reads it


def _chains(block: Block, order: dict[Operation, int], kinds: _Kinds) -> list[tuple[list[Operation], tuple[int, ...]]]:
    """The chains of `block` (see the module docstring), in block order; `order`: the
    ops' positions (`fusion.after` walking the block per query was quadratic)."""

    def at(op: Operation) -> int:
        """The position of `op` or of the op of `block` holding it."""
        while op.parent is not block:
            parent = op.parent_op()
            if parent is None:
                return -1
            op = parent
        return order[op]

    def reseal(chain: _Chain) -> None:
        inside = set(chain.members)
        chain.seal = min((at(u.operation) for m in chain.members for r in m.results for u in r.uses if u.operation not in inside), default=float("inf"))

    open_: list[_Chain] = []
    owner: dict[SSAValue, _Chain] = {}
    done: list[_Chain] = []
    for op, pos in order.items():
        joined = None
        for v in op.operands:
            chain = owner.get(v)
            if chain is not None and chain.seal >= pos and (kind := _kind(op, chain.space, kinds)) is not None and not (kind == RED and _onehot(op)):
                joined = chain
                break
        for chain in list(open_):
            if chain is not joined and chain.seal <= pos:  # read from outside: closed
                open_.remove(chain)
                done.append(chain)
        if joined is not None:
            joined.members.append(op)
            owner.update((r, joined) for r in op.results)
            reseal(joined)
            continue
        space = _space(op, kinds)
        if space is not None:
            chain = _Chain(op, space)
            reseal(chain)
            open_.append(chain)
            owner.update((r, chain) for r in op.results)
            if len(open_) > _OPEN:  # the oldest: its next member would have come by now
                done.append(open_.pop(0))
    done += open_
    return [(c.members, c.space) for c in done if len(c.members) >= 2 and any(_kind(o, c.space, kinds) == RED for o in c.members)]


def _onehot(op: Operation) -> bool:
    """A reduction over a one-hot (`structured`'s gather path: never materialised)."""
    from shardc.runtime.codegen.structured import onehot_source

    return isinstance(op, GenericOp) and any(onehot_source(v) is not None for v in op.inputs)


def _wrap(members: list[Operation], space: tuple[int, ...], kinds: _Kinds) -> bool:
    inside = set(members)
    made = {r for m in members for r in m.results}
    inputs: list[SSAValue] = []
    for m in members:
        for v in m.operands:
            if v not in made and v not in inputs:
                inputs.append(v)
    last = members[-1]
    yields = [r for m in members for r in m.results if any(u.operation not in inside and not _within(u.operation, inside) for u in r.uses)]
    for r in yields:
        for u in r.uses:
            user = u.operation
            if user in inside or _within(user, inside):
                continue
            if not after(user, last):  # type: ignore[arg-type]
                return False
    if not yields:
        return False
    # reads: only what the bodies use (an unread init is not an input of the kernel)
    read = [v for v in inputs if any(_reads(m, v) for m in members)]
    kernel = build_row_kernel(members, space, read, yields, [_kind(m, space, kinds) for m in members])
    if kernel is None:
        return False
    block = last.parent_block()
    assert block is not None
    region = Region(Block())
    chain = RowChainOp(read, [r.type for r in yields], region)
    block.insert_op_after(chain, last)
    for r, new in zip(yields, chain.outs):
        new.name_hint = r.name_hint
        for u in list(r.uses):
            if u.operation not in inside and not _within(u.operation, inside):
                u.operation.operands = [new if (o is r and i == u.index) else o for i, o in enumerate(u.operation.operands)]
    body = region.block
    for m in members:
        m.detach()
        body.add_op(m)
    body.add_op(RowYieldOp(yields))
    _KERNELS[chain] = kernel
    return True


def _split(members: list[Operation], ops: list[Operation], order: dict[Operation, int]) -> list[list[Operation]]:
    """`members` cut before each member that comes after an op writing in place (a
    donated buffer: `shardc.runtime.codegen.donation`) over a value an earlier member reads: a
    chain runs where its last member was, so its members would read after the write."""
    from shardc.runtime.codegen.donation import inplace_inits, inplace_pairs

    parts = [[members[0]]]
    reads = set(members[0].operands)
    for prev, m in zip(members, members[1:]):
        for op in ops[order[prev] + 1 : order[m]]:
            for o in [op] if isinstance(op, GenericOp) or not op.regions else op.walk():
                ins, outs = getattr(o, "inputs", o.operands), getattr(o, "outputs", ())
                over = [ins[i] for i in inplace_pairs(o).values() if i < len(ins)] + [outs[i] for i in inplace_inits(o) if i < len(outs)]
                if any(v in reads for v in over):
                    parts.append([])
                    reads = set()
                    break
            else:
                continue
            break
        parts[-1].append(m)
        reads.update(m.operands)
    return parts


_KERNELS: dict[Operation, object] = {}
"""A chain op -> its kernel, built while it was formed (the emitter takes it)."""


def _within(op: Operation, ops: set[Operation]) -> bool:
    parent = op.parent_op()
    while parent is not None:
        if parent in ops:
            return True
        parent = parent.parent_op()
    return False


def _reads(op: Operation, v: SSAValue) -> bool:
    """Whether `op` reads `v` as more than an unread init."""
    if isinstance(op, GenericOp):
        block = op.body.block
        for k, o in enumerate(op.operands):
            if o is v and block.args[k].first_use is not None:
                return True
        return False
    return any(o is v for o in op.operands)


@register(RowChainOp)
def _emit_row_chain(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, RowChainOp)
    kernel = _KERNELS.pop(op, None)
    block = op.body.block
    term = block.last_op
    assert isinstance(term, RowYieldOp)
    members = list(block.ops)[:-1]
    fallback = g.fresh("body")
    g.emit(f"def {fallback}():")
    g.depth += 1
    g.emit_ops(members)
    g.emit(f"return {tuple_expr(g.vs(list(term.values)))}")
    g.depth -= 1
    names = [g.res(op, i, vec=False) for i in range(len(op.outs))]
    if kernel is None:
        g.emit(f"{targets(names)} = {fallback}()")
        return
    got = g.fresh("rows")
    g.emit(f"{got} = {g.const(kernel, 'rowk')}({tuple_expr(g.vs(list(op.inputs)))})")
    g.emit(f"if {got} is None:")
    g.emit(f"    {got} = {fallback}()")
    g.emit(f"{targets(names)} = {got}")
    for name, (_, dn) in zip(names, kernel.outputs):  # type: ignore[attr-defined]
        if dn == BF16_BITS:  # the kernel's bits as bf16 (a view: the fallback's bf16 array stays as it is)
            g.emit(f"{name} = {name}.view({dt_expr(g, bfloat16())})")


__all__ = ["ENABLED", "RowChainOp", "RowYieldOp", "fuse_rows"]
