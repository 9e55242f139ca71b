"""Buffer donation: a function's result written into the memory of an argument the
caller gives up, as JAX's `donate_argnums` / XLA's input-output aliases.

The caller names the pairs when the module is compiled (`compile_module(...,
donate={"adamw_step": {arg: result}})`); this module decides which it can honour and
rewrites the runtime's private copy of the module for them. A pair is honoured only
where writing in place cannot change what the function computes:

* the argument is a statically shaped tensor whose only user is one all-parallel
  `linalg.generic`, which reads it through the identity map from exactly one input;
* the result is a result of that generic, written through the identity map, with the
  argument's type, whose body never reads that result's init, and it is the operand
  of `func.return` at the named position.

Each element of the argument is then read once, at the index where the result's
element is written, before it is written: the elementwise update is the same in place.
The generic's init for that result becomes the argument itself (its `tensor.empty` goes
away) and the generic is marked with `shardc.inplace` (pairs of result, input), which
the structured engine honours: the fused kernel stores into the argument it reads
(`kernels/fused.py`), the numpy path copies its result there. Anything else is refused
with a reason (`Donation.refused`) and runs as without donation: the argument is not
written.

Donating is a promise by the caller: after the call the donated array holds the
result, and nobody may still read it as the old value. Only the owner of a state
array may donate it (shardc's trainers donate their parameters and AdamW moments,
which they alone hold between steps; checkpoints and evaluation read them between
calls, never during one). `CompiledModule.call` guards the call: a donated array that
is read-only, not C-contiguous, of another dtype, or overlapping another argument is
copied first, so the caller's memory is never written except where it was donated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, TensorType, i64
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Operation
from xdsl.ir.affine import AffineMap

INPLACE_ATTR = "shardc.inplace"
INPLACE_INIT_ATTR = "shardc.inplace_init"
"""On a contraction whose init is a donated argument (`fusion.fuse_accumulations`): the
results (indices) written into their init's buffer."""


@dataclass
class Donation:
    """What one function's donation became: honoured pairs (argument -> result) and
    the refused arguments with why."""

    donated: dict[int, int] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)


class DonationError(ValueError):
    """A donation request that names no such function, argument or result."""


def apply_donation(f: func.FuncOp, pairs: Mapping[int, int]) -> Donation:
    """Honour what can be of `pairs` (argument position -> result position) in `f`,
    rewriting it in place (the runtime's private copy); see the module docstring."""
    out = Donation()
    if not f.body.blocks:
        raise DonationError(f"cannot donate to @{f.sym_name.data}: it has no body")
    block = f.body.blocks.first
    assert block is not None
    ret = block.last_op
    n_args, n_res = len(block.args), len(f.function_type.outputs.data)
    claimed: set[int] = set()
    for i, r in sorted(pairs.items()):
        if not (0 <= i < n_args and 0 <= r < n_res):
            raise DonationError(f"@{f.sym_name.data}: cannot donate argument #{i} to result #{r}: it has {n_args} arguments and {n_res} results")
        if r in claimed:
            raise DonationError(f"@{f.sym_name.data}: result #{r} is named for two donated arguments")
        claimed.add(r)
        why = _refusal(block.args[i], ret, r)
        if isinstance(why, str):
            out.refused[i] = why
            continue
        op, k, j = why
        _rewrite(op, k, j)
        out.donated[i] = r
    return out


def _refusal(arg: object, ret: Operation | None, r: int) -> str | tuple[GenericOp, int, int]:
    """Why argument `arg` cannot hold result `r`, or (the generic, its input slot, its
    result index) when it can."""
    from xdsl.ir import BlockArgument

    assert isinstance(arg, BlockArgument)
    t = arg.type
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        return "not a statically shaped tensor"
    users = {id(u.operation): u.operation for u in arg.uses}
    if len(users) != 1:
        return "read by more than one op" if users else "never read"
    (op,) = users.values()
    if not isinstance(op, GenericOp) or not all(x.data == IteratorType.PARALLEL for x in op.iterator_types.data):  # pyright: ignore[reportUnknownMemberType]
        return "its reader is not an elementwise linalg.generic"
    n_ins = len(op.inputs)
    slots = [k for k, v in enumerate(op.inputs) if v is arg]
    if len(slots) != 1 or any(v is arg for v in op.outputs):
        return "read through more than one operand of its generic"
    k = slots[0]
    maps = [m.data for m in op.indexing_maps.data]
    rank = len(t.get_shape())
    ident = AffineMap.identity(rank)
    if maps[k] != ident:
        return "read through a map that is not the identity"
    if ret is None or not isinstance(ret, func.ReturnOp) or r >= len(ret.operands):
        return "the function does not return that result"
    val = ret.operands[r]
    if val.owner is not op:
        return "that result is not computed by the generic reading the argument"
    j = list(op.results).index(val)  # type: ignore[arg-type]
    if val.type != t:
        return "that result's type differs from the argument's"
    if maps[n_ins + j] != ident:
        return "that result is written through a map that is not the identity"
    if op.body.block.args[n_ins + j].first_use is not None:
        return "the generic's body reads that result's init"
    return op, k, j


def _rewrite(op: GenericOp, k: int, j: int) -> None:
    """Make input `k` of `op` the init of result `j` and record the pair."""
    n_ins = len(op.inputs)
    operands = list(op.operands)
    old = operands[n_ins + j]
    operands[n_ins + j] = op.inputs[k]
    op.operands = operands
    pairs = [*inplace_pairs(op).items(), (j, k)]
    op.attributes[INPLACE_ATTR] = ArrayAttr([ArrayAttr([IntegerAttr(a, i64), IntegerAttr(b, i64)]) for a, b in pairs])
    owner = old.owner
    if isinstance(owner, Operation) and owner.name == "tensor.empty" and not old.uses:
        owner.detach()
        owner.erase()


def inplace_pairs(op: Operation) -> dict[int, int]:
    """Result index -> input index that `op` writes in place (`shardc.inplace`)."""
    attr = op.attributes.get(INPLACE_ATTR)
    if not isinstance(attr, ArrayAttr):
        return {}
    return {int(p.data[0].value.data): int(p.data[1].value.data) for p in attr.data}  # type: ignore[attr-defined]


def inplace_inits(op: Operation) -> frozenset[int]:
    """Results of `op` written into the buffer of their init (`shardc.inplace_init`)."""
    attr = op.attributes.get(INPLACE_INIT_ATTR)
    if not isinstance(attr, ArrayAttr):
        return frozenset()
    return frozenset(int(a.value.data) for a in attr.data)  # type: ignore[attr-defined]


__all__ = ["INPLACE_ATTR", "INPLACE_INIT_ATTR", "Donation", "DonationError", "apply_donation", "inplace_inits", "inplace_pairs"]
