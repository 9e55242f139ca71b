"""AdamW in IR: elementwise linalg.generics per parameter (the two moments, then the
parameter), so the update runs wherever the parameter's update layout puts it with no
communication of its own.

Scalars come in as function arguments: the learning rate (a schedule lives in the
trainer), the step count (bias correction `1 - beta^step`), and the gradient scale (1 / accumulation steps, so accumulated
gradient sums become means). Weight decay is decoupled (`p * (1 - lr * wd)`, as
torch.optim.AdamW) and applies only to the parameters `ParamSpec.decay` marks: the
matrices, not biases or layernorm gains.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the IR is built only on a compile: a cache hit imports none of it
    from xdsl.ir import SSAValue

    from shardc.training.ir_builder import Body, FuncBuilder, Value

LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class AdamWConfig:
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1


@dataclass(frozen=True)
class StepScalars:
    """The per-call scalar arguments of the update."""

    lr: Value
    step: Value
    grad_scale: Value


def adamw_update(fb: FuncBuilder, cfg: AdamWConfig, s: StepScalars, p: Value, g: Value, m: Value, v: Value, decay: bool) -> tuple[Value, Value, Value]:
    """(p', m', v') for one parameter: three elementwise generics (one per result; a
    multi-result generic would do, but xDSL 0.75 cannot parse one back). The bias
    corrections are computed inside the body from the scalar step: every op of the
    step is then a linalg.generic, which sharding-propagation handles (it rejects scalar
    arith ops outside them, as upstream does)."""
    from xdsl.dialects import arith, math

    from shardc.training.ir_builder import Value

    x = LETTERS[: len(p.shape)]

    # Scalar factors are combined first (on scalars), so each array sees one multiply:
    # m' = beta m + g ((1 - beta) s), v' = beta v + g^2 ((1 - beta) s^2), s the grad scale.
    def moment(beta: float, square: bool) -> Value:
        def body(b: Body, a: Sequence[SSAValue]) -> list[SSAValue]:
            gs, ga, ma = a[:3]
            grad = b.mul(ga, ga) if square else ga
            factor = b.mul(b.const(1.0 - beta), b.mul(gs, gs) if square else gs)
            return [b.add(b.mul(b.const(beta), ma), b.mul(grad, factor))]

        return Value(fb.generic(f",{x},{x}->{x}", [s.grad_scale, g, m if not square else v], [fb.ft], body)[0], fb)

    m1, v1 = moment(cfg.beta1, False), moment(cfg.beta2, True)

    def update(b: Body, a: Sequence[SSAValue]) -> list[SSAValue]:
        lr, step, pa, ma, va = a[:5]
        t = b.add_op(arith.SIToFPOp(step, b.ft))
        one = b.const(1.0)
        bc1 = b.sub(one, b.add_op(math.PowFOp(b.const(cfg.beta1), t)))
        bc2 = b.sub(one, b.add_op(math.PowFOp(b.const(cfg.beta2), t)))
        # p' = p (1 - lr wd) - (lr / bc1) m / (sqrt(v / bc2) + eps), scalars folded first.
        den = b.add(b.sqrt(b.mul(va, b.div(one, bc2))), b.const(cfg.eps))
        step_size = b.div(lr, bc1)
        if decay and cfg.weight_decay:
            pa = b.mul(pa, b.sub(one, b.mul(lr, b.const(cfg.weight_decay))))
        return [b.sub(pa, b.mul(b.div(ma, den), step_size))]

    p1 = fb.generic(f",,{x},{x},{x}->{x}", [s.lr, s.step, p, m1, v1], [fb.ft], update)[0]
    return Value(p1, fb), m1, v1


def adamw_donation(n: int) -> dict[str, dict[int, int]]:
    """The donation of `@adamw_step(P, G, M, V, lr, step, scale) -> (P', M', V')` over
    `n` parameters (`shardc.runtime.codegen.donation`): each of p', m', v' is written over p, m,
    v, which its caller gives up. The gradients are not donated (they are read once,
    but nothing is returned in their place). The compiler honours a pair only where the
    update reads that argument where it writes the result: a parameter whose storage
    and update layouts differ (ZeRO without FSDP: it is sliced, updated, gathered back)
    keeps a fresh result, the moments are always updated in place. SHARDC_DONATE=0
    asks for none (the out-of-place update, to measure against; another cache key)."""
    if not donating():
        return {}
    return {"adamw_step": {**{i: i for i in range(n)}, **{2 * n + i: n + i for i in range(n)}, **{3 * n + i: 2 * n + i for i in range(n)}}}


def step_donation(n: int) -> dict[str, dict[int, int]]:
    """What the trainers donate: `adamw_donation`, and to `@train_step(P, acc, ...) ->
    (loss, acc')` each gradient accumulator, which `acc + g` overwrites (so the buffer
    is reused by every microbatch and step, and the old and new sums never coexist)."""
    if not donating():
        return {}
    return {**adamw_donation(n), "train_step": {n + i: 1 + i for i in range(n)}}


def donating() -> bool:
    """Whether the trainers donate (SHARDC_DONATE=0: they do not)."""
    return os.environ.get("SHARDC_DONATE", "1") != "0"
