"""linalg's convolution and pooling named ops (`linalg.conv_*`, `linalg.depthwise_conv_*`,
`linalg.pooling_*`), as MLIR defines them in LinalgNamedStructuredOps.yaml: one table
row per op gives its loops, the dims each operand reads (`oh+kh` for the strided,
dilated window `oh * stride + kh * dilation`), and its body. xDSL 0.75 has six of
them, with required `strides`/`dilations` (MLIR's default to ones) and a pooling body
that combines the input with the window operand instead of the accumulator; these
replace them (`shardc.dialects.linalg` registers them).

The quantized `_q` variants (zero points as extra scalar inputs) are not here.

https://mlir.llvm.org/docs/Dialects/Linalg/
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, ArrayAttr, DenseIntElementsAttr, IntegerType, i64
from xdsl.dialects.linalg.abstract_ops import NamedOperation
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.ir import Attribute, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.irdl import irdl_op_definition, opt_prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from shardc.ir.linalg_build import body_arg_types


@dataclass(frozen=True)
class WindowOpSpec:
    """One conv/pooling op: loop names in MLIR's order; per operand (input, filter or
    window, output) its axes, `o+k` being the window axis `o * stride + k * dilation`
    (strides and dilations in the order these axes come); the reduction loops; the body
    (`conv`: acc + in * filter; `sum`, `max`, `min`, `max_unsigned`, `min_unsigned`:
    acc combined with the input); whether the op has strides and dilations."""

    name: str
    loops: tuple[str, ...]
    operands: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
    reductions: frozenset[str]
    body: str
    strided: bool = True

    @property
    def n_spatial(self) -> int:
        return sum("+" in a for a in self.operands[0])


def _spec(name: str, loops: str, inp: str, filt: str, out: str, red: str, body: str = "conv", strided: bool = True) -> WindowOpSpec:
    return WindowOpSpec(name, tuple(loops.split()), (tuple(inp.split()), tuple(filt.split()), tuple(out.split())), frozenset(red.split()), body, strided)


_CONVS = [
    _spec("conv_1d", "ow kw", "ow+kw", "kw", "ow", "kw", strided=False),
    _spec("conv_2d", "oh ow kh kw", "oh+kh ow+kw", "kh kw", "oh ow", "kh kw", strided=False),
    _spec("conv_3d", "od oh ow kd kh kw", "od+kd oh+kh ow+kw", "kd kh kw", "od oh ow", "kd kh kw", strided=False),
    _spec("conv_1d_nwc_wcf", "n ow f kw c", "n ow+kw c", "kw c f", "n ow f", "kw c"),
    _spec("conv_1d_ncw_fcw", "n f ow c kw", "n c ow+kw", "f c kw", "n f ow", "c kw"),
    _spec("conv_2d_nhwc_hwcf", "n oh ow f kh kw c", "n oh+kh ow+kw c", "kh kw c f", "n oh ow f", "kh kw c"),
    _spec("conv_2d_nhwc_fhwc", "n oh ow f kh kw c", "n oh+kh ow+kw c", "f kh kw c", "n oh ow f", "kh kw c"),
    _spec("conv_2d_nchw_fchw", "n f oh ow c kh kw", "n c oh+kh ow+kw", "f c kh kw", "n f oh ow", "c kh kw"),
    _spec("conv_2d_ngchw_fgchw", "n g f oh ow c kh kw", "n g c oh+kh ow+kw", "f g c kh kw", "n g f oh ow", "c kh kw"),
    _spec("conv_2d_ngchw_gfchw", "n g f oh ow c kh kw", "n g c oh+kh ow+kw", "g f c kh kw", "n g f oh ow", "c kh kw"),
    _spec("conv_2d_nhwgc_gfhwc", "n oh ow g f kh kw c", "n oh+kh ow+kw g c", "g f kh kw c", "n oh ow g f", "kh kw c"),
    _spec("conv_3d_ndhwc_dhwcf", "n od oh ow f kd kh kw c", "n od+kd oh+kh ow+kw c", "kd kh kw c f", "n od oh ow f", "kd kh kw c"),
    _spec("conv_3d_ncdhw_fcdhw", "n f od oh ow c kd kh kw", "n c od+kd oh+kh ow+kw", "f c kd kh kw", "n f od oh ow", "c kd kh kw"),
    _spec("depthwise_conv_1d_nwc_wc", "n ow ic kw", "n ow+kw ic", "kw ic", "n ow ic", "kw"),
    _spec("depthwise_conv_1d_ncw_cw", "n ow ic kw", "n ic ow+kw", "ic kw", "n ic ow", "kw"),
    _spec("depthwise_conv_1d_nwc_wcm", "n ow ic cm kw", "n ow+kw ic", "kw ic cm", "n ow ic cm", "kw"),
    _spec("depthwise_conv_2d_nchw_chw", "n oh ow ic kh kw", "n ic oh+kh ow+kw", "ic kh kw", "n ic oh ow", "kh kw"),
    _spec("depthwise_conv_2d_nhwc_hwc", "n oh ow ic kh kw", "n oh+kh ow+kw ic", "kh kw ic", "n oh ow ic", "kh kw"),
    _spec("depthwise_conv_2d_nhwc_hwcm", "n oh ow ic cm kh kw", "n oh+kh ow+kw ic", "kh kw ic cm", "n oh ow ic cm", "kh kw"),
    _spec("depthwise_conv_3d_ndhwc_dhwc", "n od oh ow kd kh kw ic", "n od+kd oh+kh ow+kw ic", "kd kh kw ic", "n od oh ow ic", "kd kh kw"),
    _spec("depthwise_conv_3d_ncdhw_cdhw", "n od oh ow kd kh kw ic", "n ic od+kd oh+kh ow+kw", "ic kd kh kw", "n ic od oh ow", "kd kh kw"),
    _spec("depthwise_conv_3d_ndhwc_dhwcm", "n od oh ow cm kd kh kw ic", "n od+kd oh+kh ow+kw ic", "kd kh kw ic cm", "n od oh ow ic cm", "kd kh kw"),
]


def _pools(layout: str, loops: str, inp: str, win: str, out: str, kinds: str) -> list[WindowOpSpec]:
    red = " ".join(a for a in win.split())
    return [_spec(f"pooling_{layout}_{k}", loops, inp, win, out, red, body=k) for k in kinds.split()]


_POOLS = [
    *_pools("nhwc", "n oh ow c kh kw", "n oh+kh ow+kw c", "kh kw", "n oh ow c", "sum max max_unsigned min min_unsigned"),
    *_pools("nchw", "n c oh ow kh kw", "n c oh+kh ow+kw", "kh kw", "n c oh ow", "sum max"),
    *_pools("nwc", "n ow c kw", "n ow+kw c", "kw", "n ow c", "sum max max_unsigned min min_unsigned"),
    *_pools("ncw", "n c ow kw", "n c ow+kw", "kw", "n c ow", "sum max"),
    *_pools("ndhwc", "n od oh ow c kd kh kw", "n od+kd oh+kh ow+kw c", "kd kh kw", "n od oh ow c", "sum max min"),
]

SPECS: tuple[WindowOpSpec, ...] = (*_CONVS, *_POOLS)


# ---------------------------------------------------------------------------------------
# Bodies
# ---------------------------------------------------------------------------------------


def _cast(value: SSAValue, to: Attribute) -> SSAValue:
    """MLIR's `cast_signed` of a named op's operand to the accumulator's type."""
    src = value.type
    if src == to:
        return value
    if isinstance(src, AnyFloat) and isinstance(to, AnyFloat):
        return (arith.ExtFOp(value, to) if to.bitwidth > src.bitwidth else arith.TruncFOp(value, to)).result
    if isinstance(to, AnyFloat):
        return arith.SIToFPOp(value, to).result
    if isinstance(src, AnyFloat):
        return arith.FPToSIOp(value, to).result
    assert isinstance(src, IntegerType) and isinstance(to, IntegerType)
    return (arith.ExtSIOp(value, to) if to.width.data > src.width.data else arith.TruncIOp(value, to)).result


_COMBINERS: dict[str, tuple[type[Operation], type[Operation]]] = {  # body -> (float op, integer op)
    "sum": (arith.AddfOp, arith.AddiOp),
    "max": (arith.MaximumfOp, arith.MaxSIOp),
    "min": (arith.MinimumfOp, arith.MinSIOp),
    "max_unsigned": (arith.MaximumfOp, arith.MaxUIOp),
    "min_unsigned": (arith.MinimumfOp, arith.MinUIOp),
}


def _body(kind: str, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
    types = body_arg_types((*inputs, *outputs))
    acc_t = types[-1]
    is_float = isinstance(acc_t, AnyFloat)

    @Builder.implicit_region(types)
    def body(args: tuple[BlockArgument, ...]) -> None:
        if kind == "conv":
            mul, add = (arith.MulfOp, arith.AddfOp) if is_float else (arith.MuliOp, arith.AddiOp)
            product = mul(_cast(args[0], acc_t), _cast(args[1], acc_t))
            YieldOp(add(args[2], product))
        else:
            op = _COMBINERS[kind][0 if is_float else 1]
            YieldOp(op(args[2], _cast(args[0], acc_t)))  # pyright: ignore[reportCallIssue]

    return body


# ---------------------------------------------------------------------------------------
# The ops
# ---------------------------------------------------------------------------------------


class WindowNamedOp(NamedOperation):
    """A conv or pooling named op; `SPEC` says which. Those without strides and
    dilations (`conv_1d/2d/3d`) are these; the others `StridedWindowNamedOp`."""

    SPEC: ClassVar[WindowOpSpec]
    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return _body(cls.SPEC.body, inputs, outputs)

    def window_factors(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(strides, dilations), one per spatial axis, ones where not given."""
        ones = (1,) * self.SPEC.n_spatial
        return ones, ones

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return _maps(self.SPEC, *self.window_factors())

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        return _iterators(self.SPEC)

    def attribute_error(self) -> str | None:
        """What is wrong with the strides or dilations, or None."""
        return None

    def verify_(self) -> None:
        if (problem := self.attribute_error()) is not None:
            raise VerifyException(f"'{self.name}' op {problem}")
        for k, (operand, axes) in enumerate(zip(self.operands, self.SPEC.operands)):
            rank = len(getattr(operand.type, "get_shape", lambda: ())())
            if rank != len(axes):
                raise VerifyException(f"'{self.name}' op expected operand #{k} rank ({rank}) to match the result rank of indexing_map ({len(axes)})")
        try:
            super().verify_()
        except VerifyException as e:  # xDSL's shape checks, worded as MLIR's emitOpError
            message = str(e)
            raise VerifyException(message if message.startswith(f"'{self.name}' op") else f"'{self.name}' op {message}") from None

    @classmethod
    def parse(cls, parser: Parser) -> NamedOperation:
        start = parser.pos
        op = NamedOperation.parse.__func__(cls, parser)  # type: ignore[attr-defined]
        assert isinstance(op, WindowNamedOp)
        kind = cls.SPEC.body
        if kind.endswith("_unsigned") and op.outputs and isinstance(body_arg_types(op.outputs)[0], AnyFloat):
            parser.raise_error(f"custom op '{cls.name}' unsupported operation: unsigned {kind.split('_')[0]} not on uint", start, parser.pos)
        if (problem := op.attribute_error()) is not None:  # MLIR checks properties as it parses them
            parser.raise_error(f"custom op '{cls.name}' '{cls.name}' op {problem}", start, parser.pos)
        # MLIR memoizes the maps on the op when it parses it (visible in generic form)
        op.attributes.setdefault(_MEMOIZED, ArrayAttr([AffineMapAttr(m) for m in op.get_default_indexing_maps()]))
        return op

    def print(self, printer: Printer) -> None:
        # MLIR prints the leading dictionary sorted (dilations before strides)
        extra = {k: v for k, v in {**self.attributes, **self.properties}.items() if k not in ("operandSegmentSizes", _MEMOIZED)}
        if extra:
            printer.print_op_attributes(dict(sorted(extra.items())))
        for word, values in ((" ins(", self.inputs), (" outs(", self.outputs)):
            if values:
                printer.print_string(word)
                printer.print_list(values, printer.print_ssa_value)
                printer.print_string(" : ")
                printer.print_list([v.type for v in values], printer.print_attribute)
                printer.print_string(")")
        if self.res:
            printer.print_string(" -> ")
            if len(self.res) == 1:
                printer.print_attribute(self.res[0].type)
            else:
                with printer.in_parens():
                    printer.print_list(self.res, lambda r: printer.print_attribute(r.type))


class StridedWindowNamedOp(WindowNamedOp):
    """A conv or pooling op with `strides` and `dilations` (ones when absent)."""

    strides = opt_prop_def(DenseIntElementsAttr)
    dilations = opt_prop_def(DenseIntElementsAttr)

    def window_factors(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        n = self.SPEC.n_spatial

        def factors(attr: DenseIntElementsAttr | None) -> tuple[int, ...]:
            values = (1,) * n if attr is None else tuple(int(v) for v in attr.get_values())
            return values if len(values) == n else (values + (1,) * n)[:n]  # attribute_error says so

        return factors(self.strides), factors(self.dilations)

    def attribute_error(self) -> str | None:
        n = self.SPEC.n_spatial
        for name, attr in (("strides", self.strides), ("dilations", self.dilations)):
            if attr is not None and (attr.get_element_type() != i64 or tuple(attr.get_shape() or ()) != (n,)):
                return f"attribute '{name}' failed to satisfy constraint: 64-bit signless int elements attribute of shape [{n}]"
        return None


_MEMOIZED = "linalg.memoized_indexing_maps"
_MAPS: dict[tuple[str, tuple[int, ...], tuple[int, ...]], tuple[AffineMap, ...]] = {}
_ITERATORS: dict[str, ArrayAttr[IteratorTypeAttr]] = {}


def _maps(spec: WindowOpSpec, strides: tuple[int, ...], dilations: tuple[int, ...]) -> tuple[AffineMap, ...]:
    key = (spec.name, strides, dilations)
    found = _MAPS.get(key)
    if found is None:
        dim = {name: AffineDimExpr(i) for i, name in enumerate(spec.loops)}
        maps = []
        for axes in spec.operands:
            exprs: list[AffineExpr] = []
            k = 0
            for a in axes:
                if "+" in a:
                    o, w = a.split("+")
                    exprs.append(dim[o] * strides[k] + dim[w] * dilations[k])
                    k += 1
                else:
                    exprs.append(dim[a])
            maps.append(AffineMap(len(spec.loops), 0, tuple(exprs)))
        found = _MAPS[key] = tuple(maps)
    return found


def _iterators(spec: WindowOpSpec) -> ArrayAttr[IteratorTypeAttr]:
    found = _ITERATORS.get(spec.name)
    if found is None:
        found = _ITERATORS[spec.name] = ArrayAttr(
            [IteratorTypeAttr.reduction() if n in spec.reductions else IteratorTypeAttr.parallel() for n in spec.loops]
        )
    return found


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Op"


def _define(spec: WindowOpSpec) -> type[WindowNamedOp]:
    fields = {"name": f"linalg.{spec.name}", "SPEC": spec, "__doc__": f"linalg.{spec.name}", "__annotations__": {"SPEC": ClassVar[WindowOpSpec]}}
    cls = type(_class_name(spec.name), (StridedWindowNamedOp if spec.strided else WindowNamedOp,), fields)
    return irdl_op_definition(cls)


WINDOW_OPS: tuple[type[WindowNamedOp], ...] = tuple(_define(s) for s in SPECS)
"""Every conv and pooling op of the table, for the dialect."""
