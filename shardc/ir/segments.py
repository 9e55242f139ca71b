"""A structured op's inputs and outputs, its segment sizes decoded once per attribute.

IRDL's `op.inputs` / `op.outputs` decode the `operandSegmentSizes` property's bytes on
every read: code generation reads them 18,000 times compiling the GPT step at n_layer 4,
propagation and partition read a linalg op's inits several times per op and pass.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase
from xdsl.ir import Operation, SSAValue

_SEGMENTED: dict[type, bool] = {}
_SEGMENTS: dict[int, tuple[object, tuple[int, ...]]] = {}


def _segmented(cls: type) -> bool:
    """Whether `cls`'s operands are exactly `inputs` and `outputs`, their sizes in the
    `operandSegmentSizes` property (linalg.generic and the named ops): what `ins_outs`
    reads itself."""
    ok = _SEGMENTED.get(cls)
    if ok is None:
        from xdsl.irdl import AttrSizedOperandSegments, VarOperandDef

        try:
            d = cls.get_irdl_definition()  # type: ignore[attr-defined]
            ok = [n for n, _ in d.operands] == ["inputs", "outputs"] and all(isinstance(o, VarOperandDef) for _, o in d.operands)
            ok = ok and any(isinstance(o, AttrSizedOperandSegments) and o.as_property for o in d.options)
        except Exception:
            ok = False
        _SEGMENTED[cls] = ok
    return ok


def ins_outs(op: Operation) -> tuple[tuple[SSAValue, ...], tuple[SSAValue, ...]]:
    """`(op.inputs, op.outputs)` of a structured op, as tuples; the accessors' own answer
    (or error) where the sizes are not two that add up to the operands."""
    if _segmented(type(op)):
        seg = op.properties.get("operandSegmentSizes")
        got = _SEGMENTS.get(id(seg))
        if got is None and isinstance(seg, DenseArrayBase):
            if len(_SEGMENTS) > 4096:
                _SEGMENTS.clear()
            # the entry keeps `seg` alive: its id is not reused meanwhile
            got = _SEGMENTS[id(seg)] = (seg, tuple(seg.get_values()))  # type: ignore[arg-type]
        if got is not None and len(got[1]) == 2:
            n_in, n_out = got[1]
            operands = op._operands  # pyright: ignore[reportPrivateUsage]
            if len(operands) == n_in + n_out:
                return tuple(operands[:n_in]), tuple(operands[n_in:])
    return tuple(op.inputs), tuple(op.outputs)  # type: ignore[attr-defined]
