"""The step module: `@train_step` (forward, loss, gradients accumulated into a buffer),
`@adamw_step` (the optimizer update) and `@loss` (evaluation).

Signatures (P = the parameters in `gpt.param_specs` order):

  @train_step(P..., grad_acc(P)..., tokens, targets, vocab_ids) -> (loss, grad_acc'(P)...)
  @adamw_step(P..., grads(P)..., mu(P)..., nu(P)..., lr, step: i64, grad_scale)
      -> (P'..., mu'..., nu'...)
  @loss(P..., tokens, targets, vocab_ids) -> loss

They are split where the layouts change, so a sharded build differs only by annotations at
the function boundaries (`Sharded`): in `@train_step` parameters arrive in storage layout
and are resharded to compute layout for their users, tokens and targets are split over
`batch`, and the new gradient accumulator is returned in its gradient layout (the update
layout: with ZeRO the gradients are reduce-scattered straight to their owners); in
`@adamw_step` parameters go from storage to update layout, the moments live in update
layout, and updated parameters go back to storage layout. The compiler derives the
collectives (FSDP all-gathers, the gradient reduction, ZeRO's parameter gathers) from these
annotations; nothing else in the IR names a device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp, i64

from shardc.training.autodiff import grad
from shardc.training.axis import (
    PartitionSpec,
    ShardingPlan,
    ShardingPolicy,
    StateArray,
    annotate,
    resolve,
    validate_layouts,
    validate_state,
)
from shardc.training.gpt import GPTConfig, ParamSpec, data_types, float_type, gpt_loss, loss_builder, param_specs, param_types
from shardc.training.ir_builder import FuncBuilder, Value
from shardc.training.mesh import BATCH, Grid
from shardc.training.optimizer import AdamWConfig, StepScalars, adamw_update


@dataclass(frozen=True)
class Sharded:
    """Annotate the step functions for this grid, plan and policy."""

    grid: Grid
    plan: ShardingPlan
    policy: ShardingPolicy

    def layouts(self, p: ParamSpec):
        return resolve(p.axes, self.plan, self.policy, p.path)

    def data_spec(self, rank: int) -> PartitionSpec:
        return PartitionSpec(BATCH, *([None] * (rank - 1)))


def _ann(fb: FuncBuilder, v: Value, sh: Sharded | None, spec: PartitionSpec, for_users: bool = False) -> Value:
    if sh is None:
        return v
    return Value(annotate(fb, v.ssa, sh.grid, spec, for_users), fb)


def _reshard(fb: FuncBuilder, v: Value, sh: Sharded | None, src: PartitionSpec, dst: PartitionSpec) -> Value:
    """Annotate `v` as produced in `src` and used in `dst`."""
    return _ann(fb, _ann(fb, v, sh, src), sh, dst, for_users=True)


def build_train_step(cfg: GPTConfig, batch: int, dtype: str | type = "float32", sharded: Sharded | None = None) -> FuncBuilder:
    ft = float_type(dtype)
    specs = param_specs(cfg)
    acc_types = [(f"grad.{n}", t) for n, t in param_types(cfg, ft)]

    fb = FuncBuilder("train_step", [*param_types(cfg, ft), *acc_types, *data_types(cfg, batch)], ft)
    n = len(specs)
    raw_params, raw_acc = fb.args[:n], fb.args[n : 2 * n]
    tokens, targets, ids = fb.args[2 * n :]
    params: dict[str, Value] = {}
    for s, v in zip(specs, raw_params):
        lay = sharded.layouts(s) if sharded else None
        params[s.path] = _reshard(fb, v, sharded, lay.storage, lay.compute) if lay else v
    if sharded:
        tokens = _reshard(fb, tokens, sharded, sharded.data_spec(2), sharded.data_spec(2))
        targets = _reshard(fb, targets, sharded, sharded.data_spec(2), sharded.data_spec(2))
        ids = _reshard(fb, ids, sharded, PartitionSpec(None), PartitionSpec(None))
    loss = gpt_loss(fb, cfg, params, tokens, targets, ids)
    grads = grad(fb, loss, [params[s.path] for s in specs])
    new_acc: list[Value] = []
    for s, g, acc in zip(specs, grads, raw_acc):
        letters = "abcdefgh"[: len(s.shape)]
        if sharded:
            lay = sharded.layouts(s)
            acc = _reshard(fb, acc, sharded, lay.grads, lay.grads)
            g = _reshard(fb, g, sharded, lay.compute, lay.grads)
        total = fb.add(f"{letters},{letters}->{letters}", acc, g)
        new_acc.append(_ann(fb, total, sharded, sharded.layouts(s).grads) if sharded else total)
    fb.ret(loss, *new_acc)
    return fb


def build_adamw_step(cfg: GPTConfig, opt: AdamWConfig, dtype: str | type = "float32", sharded: Sharded | None = None) -> FuncBuilder:
    ft = float_type(dtype)
    specs = param_specs(cfg)
    pt = param_types(cfg, ft)
    args = [*pt, *((f"grad.{n}", t) for n, t in pt), *((f"mu.{n}", t) for n, t in pt), *((f"nu.{n}", t) for n, t in pt)]
    fb = FuncBuilder("adamw_step", [*args, ("lr", ft), ("step", i64), ("grad_scale", ft)], ft)
    n = len(specs)
    lr, step, grad_scale = fb.args[4 * n :]
    scalars = StepScalars(lr, step, grad_scale)
    new_p, new_m, new_v = [], [], []
    for i, s in enumerate(specs):
        p, g, m, v = (fb.args[k * n + i] for k in range(4))
        if sharded:
            lay = sharded.layouts(s)
            p = _reshard(fb, p, sharded, lay.storage, lay.update)
            g = _reshard(fb, g, sharded, lay.grads, lay.update)
            m = _reshard(fb, m, sharded, lay.update, lay.update)
            v = _reshard(fb, v, sharded, lay.update, lay.update)
        p2, m2, v2 = adamw_update(fb, opt, scalars, p, g, m, v, s.decay)
        if sharded:
            lay = sharded.layouts(s)
            p2 = _reshard(fb, p2, sharded, lay.update, lay.storage)
            m2 = _reshard(fb, m2, sharded, lay.update, lay.update)
            v2 = _reshard(fb, v2, sharded, lay.update, lay.update)
        new_p.append(p2)
        new_m.append(m2)
        new_v.append(v2)
    fb.ret(*new_p, *new_m, *new_v)
    return fb


def build_loss(cfg: GPTConfig, batch: int, dtype: str | type = "float32", sharded: Sharded | None = None) -> FuncBuilder:
    """`@loss`: evaluation under the compute layouts (parameters arrive in storage layout,
    the batch split over `batch`), no gradients, no update."""
    if sharded is None:
        fb, _, loss = loss_builder(cfg, batch, float_type(dtype))
        fb.ret(loss)
        return fb
    ft = float_type(dtype)
    specs = param_specs(cfg)
    fb = FuncBuilder("loss", [*param_types(cfg, ft), *data_types(cfg, batch)], ft)
    params = {}
    for s, v in zip(specs, fb.args):
        lay = sharded.layouts(s)
        params[s.path] = _reshard(fb, v, sharded, lay.storage, lay.compute)
    tokens, targets, ids = fb.args[len(specs) :]
    tokens = _reshard(fb, tokens, sharded, sharded.data_spec(2), sharded.data_spec(2))
    targets = _reshard(fb, targets, sharded, sharded.data_spec(2), sharded.data_spec(2))
    ids = _reshard(fb, ids, sharded, PartitionSpec(None), PartitionSpec(None))
    fb.ret(gpt_loss(fb, cfg, params, tokens, targets, ids))
    return fb


def build_step_module(
    cfg: GPTConfig,
    batch: int,
    dtype: str | type = "float32",
    opt: AdamWConfig | None = None,
    sharded: Sharded | None = None,
    with_loss: bool = True,
    only: Sequence[str] | None = None,
) -> ModuleOp:
    """The module of `@train_step`, `@adamw_step` and `@loss` (`only`: those of these
    names, in this order: a part of the step, `shardc.training.split_compile`). A sharded
    module starts with its `shard.grid`, and is built only after the whole state (and the
    token batch, global shape `batch` x block_size) has been checked against the grid."""
    opt = opt or AdamWConfig()
    if sharded is not None:
        validate_layouts(param_specs(cfg), sharded.plan, sharded.policy, sharded.grid)
        data = [StateArray(name, (batch, cfg.block_size), sharded.data_spec(2)) for name in ("data/tokens", "data/targets")]
        validate_state(data, sharded.grid)
    makers = {
        "train_step": lambda: build_train_step(cfg, batch, dtype, sharded),
        "adamw_step": lambda: build_adamw_step(cfg, opt, dtype, sharded),
        "loss": lambda: build_loss(cfg, batch, dtype, sharded),
    }
    names = only if only is not None else [n for n in makers if with_loss or n != "loss"]
    funcs = [makers[n]().func for n in names]
    ops = ([sharded.grid.grid_op()] if sharded else []) + funcs
    return ModuleOp(ops)  # type: ignore[arg-type]


__all__ = ["Sharded", "build_adamw_step", "build_loss", "build_step_module", "build_train_step"]
