"""Train a PyTorch `nn.Module` through the shard compiler: the training step imported from
PyTorch's own autograd, the layouts from logical axes named by parameter FQN.

    from shardc.frontends.torch_train import train_module
    result = train_module(model, batches, F.mse_loss, world=2,
                          axes={r"fc1\\.weight": ("n_hidden", None), r"fc1\\.bias": ("n_hidden",),
                                r"fc2\\.weight": (None, "n_hidden")},
                          plan=ShardingPlan(tp_rules={"n_hidden": "shard"}),
                          policy=ShardingPolicy(tp=2, zero=False), steps=3, lr=1e-2)
    model.load_state_dict(result.state_dict(model))

Import (`export_train_step`): `torch.func.grad_and_value` of `loss_fn(model(*inputs),
*targets)` over the parameters, traced with `make_fx` (functionalized, decomposed by
`torch_decomp.training_decompositions`, SDPA in its math form: torch-mlir has no CPU backward for
the fused kernel; libraries see tracing as under torch.export, `torch.traced_as_export`,
so transformers skips its data-dependent mask checks) and imported by
`torch_mlir.fx.stateless_fx_import` as linalg-on-tensors:

    @train_step(inputs..., targets..., params(FQN)..., buffers(FQN)...) -> (loss, grads(FQN)...)

Parameters and buffers (non-persistent ones too: a rotary embedding's `inv_freq`) are
arguments, never baked constants. A forward that updates buffers in place (train-mode
BatchNorm's running_mean, running_var, num_batches_tracked) has their new values as the
step's last results (`ExportedStep.updated_buffers`): found by one eager forward on
copies, traced functionalized (`torch_decomp.native_batch_norm_training` makes
BatchNorm's hidden in-place update a `copy_`) and checked against the eager values, so
an update the trace would lose is refused, never trained with stale statistics. A
forward that draws random numbers (dropout in training mode) is refused. `loss_fn` gets
the model's output as it returns it (a transformers `ModelOutput`: `out.logits`), a
model called the usual way, `model(input_ids)`. The
gradients of `nn.Embedding` and of cross-entropy come out as `tm_tensor.scatter`
(shardc's TMTensor overlay runs and shards it).

Layouts (`ParamInfo`, `resolve_param_axes`): the user names each parameter's logical axes
by FQN pattern (`re.fullmatch`); unnamed parameters and buffers are replicated. The
shared `ShardingPlan`/`ShardingPolicy` turn them into storage / compute / update layouts
(`shardc.training.axis.resolve`; a buffer keeps its compute layout), checked against the
grid (`plan_state`) before anything is imported or allocated.

The step module (`TorchStepProgram`) is the imported `@train_step` with shard
annotations at its boundary (parameters arrive in storage layout and are used in compute
layout, the batch is split over `batch`, gradients leave in the update layout) plus
`@adamw_step` built in IR (`shardc.training.optimizer`, torch.optim.AdamW's update; decay
on every parameter but those the `no_decay` patterns name, torch's second parameter group)
and, with held-out batches, `@eval_loss` (the loss imported without gradients, the same
boundary); the compiler derives every collective (`shardc.training.pipeline.PIPELINE`).
Gradient accumulation adds the gradient pieces each rank receives, in their update
layout, so it needs no communication of its own. Updated buffers leave the step in their
layout (replicated unless the axes name them) and are fed to the next microbatch: with
the batch split, BatchNorm's statistics are reduced over the whole global batch (an
all_reduce the compiler derives), SyncBatchNorm's semantics, not DDP-with-BatchNorm's
per-rank statistics; so shardc on any grid equals PyTorch on the global batch on one
process. The held-out loss (`@eval_loss`) is imported with the module in eval mode, as
a PyTorch validation loop runs it: BatchNorm normalizes with the running statistics
trained so far and nothing is updated.

Training (`TorchTraining`, `train_module`) runs this program with the trainer's loop for
module step programs (`shardc.training.module_run.ModuleTraining`): `StepLog`s, the held-out loss every `eval_every` steps, sharded checkpoints through
`shardc.training.checkpoint` keyed by FQN (the manifest's model is a `TorchModelInfo`;
updated buffers under `buffers/<FQN>`) and resume on any grid and policy.
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shardc.frontends.torch import require_torch, traced_as_export
from shardc.training.axis import (
    ParamLayouts,
    PartitionSpec,
    ShardingConfigError,
    ShardingPlan,
    ShardingPolicy,
    StateArray,
    resolve,
    validate_layouts,
    validate_state,
)
from shardc.training.checkpoint import Checkpoint, CheckpointOptions, run_options
from shardc.training.mesh import Grid, make_grid
from shardc.training.optimizer import AdamWConfig
from shardc.training.train import TrainConfig
from shardc.training.module_run import ModuleTraining, ModuleTrainResult, as_numpy, data_spec, mpi_world_size
from shardc.training.trainer import StepLog, TrainingConfig

LogicalAxes = tuple[str | None, ...]

# torch.optim.AdamW's defaults.
TORCH_ADAMW = AdamWConfig(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)


class TorchTrainError(ValueError):
    """Bad input to the torch training path: one line naming the parameter or the op."""


# =========================================================================================
# Import
# =========================================================================================


@dataclass
class ExportedStep:
    """torch-mlir's output for one training step (or, with no gradients, one loss), and
    what its arguments are."""

    text: str
    func_name: str
    input_names: list[str]
    target_names: list[str]
    param_names: list[str]
    param_shapes: list[tuple[int, ...]]
    dtype: str
    buffer_names: list[str] = field(default_factory=list)
    buffer_shapes: list[tuple[int, ...]] = field(default_factory=list)
    grads: bool = True
    updated_buffers: list[str] = field(default_factory=list)
    """The buffers the forward updates (train-mode BatchNorm's running statistics), in
    the order of their new values, the step's last results."""
    updated_dtypes: list[str] = field(default_factory=list)

    @property
    def arg_names(self) -> list[str]:
        return [*self.input_names, *self.target_names, *self.param_names, *self.buffer_names]

    @property
    def result_names(self) -> list[str]:
        names = ["loss", *(f"grad.{n}" for n in self.param_names)] if self.grads else ["loss"]
        return [*names, *(f"buffer.{n}" for n in self.updated_buffers)]


def export_train_step(
    model: Any,
    inputs: Sequence[Any],
    targets: Sequence[Any],
    loss_fn: Callable[..., Any],
    *,
    func_name: str = "train_step",
    grads: bool = True,
) -> ExportedStep:
    """Import the loss and the parameter gradients of `loss_fn(model(*inputs), *targets)`
    as linalg-on-tensors (see the module docstring for the signature); `grads=False`:
    the loss alone (held-out evaluation, buffers left as they are). Buffers are
    arguments after the parameters; the new values of those the forward updates
    (train-mode BatchNorm) are the step's last results."""
    torch, fx = require_torch()
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from shardc.frontends.torch_decomp import training_decompositions

    inputs, targets = tuple(inputs), tuple(targets)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    keys, bkeys = list(params), list(buffers)
    n_in, n_tg, n_p = len(inputs), len(targets), len(keys)

    # --- buffers the forward updates (bn-train) -------------------------------------
    # The step returns their new values after the gradients; the held-out loss
    # (grads=False) leaves them as they are.
    updated = updated_buffers(model, inputs, params, buffers) if buffers and grads else {}
    ukeys = list(updated)

    def loss_of(p: dict, b: dict, ins: tuple, tgs: tuple) -> Any:
        b = {k: v.clone() if k in updated else v for k, v in b.items()}  # updated in the grad transform's level
        out = torch.func.functional_call(model, {**p, **b}, ins)
        return (loss_fn(out, *tgs), [b[k] for k in ukeys]) if ukeys else loss_fn(out, *tgs)

    def step(*args: Any) -> Any:
        ins, tgs, flat = args[:n_in], args[n_in : n_in + n_tg], args[n_in + n_tg :]
        p, b = dict(zip(keys, flat[:n_p])), dict(zip(bkeys, flat[n_p:]))
        if not grads:
            return loss_of(p, b, ins, tgs)
        if ukeys:
            g, (loss, new) = torch.func.grad_and_value(loss_of, has_aux=True)(p, b, ins, tgs)
            return (loss, *(g[k] for k in keys), *new)
        g, loss = torch.func.grad_and_value(loss_of)(p, b, ins, tgs)
        return (loss, *(g[k] for k in keys))

    example = (*inputs, *targets, *params.values(), *buffers.values())
    diags: list[str] = []
    try:
        with sdpa_kernel([SDPBackend.MATH]), traced_as_export(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if ukeys:  # first BatchNorm's hidden update as a copy_, which the functionalized retrace makes a value
                table = training_decompositions()
                bn = torch.ops.aten.native_batch_norm.default
                gm = make_fx(torch.func.functionalize(step), decomposition_table={k: f for k, f in table.items() if k == bn})(*example)
                gm = make_fx(torch.func.functionalize(gm), decomposition_table=table)(*example)
            else:
                gm = make_fx(torch.func.functionalize(step), decomposition_table=training_decompositions())(*example)
    except Exception as e:  # noqa: BLE001 - torch refused to trace the module: say why
        if "_local_scalar_dense" in str(e):
            raise TorchTrainError(
                f"cannot trace the training step of {type(model).__name__}: its forward reads a tensor's value in Python "
                "(`.item()`, `float(t)`, `if t:`; BatchNorm with momentum=None averages by its num_batches_tracked this way), "
                "which a compiled step cannot: compute with the tensor instead (BatchNorm: give it a momentum)"
            ) from None
        raise TorchTrainError(f"torch-mlir cannot import the training step of {type(model).__name__}: {_reason(diags, e)}") from None
    if ukeys:
        _check_captured_updates(model, gm, example, updated, 1 + n_p)
    # --- end of buffers the forward updates ---------------------------------------------
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = fx.stateless_fx_import(gm, output_type="linalg-on-tensors", model_name=func_name, fx_importer=_importer(diags))
    except Exception as e:  # torch-mlir refused the module: say which op
        raise TorchTrainError(f"torch-mlir cannot import the training step of {type(model).__name__}: {_reason(diags, e)}") from None
    text = str(module)
    refuse_random(text, model, "training step" if grads else "loss")
    dtypes = {str(p.dtype).removeprefix("torch.") for p in params.values()}
    dtype = dtypes.pop() if len(dtypes) == 1 else "float32"
    return ExportedStep(
        text, func_name,
        [f"input{i}" for i in range(n_in)], [f"target{i}" for i in range(n_tg)],
        keys, [tuple(p.shape) for p in params.values()], dtype,
        bkeys, [tuple(b.shape) for b in buffers.values()], grads, ukeys,
        [str(updated[k].dtype).removeprefix("torch.") for k in ukeys],
    )


def refuse_random(text: str, model: Any, what: str) -> None:
    """torch-mlir imports random numbers (dropout in training mode) as a seed kept in an
    `ml_program.global`; shardc's runtime draws none, so such a program is refused with
    what to change."""
    if "ml_program.global_load @global_seed" in text:
        raise TorchTrainError(
            f"the {what} of {type(model).__name__} draws random numbers (dropout in training mode?), which shardc does not "
            "generate: call model.eval() to run its forward, or set its dropout probabilities to 0 to train it"
        )


def updated_buffers(model: Any, inputs: Sequence[Any], params: Mapping[str, Any], buffers: Mapping[str, Any]) -> dict[str, Any]:
    """The buffers one eager forward updates in place (train-mode BatchNorm's running
    statistics), by FQN, with their new values (the forward runs on copies: the model is
    not changed)."""
    import torch

    copies = {k: v.clone() for k, v in buffers.items()}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.func.functional_call(model, {**params, **copies}, tuple(inputs))
    return {k: copies[k] for k, v in buffers.items() if not torch.equal(copies[k], v)}


def _check_captured_updates(model: Any, gm: Any, example: Sequence[Any], updated: Mapping[str, Any], first: int) -> None:
    """The traced step's new buffers (results from `first` on) against the eager
    forward's: an update the trace lost (an in-place op whose schema hides it, outside
    what the decompositions rewrite) is refused naming the buffers, never trained
    silently with stale statistics. The graph runs with every op on copies of its
    operands, as torch-mlir reads it (values), so a hidden mutation has no effect here
    either."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map_only

    class AsValues(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            args, kwargs = tree_map_only(torch.Tensor, lambda t: t.clone(), (args, kwargs or {}))
            return func(*args, **kwargs)

    with torch.no_grad(), warnings.catch_warnings(), AsValues():
        warnings.simplefilter("ignore")
        got = gm(*example)[first:]
    lost = [
        k for (k, want), have in zip(updated.items(), got)
        if have.shape != want.shape or not torch.allclose(have.double(), want.double(), rtol=1e-4, atol=1e-6)
    ]
    if lost:
        raise TorchTrainError(
            f"the forward of {type(model).__name__} updates buffer{'s' if len(lost) > 1 else ''} {', '.join(lost)} "
            "in place in a way the training import cannot capture (an op that mutates its input without saying so): "
            "make the update an assignment or `copy_` of the new value, or keep the buffer constant"
        )


def _importer(diags: list[str]) -> Any:
    """torch-mlir's FxImporter on a context whose diagnostics are kept (not printed), so
    a failed import can name the op it stopped at."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_importer import FxImporter

    context = ir.Context()
    torch_d.register_dialect(context)

    def keep(d: Any) -> bool:
        diags.append(str(d.message))
        return True

    context.attach_diagnostic_handler(keep)
    return FxImporter(context=context)


def _reason(diags: Sequence[str], e: BaseException) -> str:
    """The op torch-mlir could not lower (`torch.aten.linalg_eig`), else its first line."""
    for d in diags:
        m = re.search(r'name = "(torch\.[\w.]+)"', d)
        if m:
            return f"no lowering to linalg for {m.group(1)}"
    text = (diags[0] if diags else str(e)).strip()
    return text.splitlines()[0] if text else type(e).__name__


# =========================================================================================
# Logical axes by FQN pattern
# =========================================================================================


@dataclass(frozen=True)
class ParamInfo:
    """A parameter (or buffer) as the plan sees it (what `axis.abstract_state` reads)."""

    path: str
    shape: tuple[int, ...]
    axes: LogicalAxes
    decay: bool = True


def _patterns(kind: str, patterns: Any) -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for pattern in patterns:
        try:
            out.append((pattern, re.compile(pattern)))
        except re.error as e:
            raise TorchTrainError(f"{kind} pattern {pattern!r} is not a regular expression: {e}") from None
    return out


def resolve_param_axes(
    names: Sequence[str],
    shapes: Sequence[tuple[int, ...]],
    axes: Mapping[str, LogicalAxes],
    plan: ShardingPlan,
    no_decay: Sequence[str] = (),
    n_params: int | None = None,
) -> list[ParamInfo]:
    """Each parameter's logical axes: the first pattern that fully matches its FQN, else
    all None (replicated). Every pattern must match a parameter, every named axis must be
    one the plan has a rule for, and the axes must have the parameter's rank. Names from
    `n_params` on are buffers: axes patterns may name them, they are never decayed.
    `no_decay`: FQN patterns of the parameters AdamW does not decay (biases, LayerNorm
    gains, as PyTorch users do with two parameter groups); each must match one."""
    known = set(plan.tp_rules) | set(plan.zero())
    n_params = len(names) if n_params is None else n_params
    compiled = [(pattern, rx, tuple(axes[pattern])) for pattern, rx in _patterns("axes", axes)]
    skip = _patterns("no_decay", no_decay)
    used: set[str] = set()
    out = []
    for k, (name, shape) in enumerate(zip(names, shapes)):
        what = "parameter" if k < n_params else "buffer"
        ax: LogicalAxes = (None,) * len(shape)
        for pattern, rx, pax in compiled:
            if rx.fullmatch(name):
                used.add(pattern)
                ax = pax
                break
        if len(ax) != len(shape):
            raise TorchTrainError(f"{what} {name} of shape {shape}: logical axes {ax} name {len(ax)} dimensions, it has {len(shape)}")
        for a in ax:
            if a is not None and a not in known:
                raise TorchTrainError(
                    f"{what} {name} of shape {shape}: logical axis {a!r} is not in the plan "
                    f"(TP rules: {sorted(plan.tp_rules) or 'none'}, ZeRO rules: {sorted(plan.zero()) or 'none'}); "
                    "write None for a dimension that is never split"
                )
        decay = k < n_params
        for pattern, rx in skip:
            if k < n_params and rx.fullmatch(name):
                used.add(f"no_decay:{pattern}")
                decay = False
        out.append(ParamInfo(name, tuple(shape), ax, decay))
    listed = ", ".join(names[:n_params])
    for pattern, _, _ in compiled:
        if pattern not in used:
            raise TorchTrainError(f"axes pattern {pattern!r} matches no parameter (parameters: {listed})")
    for pattern, _ in skip:
        if f"no_decay:{pattern}" not in used:
            raise TorchTrainError(f"no_decay pattern {pattern!r} matches no parameter (parameters: {listed})")
    return out


def plan_state(
    model: Any,
    axes: Mapping[str, LogicalAxes],
    plan: ShardingPlan,
    policy: ShardingPolicy,
    grid: Grid,
    no_decay: Sequence[str] = (),
) -> tuple[list[ParamInfo], list[ParamInfo]]:
    """(parameters, buffers) of `model` with their logical axes, every layout checked
    against the grid before anything is allocated or imported: the parameters' storage,
    compute and update layouts (`validate_layouts`), the buffers' compute layout."""
    named = [*model.named_parameters(), *model.named_buffers()]
    n_params = sum(1 for _ in model.named_parameters())
    infos = resolve_param_axes([n for n, _ in named], [tuple(t.shape) for _, t in named], axes, plan, no_decay, n_params)
    params, buffers = infos[:n_params], infos[n_params:]
    try:
        validate_layouts(params, plan, policy, grid)  # type: ignore[arg-type]
    except ShardingConfigError as e:
        raise TorchTrainError(str(e)) from None
    validate_state([StateArray(f"buffers/{b.path}", b.shape, _buffer_spec(b, plan, policy)) for b in buffers], grid)
    return params, buffers


def _buffer_spec(b: ParamInfo, plan: ShardingPlan, policy: ShardingPolicy) -> PartitionSpec:
    """A buffer is stored as it is used: in its compute layout (replicated unless the
    axes name it), never split for ZeRO (it has no gradient or optimizer state)."""
    return resolve(b.axes, plan, policy, b.path).compute  # type: ignore[arg-type]


# =========================================================================================
# The step module
# =========================================================================================


def _annotate_step(
    module: Any,
    exported: ExportedStep,
    grid: Grid,
    layouts: Sequence[ParamLayouts],
    buffer_specs: Sequence[PartitionSpec] = (),
    results: bool = True,
    data_dim: int = 0,
) -> None:
    """Shard annotations at the boundary of the imported `@train_step` (or forward or
    loss, with `results=False`: its results are left to propagation), in place."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType
    from xdsl.rewriter import InsertPoint, Rewriter

    from shardc.dialects.shard import ShardOp
    from shardc.training.axis import sharding_op

    f = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == exported.func_name)
    block = f.body.blocks[0]
    n_data = len(exported.input_names) + len(exported.target_names)
    point = InsertPoint.at_start(block)

    def chain(value: Any, specs: Sequence[tuple[PartitionSpec, bool]], at: InsertPoint) -> tuple[Any, InsertPoint]:
        for spec, for_users in specs:
            sharding = sharding_op(grid, spec)
            shard = ShardOp(value, sharding.result, annotate_for_users=for_users)
            Rewriter.insert_op([sharding, shard], at)
            at = InsertPoint.after(shard)
            value = shard.result
        return value, at

    for k, arg in enumerate(block.args):
        uses = list(arg.uses)
        if k < n_data:
            rank = len(arg.type.get_shape()) if isinstance(arg.type, TensorType) else 0
            spec = data_spec(rank, data_dim)
            specs = [(spec, False), (spec, True)]
        elif k < n_data + len(layouts):
            lay = layouts[k - n_data]
            specs = [(lay.storage, False), (lay.compute, True)]
        else:
            spec = buffer_specs[k - n_data - len(layouts)]
            specs = [(spec, False), (spec, True)]
        new, point = chain(arg, specs, point)
        for use in uses:
            use.operation.operands[use.index] = new
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    if not results:
        return
    for i, lay in enumerate(layouts):
        value = ret.operands[1 + i]
        new, _ = chain(value, [(lay.compute, False), (lay.grads, True)], InsertPoint.before(ret))
        ret.operands[1 + i] = new
    first = 1 + len(layouts)
    for j, name in enumerate(exported.updated_buffers):  # new running statistics: the buffer's layout
        spec = buffer_specs[exported.buffer_names.index(name)]
        new, _ = chain(ret.operands[first + j], [(spec, False), (spec, True)], InsertPoint.before(ret))
        ret.operands[first + j] = new


def _adamw_func(params: Sequence[ParamInfo], layouts: Sequence[ParamLayouts], grid: Grid, dtype: str, opt: AdamWConfig) -> Any:
    """`@adamw_step(P..., grads..., mu..., nu..., lr, step: i64, grad_scale) -> (P'..., mu'..., nu'...)`."""
    from xdsl.dialects.builtin import TensorType, i64

    from shardc.training.axis import annotate
    from shardc.training.gpt import float_type
    from shardc.training.ir_builder import FuncBuilder, Value
    from shardc.training.optimizer import StepScalars, adamw_update

    ft = float_type(dtype)
    pt = [(p.path, TensorType(ft, list(p.shape))) for p in params]
    args = [*pt, *((f"grad.{n}", t) for n, t in pt), *((f"mu.{n}", t) for n, t in pt), *((f"nu.{n}", t) for n, t in pt)]
    fb = FuncBuilder("adamw_step", [*args, ("lr", ft), ("step", i64), ("grad_scale", ft)], ft)
    n = len(params)
    lr, step, grad_scale = fb.args[4 * n :]
    scalars = StepScalars(lr, step, grad_scale)

    def reshard(v: Value, src: PartitionSpec, dst: PartitionSpec) -> Value:
        a = annotate(fb, v.ssa, grid, src)
        return Value(annotate(fb, a, grid, dst, for_users=True), fb)

    outs: list[list[Value]] = [[], [], []]
    for i, (p_info, lay) in enumerate(zip(params, layouts)):
        p, g, m, v = (fb.args[k * n + i] for k in range(4))
        p = reshard(p, lay.storage, lay.update)
        g = reshard(g, lay.grads, lay.update)
        m = reshard(m, lay.update, lay.update)
        v = reshard(v, lay.update, lay.update)
        p2, m2, v2 = adamw_update(fb, opt, scalars, p, g, m, v, p_info.decay)
        outs[0].append(reshard(p2, lay.update, lay.storage))
        outs[1].append(reshard(m2, lay.update, lay.update))
        outs[2].append(reshard(v2, lay.update, lay.update))
    fb.ret(*outs[0], *outs[1], *outs[2])
    return fb.func


@dataclass
class TorchStepProgram:
    """The compiled step of an imported module for one grid and policy: `@train_step`
    (the torch-mlir import, annotated), `@adamw_step` and, when an evaluation loss was
    imported, `@eval_loss` (the same boundary as the step, no gradients), lowered to mpi
    and compiled. `specs`/`layouts`/`grid`/`dtype` are what the sharded checkpoints read."""

    exported: ExportedStep
    params: list[ParamInfo]
    layouts: list[ParamLayouts]
    grid: Grid
    policy: ShardingPolicy
    plan: ShardingPlan
    opt: AdamWConfig
    ir: Any
    """The lowered module, or (loaded from the compile cache) how to parse it: see `module`."""
    compiled: Any
    shard_collectives: dict[str, Counter[str]]
    """Per function, the shard collectives before lowering, keyed with their grid axes."""
    collectives: dict[str, Counter[str]]
    """Per function, the communication ops of the lowered program (mpi.*)."""
    compile_seconds: float = 0.0
    buffers: list[ParamInfo] = field(default_factory=list)
    buffer_specs: list[PartitionSpec] = field(default_factory=list)
    has_eval: bool = False
    stages: list[Any] = field(default_factory=list)
    """The pipeline's stages (`pipeline.Stage`), texts only when built with keep_text."""
    cached: str = "compiled"
    """Where the program came from: "compiled", "cache" (this rank's disk) or "broadcast"."""
    data_dim: int = 0
    """The dimension of the inputs and targets the replicas split (`shardc.training.module_run.data_spec`)."""

    @property
    def module(self) -> Any:
        """The lowered module (parsed from the cache entry on first use after a hit)."""
        if callable(self.ir):
            self.ir = self.ir()
        return self.ir

    def stage_texts(self) -> list[tuple[str, str]]:
        """(file name, text) per stage, as the built-in step's (`StepProgram.stage_texts`)."""
        from shardc.training.spmd import StepProgram

        return StepProgram.stage_texts(self)  # type: ignore[arg-type]

    @property
    def specs(self) -> list[ParamInfo]:
        return self.params

    @property
    def state_buffers(self) -> list[tuple[str, tuple[int, ...], PartitionSpec, str]]:
        """(FQN, shape, layout, dtype) of the buffers the step updates: state carried
        from step to step and checkpointed (`checkpoint.state_arrays`)."""
        where = {b.path: k for k, b in enumerate(self.buffers)}
        return [
            (name, self.buffers[where[name]].shape, self.buffer_specs[where[name]], dtype)
            for name, dtype in zip(self.exported.updated_buffers, self.exported.updated_dtypes)
        ]

    @property
    def dtype(self) -> str:
        return self.exported.dtype

    @staticmethod
    def build(
        exported: ExportedStep,
        axes: Mapping[str, LogicalAxes],
        plan: ShardingPlan,
        policy: ShardingPolicy,
        grid: Grid,
        opt: AdamWConfig = TORCH_ADAMW,
        *,
        no_decay: Sequence[str] = (),
        eval_step: ExportedStep | None = None,
        keep_text: bool = False,
        world: Any = None,
        data_dim: int = 0,
        precision: str = "f32",
        grad_reduce: str = "f32",
    ) -> TorchStepProgram:
        """Resolve and check every layout (before anything is allocated), annotate the
        step (and `eval_step`, the `grads=False` import of the same loss), add AdamW and
        compile through `pipeline.PIPELINE`; `keep_text` keeps each stage's text
        (`stage_texts`, for --emit-ir) and so compiles afresh. The whole compile goes
        through the compile cache, keyed by everything the program is made of (the
        exported texts, axes, plan, policy, grid, AdamW, no_decay): a hit runs no pass.
        Under MPI pass `world` (the communicator): rank 0 compiles or loads, the other
        ranks take its result; where rank 0 failed they compile too, so each raises the
        error it raised without the cache."""
        from shardc.runtime.codegen.cache import PeerFailed, compile_cached, make_key
        from shardc.training.pipeline import Stage, count_collectives, step_pipeline

        t0 = time.perf_counter()
        infos = resolve_param_axes(
            [*exported.param_names, *exported.buffer_names], [*exported.param_shapes, *exported.buffer_shapes],
            axes, plan, no_decay, len(exported.param_names),
        )
        params, buffers = infos[: len(exported.param_names)], infos[len(exported.param_names) :]
        try:
            validate_layouts(params, plan, policy, grid)  # type: ignore[arg-type]
        except ShardingConfigError as e:
            raise TorchTrainError(str(e)) from None
        layouts = [resolve(p.axes, plan, policy, p.path) for p in params]  # type: ignore[arg-type]
        buffer_specs = [_buffer_spec(b, plan, policy) for b in buffers]
        validate_state([StateArray(f"buffers/{b.path}", b.shape, s) for b, s in zip(buffers, buffer_specs)], grid)
        key = make_key(
            "torch-step", exported=asdict(exported), eval_step=None if eval_step is None else asdict(eval_step),
            axes=sorted((k, list(v)) for k, v in axes.items()), plan=plan, policy=policy, grid=grid, opt=opt,
            no_decay=list(no_decay), pipeline=step_pipeline(precision, grad_reduce), fuse=True, data_dim=data_dim,
        )
        built: list[Stage] = []

        def build() -> tuple[Any, dict[str, Any]]:
            module, shard_level = _step_module(exported, eval_step, grid, params, layouts, buffer_specs, opt, built, keep_text, data_dim, step_pipeline(precision, grad_reduce))
            counts = lambda table: {f: dict(c) for f, c in table.items()}  # noqa: E731
            return module, {"stages": [[st.name, st.seconds] for st in built], "shard_collectives": counts(shard_level), "collectives": counts(count_collectives(module))}

        try:
            got = compile_cached(key, build, "torch_train_step", world=world, read=not keep_text)
            ir, compiled, meta, source = got.module, got.compiled, got.meta, got.source
        except PeerFailed:  # rank 0's error: raise it here too
            from shardc.runtime.codegen.compile import compile_module

            built.clear()
            ir, meta = build()
            compiled, source = compile_module(ir, "torch_train_step"), "compiled"
        stages = built or [Stage(name, seconds) for name, seconds in meta["stages"]]
        prog = TorchStepProgram(
            exported, params, layouts, grid, policy, plan, opt, ir, compiled,
            _counters(meta["shard_collectives"]), _counters(meta["collectives"]),
        )
        prog.buffers, prog.buffer_specs, prog.has_eval, prog.stages = buffers, buffer_specs, eval_step is not None, stages
        prog.compile_seconds = time.perf_counter() - t0
        prog.cached = source
        prog.data_dim = data_dim
        return prog

    def call(self, name: str, *args: object) -> Any:
        return self.compiled.call(name, *args)


def _step_module(
    exported: ExportedStep, eval_step: ExportedStep | None, grid: Grid, params: Sequence[ParamInfo], layouts: Sequence[ParamLayouts],
    buffer_specs: Sequence[PartitionSpec], opt: AdamWConfig, stages: list[Any], keep_text: bool, data_dim: int = 0, passes: Sequence[str] | None = None,
) -> tuple[Any, dict[str, Counter[str]]]:
    """The annotated step module with `@adamw_step`, run through `pipeline.PIPELINE` (its
    stages appended to `stages`), and its collectives at the shard level (before
    lowering)."""
    from shardc.training.pipeline import PIPELINE, count_collectives, run_pipeline

    passes = tuple(PIPELINE if passes is None else passes)  # step_pipeline(precision)
    module = _parse(exported)
    _check_data(module, exported, grid, data_dim)
    _annotate_step(module, exported, grid, layouts, buffer_specs, data_dim=data_dim)
    if eval_step is not None:
        loss_module = _parse(eval_step)
        _check_data(loss_module, eval_step, grid, data_dim)
        _annotate_step(loss_module, eval_step, grid, layouts, buffer_specs, results=False, data_dim=data_dim)
        for op in list(loss_module.body.block.ops):
            op.detach()
            module.body.block.add_op(op)
    first = module.body.block.first_op
    module.body.block.insert_op_before(grid.grid_op(), first)
    module.body.block.add_op(_adamw_func(params, layouts, grid, exported.dtype, opt))
    lower_at = passes.index("convert-shard-to-mpi")
    stages.extend(run_pipeline(module, passes[:lower_at], keep_text))
    shard_level = count_collectives(module, by_axes=True)
    stages.extend(run_pipeline(module, passes[lower_at:], keep_text)[1:])
    return module, shard_level


def _counters(table: Mapping[str, Mapping[str, int]]) -> dict[str, Counter[str]]:
    return {fn: Counter(counts) for fn, counts in table.items()}


def _parse(exported: ExportedStep) -> Any:
    """torch-mlir's text as an xDSL module, with the rewrites sharding needs; an op shardc
    does not know is one line naming it and where torch-mlir emitted it."""
    from xdsl.utils.exceptions import ParseError

    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.passes import all_pipelines

    ctx = make_context()
    try:
        module = LocatingParser(ctx, exported.text, "<torch-mlir>").parse_module()
    except ParseError as e:
        where = str(e).splitlines()[0] if str(e) else "<torch-mlir>"
        message = e.args[1] if len(e.args) > 1 else str(e)
        raise TorchTrainError(f"shardc cannot read torch-mlir's import of @{exported.func_name}: {where}: error: {message}") from None
    all_pipelines()["torch-cleanup-pipeline"]()().apply(ctx, module)
    return module


def _check_data(module: Any, exported: ExportedStep, grid: Grid, data_dim: int = 0) -> None:
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType

    f = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == exported.func_name)
    names = [*exported.input_names, *exported.target_names]
    state = []
    for name, arg in zip(names, f.body.blocks[0].args):
        t = arg.type
        shape = tuple(t.get_shape()) if isinstance(t, TensorType) else ()
        state.append(StateArray(f"data/{name}", shape, data_spec(len(shape), data_dim)))
    validate_state(state, grid)


# =========================================================================================
# Training
# =========================================================================================


@dataclass
class TorchTask:
    """What a `--torch-model FILE.py:FACTORY` factory returns: the module, its loss
    (`loss_fn(model(*inputs), *targets)`), its parameters' logical axes by FQN pattern and
    the plan. `kind="lm"`: batches are (tokens, next tokens), int64 [batch, block_size],
    and the factory takes `vocab_size` and `block_size` keywords."""

    model: Any
    loss_fn: Callable[..., Any]
    axes: Mapping[str, LogicalAxes] = field(default_factory=dict)
    plan: ShardingPlan = field(default_factory=ShardingPlan)
    kind: str = "lm"
    n_inputs: int = 1
    no_decay: Sequence[str] = ()
    """FQN patterns of parameters trained without weight decay (biases, LayerNorm)."""
    generate: Callable[..., Sequence[int]] | None = None
    """Sampling hook for `--sample`: `generate(model, prompt_ids, n_tokens, *,
    temperature, top_k, seed, n_valid) -> ids`, run on the trained module (ids at or
    above `n_valid` are vocabulary padding, never to be drawn). None: no sampling."""
    make_batch: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, ...]] | None = None
    """The step's (inputs..., targets...) from the trainer's (tokens, next tokens) int64
    batch, e.g. a masked LM's masked tokens, labels and weights. None: the batch as is."""


def load_task(spec: str, **kwargs: Any) -> TorchTask:
    """`FILE.py:FACTORY` -> the factory's TorchTask (`kwargs` passed to the factory)."""
    import importlib.util
    from pathlib import Path

    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise TorchTrainError(f"--torch-model {spec!r}: expected FILE.py:FACTORY")
    if not Path(path).is_file():
        raise TorchTrainError(f"--torch-model {spec!r}: no file {path}")
    mod_spec = importlib.util.spec_from_file_location(f"_shardc_torch_model_{Path(path).stem}", path)
    if mod_spec is None or mod_spec.loader is None:  # a name Python does not import (no .py)
        raise TorchTrainError(f"--torch-model {spec!r}: {path} is not a Python source file (FILE.py)")
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[mod_spec.name] = module  # dataclasses in the file look their module up
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file: one line naming it
        raise TorchTrainError(f"--torch-model {spec!r}: importing {path} failed: {type(e).__name__}: {e}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise TorchTrainError(f"--torch-model {spec!r}: {path} has no function {name}")
    try:
        task = factory(**kwargs)
    except Exception as e:  # noqa: BLE001 - the user's factory: one line naming it
        raise TorchTrainError(f"--torch-model {spec!r}: {name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) failed: {type(e).__name__}: {e}") from None
    if not isinstance(task, TorchTask):
        raise TorchTrainError(f"--torch-model {spec!r}: {name}() returned {type(task).__name__}, not a TorchTask")
    return task


@dataclass(frozen=True)
class TorchModelInfo:
    """What a checkpoint records of an imported module (the manifest's `model`): a resume
    must have the same class, the same parameter count and FQNs with the same shapes."""

    module: str
    parameters: int
    signature: str

    @staticmethod
    def of(model: Any) -> TorchModelInfo:
        import hashlib

        named = list(model.named_parameters())
        text = ";".join(f"{n}:{'x'.join(map(str, p.shape))}" for n, p in named)
        return TorchModelInfo(type(model).__name__, sum(int(p.numel()) for _, p in named), hashlib.sha256(text.encode()).hexdigest()[:16])


class TorchTrainResult(ModuleTrainResult):
    """`ModuleTrainResult` (the per-step log, the final global parameters by FQN, the
    compiled program, the grid, the per-rank memory, the updated buffers) with the
    trained state as the module's `state_dict`."""

    def state_dict(self, model: Any) -> dict[str, Any]:
        """`model.state_dict()`'s keys (tied aliases included) with the trained values:
        parameters, the buffers the step updated, the other persistent buffers as the
        module has them."""
        torch, _ = require_torch()
        canonical = {id(p): n for n, p in model.named_parameters()}
        out = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            out[name] = torch.from_numpy(np.ascontiguousarray(self.params[canonical[id(p)]])).to(p.dtype)
        persistent = model.state_dict().keys()  # non-persistent buffers (rotary inv_freq) are not state
        canonical_buffers = {id(b): n for n, b in model.named_buffers()}
        for name, b in model.named_buffers(remove_duplicate=False):
            trained = canonical_buffers[id(b)]
            if trained in self.buffers and name in persistent:
                out[name] = torch.from_numpy(np.array(self.buffers[trained])).to(b.dtype)
            elif name in persistent:
                out[name] = b.detach().clone()
        return out

    def state_arrays(self, model: Any) -> dict[str, np.ndarray]:
        """`state_dict` as numpy arrays (what model.safetensors holds)."""
        return {k: v.detach().cpu().numpy() for k, v in self.state_dict(model).items()}


class _Batches:
    """A list of global microbatches read as a stream whose position a checkpoint keeps
    (`state`/`restore`, as `checkpoint.BatchStream` for the CLI's sampled batches)."""

    def __init__(self, items: Sequence[Sequence[Any]], position: int = 0):
        self.items, self.position = items, position

    def __iter__(self) -> _Batches:
        return self

    def __next__(self) -> Sequence[Any]:
        if self.position >= len(self.items):
            raise TorchTrainError(f"the {len(self.items)} batches given are used up")
        self.position += 1
        return self.items[self.position - 1]

    def state(self) -> dict[str, Any]:
        return {"position": self.position}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.position = int(state["position"])

    def fork(self) -> _Batches:
        return _Batches(self.items, self.position)


LearningRate = float | Callable[[int], float] | TrainConfig


@dataclass
class TorchTraining(ModuleTraining):
    """A training job prepared by `TorchTraining.prepare` (layouts checked, step
    imported and compiled, the checkpoint to resume from opened and verified); `run()`
    trains (`shardc.training.module_run.ModuleTraining`). `train_module` is the two in
    one; the CLI prints its header in between."""

    result_type = TorchTrainResult

    @staticmethod
    def prepare(
        model: Any,
        batches: Sequence[Sequence[Any]] | Any,
        loss_fn: Callable[..., Any],
        *,
        axes: Mapping[str, LogicalAxes] | None = None,
        plan: ShardingPlan | None = None,
        policy: ShardingPolicy | None = None,
        world: int | None = 1,
        n_inputs: int = 1,
        accum: int = 1,
        steps: int | None = None,
        lr: LearningRate = 1e-3,
        opt: AdamWConfig = TORCH_ADAMW,
        no_decay: Sequence[str] = (),
        eval_batches: Sequence[Sequence[Any]] | None = None,
        eval_every: int = 0,
        checkpoint: CheckpointOptions | None = None,
        resume: Checkpoint | str | Path | None = None,
        keep_text: bool = False,
        data_dim: int = 0,
        precision: str = "f32",
        grad_reduce: str = "f32",
    ) -> TorchTraining:
        """See `train_module`; `keep_text`: the program keeps each stage's text;
        `precision`: "bf16" for bf16 products, `grad_reduce` "bf16" for gradients
        reduced in bf16 (`shardc.training.pipeline.step_pipeline`)."""
        plan = plan or ShardingPlan()
        policy = policy or ShardingPolicy(tp=1, zero=False)
        if accum < 1:
            raise TorchTrainError(f"accum must be positive, got {accum}")
        if eval_every < 0:
            raise TorchTrainError(f"eval_every must be non-negative, got {eval_every}")
        if isinstance(batches, Sequence):
            if not batches:
                raise TorchTrainError("no batches to train on")
            steps = len(batches) // accum if steps is None else steps
            if steps * accum > len(batches):
                raise TorchTrainError(f"{steps} steps of {accum} microbatches need {steps * accum} batches, {len(batches)} given")
            stream: Any = _Batches(batches)
        else:
            if steps is None:
                raise TorchTrainError("steps must be given when the batches are a stream")
            stream = batches
        if steps < 1:
            raise TorchTrainError(f"steps must be positive, got {steps}")
        if callable(lr) and not isinstance(lr, TrainConfig) and (checkpoint is not None or resume is not None):
            raise TorchTrainError("checkpoints record the learning-rate schedule: pass lr as a number or a TrainConfig, not a function")
        mpi = world is None
        try:
            if mpi:
                from mpi4py import MPI

                from shardc.training.trainer import ranks_per_host

                grid = make_grid(MPI.COMM_WORLD.Get_size(), policy.tp, ranks_per_host(MPI.COMM_WORLD))
            else:
                grid = make_grid(world, policy.tp)
        except ValueError as e:
            raise TorchTrainError(str(e)) from None
        plan_state(model, axes or {}, plan, policy, grid, no_decay)  # before anything is imported or allocated
        torch, _ = require_torch()
        for fqn, param in model.named_parameters():  # the masters are float32/64: bf16 runs by the policy or autocast
            if param.dtype in (torch.bfloat16, torch.float16):
                raise TorchTrainError(f"parameter {fqn} is {param.dtype}: shardc trains float32 parameters; keep them float32 and use --precision bf16 (precision='bf16') or torch.autocast in the forward")
        if hasattr(stream, "state"):
            at = stream.state()
            batch = list(next(stream))
            if any(getattr(x, "dtype", None) in (torch.bfloat16, torch.float16) for x in batch):
                raise TorchTrainError("a batch tensor is bfloat16 or float16: pass float32 inputs (the forward or torch.autocast may cast them)")
            first = [as_numpy(x) for x in batch]
            stream.restore(at)
        else:
            raise TorchTrainError("the batches must be a sequence or a stream with state()/restore()")
        dtypes = [x.dtype for x in first]
        example = [torch.from_numpy(np.ascontiguousarray(x)) for x in first]
        exported = export_train_step(model, example[:n_inputs], example[n_inputs:], loss_fn)
        evals = None
        eval_step = None
        if eval_batches:
            evals = [[np.asarray(as_numpy(x), dtype=d) for x, d in zip(b, dtypes)] for b in eval_batches]
            ex = [torch.from_numpy(np.ascontiguousarray(x)) for x in evals[0]]
            was_training = model.training  # held out: the module in eval mode (BatchNorm's running statistics)
            model.eval()
            try:
                eval_step = export_train_step(model, ex[:n_inputs], ex[n_inputs:], loss_fn, func_name="eval_loss", grads=False)
            finally:
                model.train(was_training)
        comm = None
        if mpi:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
        prog = TorchStepProgram.build(
            exported, axes or {}, plan, policy, grid, opt, no_decay=no_decay, eval_step=eval_step, keep_text=keep_text,
            world=comm, data_dim=data_dim, precision=precision, grad_reduce=grad_reduce,
        )
        sched = lr if isinstance(lr, TrainConfig) else TrainConfig(lr=float(lr), min_lr=float(lr), warmup_steps=0) if not callable(lr) else None
        lr_at = sched.lr_at if sched is not None else lr  # type: ignore[assignment]
        micro = int(first[0].shape[0]) if first and np.ndim(first[0]) else 1
        cfg = TrainingConfig(
            TorchModelInfo.of(model), max(1, micro // grid.batch) if data_dim == 0 else micro, accum, steps,  # type: ignore[arg-type]
            sched.lr if sched else 0.0, sched.min_lr if sched else 0.0, sched.warmup_steps if sched else 0,
            sched.seed if sched else 0, prog.dtype, opt, policy, plan, eval_every, len(evals or ()),
        )
        ck = None
        if resume is not None:
            ck = resume if isinstance(resume, Checkpoint) else _open_resume(resume, cfg, checkpoint, mpi)
        checkpoint = run_options(checkpoint, ck, comm.bcast if mpi and comm is not None else None)
        tokens = int(first[0].size) if np.issubdtype(first[0].dtype, np.integer) else micro
        init = {n: as_numpy(p) for n, p in model.named_parameters()}
        bufs = {n: as_numpy(b) for n, b in model.named_buffers()}
        return TorchTraining(prog, cfg, grid, stream, dtypes, init, bufs, lr_at, evals, checkpoint, ck, mpi, tokens * accum)


def _open_resume(where: str | Path, cfg: TrainingConfig, opts: CheckpointOptions | None, mpi: bool) -> Checkpoint:
    from shardc.training.checkpoint import CheckpointError, open_for_resume

    meta = opts.meta if opts else None
    try:
        if not mpi:
            return open_for_resume(where, cfg, meta)
        from mpi4py import MPI

        w = MPI.COMM_WORLD
        return open_for_resume(where, cfg, meta, w.Get_rank(), w.Get_size(), w.allgather)
    except CheckpointError as e:
        raise TorchTrainError(str(e)) from None


def train_module(
    model: Any,
    batches: Sequence[Sequence[Any]] | Any,
    loss_fn: Callable[..., Any],
    *,
    axes: Mapping[str, LogicalAxes] | None = None,
    plan: ShardingPlan | None = None,
    policy: ShardingPolicy | None = None,
    world: int | None = 1,
    n_inputs: int = 1,
    accum: int = 1,
    steps: int | None = None,
    lr: LearningRate = 1e-3,
    opt: AdamWConfig = TORCH_ADAMW,
    no_decay: Sequence[str] = (),
    eval_batches: Sequence[Sequence[Any]] | None = None,
    eval_every: int = 0,
    on_step: Callable[[StepLog], None] | None = None,
    checkpoint: CheckpointOptions | None = None,
    resume: Checkpoint | str | Path | None = None,
    data_dim: int = 0,
) -> TorchTrainResult:
    """Train `model` with AdamW on `batches` (global microbatches: tuples whose first
    `n_inputs` entries go to the model and the rest to `loss_fn` after its output; a
    sequence, or a stream with `state()`/`restore()` such as `checkpoint.BatchStream`),
    `accum` microbatches per step, `steps` steps (default: as many as the batches give).
    `lr`: a number, a function of the step (from 1), or a `TrainConfig` (warmup + cosine,
    as shardc-train). `no_decay`: FQN patterns trained without weight decay (torch's
    second parameter group with weight_decay=0). `eval_batches`: held-out global
    microbatches whose mean loss is logged every `eval_every` steps and after the last.
    `checkpoint`: sharded checkpoints as the built-in trainer saves them (keyed by FQN);
    `resume`: a checkpoint, or a directory of them, to continue from on any grid.
    `world` simulated ranks, or None for the MPI world (call on every rank of an
    mpiexec job). `data_dim`: the dimension of every input and target the replicas
    split, 0 (the batch: data parallel) or another, say an image's height (2 for NCHW:
    each replica holds a band of rows of every image, convolutions exchange halos).
    Bad input raises TorchTrainError / ShardingValidationError before
    anything is allocated. The model itself is not changed: load
    `result.state_dict(model)` into it."""
    job = TorchTraining.prepare(
        model, batches, loss_fn, axes=axes, plan=plan, policy=policy, world=world, n_inputs=n_inputs,
        accum=accum, steps=steps, lr=lr, opt=opt, no_decay=no_decay, eval_batches=eval_batches,
        eval_every=eval_every, checkpoint=checkpoint, resume=resume, data_dim=data_dim,
    )
    return job.run(on_step)


# =========================================================================================
# Inference
# =========================================================================================


def sharded_forward(
    model: Any,
    inputs: Sequence[Any],
    *,
    axes: Mapping[str, LogicalAxes] | None = None,
    plan: ShardingPlan | None = None,
    policy: ShardingPolicy | None = None,
    world: int = 1,
    func_name: str = "forward",
    exported: Any = None,
) -> tuple[str, list[str]]:
    """The forward of `model` as annotated MLIR text for `world` ranks under the training
    layouts (parameters arrive in storage layout and are used in compute layout, inputs
    split over `batch`), and its argument names (inputs, then parameters and buffers by
    FQN). Run it with `shardc-run --simulate N` / `mpiexec shardc-run` (with
    `--pipeline 'shard-to-mpi-pipeline{traversal=forward-backward}'`, as training and
    `forward_module` do: upstream's default order, backward first, reads the
    replicated weights before the batch split of the inputs and replicates the
    activations), or `forward_module`. `exported`: `torch.export_module(model, inputs)`'s result, reused
    (one import for several grids and plans; its function name is kept)."""
    from shardc.frontends.torch import export_module
    from shardc.ir.printer import module_to_string

    plan = plan or ShardingPlan()
    policy = policy or ShardingPolicy(tp=1, zero=False)
    try:
        grid = make_grid(world, policy.tp)
    except ValueError as e:
        raise TorchTrainError(str(e)) from None
    params, buffers = plan_state(model, axes or {}, plan, policy, grid)  # before the import
    if exported is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exported = export_module(model, tuple(inputs), func_name=func_name)
        except Exception as e:  # noqa: BLE001 - torch-mlir's refusal, as one line
            raise TorchTrainError(f"torch-mlir cannot import the forward of {type(model).__name__}: {_reason([], e)}") from None
    func_name = exported.func_name
    refuse_random(exported.text, model, "forward")
    layouts = [resolve(p.axes, plan, policy, p.path) for p in params]  # type: ignore[arg-type]
    module = _parse(exported)
    n = len(params)
    step = ExportedStep(
        exported.text, func_name, exported.input_names, [], exported.param_names[:n], [p.shape for p in params], "",
        exported.param_names[n:], [b.shape for b in buffers], grads=False,
    )
    _check_data(module, step, grid)
    _annotate_step(module, step, grid, layouts, [_buffer_spec(b, plan, policy) for b in buffers], results=False)
    module.body.block.insert_op_before(grid.grid_op(), module.body.block.first_op)
    return module_to_string(module), exported.arg_names


def forward_module(
    model: Any,
    inputs: Sequence[Any],
    *,
    params: Mapping[str, np.ndarray] | None = None,
    world: int | None = 1,
    pipeline: str | None = "shard-to-mpi-pipeline{traversal=forward-backward}",
    **layout: Any,
) -> list[np.ndarray]:
    """The global outputs of `model(*inputs)` (its tensors: `torch.tensor_results`, a
    transformers model's `logits`) computed sharded on `world` simulated ranks
    (None: the MPI world) by the same plan and policy as training (`axes`, `plan`,
    `policy`, `exported` keywords: see `sharded_forward`); `params` (a
    `TorchTrainResult.params`) replaces the module's. Propagation runs forward first, as
    in training (`shardc.training.pipeline.PIPELINE`): the batch split of the inputs reaches
    every activation before the replicated weights are propagated back."""
    size = world if world is not None else mpi_world_size()
    text, names = sharded_forward(model, inputs, world=size, **layout)
    state = {n: as_numpy(p) for n, p in [*model.named_parameters(), *model.named_buffers()]}
    state.update(params or {})
    values = [*(as_numpy(x) for x in inputs), *(state[n] for n in names[len(inputs) :])]
    from shardc.launch import run_program

    return run_program(text, values, ranks=world, pipeline=pipeline)


__all__ = [
    "TORCH_ADAMW",
    "ExportedStep",
    "ParamInfo",
    "TorchStepProgram",
    "TorchTrainError",
    "TorchTask",
    "TorchTrainResult",
    "export_train_step",
    "forward_module",
    "load_task",
    "resolve_param_axes",
    "sharded_forward",
    "train_module",
]
