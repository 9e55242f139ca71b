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
*targets)` over the parameters, traced with `make_fx` (functionalized, torch-mlir's
decomposition table, SDPA in its math form: torch-mlir has no CPU backward for the
fused kernel) and imported by `torch_mlir.fx.stateless_fx_import` as linalg-on-tensors:

    @train_step(inputs..., targets..., params(FQN order)...) -> (loss, grads(FQN order)...)

Parameters are arguments, never baked constants; the gradients of `nn.Embedding` and of
cross-entropy come out as `tm_tensor.scatter` (shardc's TMTensor overlay runs and
shards it).

Layouts (`ParamInfo`, `resolve_param_axes`): the user names each parameter's logical axes
by FQN pattern (`re.fullmatch`); unnamed parameters are replicated. The shared
`ShardingPlan`/`ShardingPolicy` turn them into storage / compute / update layouts
(`shardc.training.axis.resolve`), checked against the grid before anything is allocated.

The step module (`TorchStepProgram`) is the imported `@train_step` with shard
annotations at its boundary (parameters arrive in storage layout and are used in compute
layout, the batch is split over `batch`, gradients leave in the update layout) plus
`@adamw_step` built in IR (`shardc.training.optimizer`, torch.optim.AdamW's update, decay
on every parameter as torch applies it); the compiler derives every collective
(`shardc.training.spmd.PIPELINE`). Gradient accumulation adds the gradient pieces each
rank receives, in their update layout, so it needs no communication of its own.
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shardc.frontends.torch import require_torch
from shardc.frontends.torch_rewrite import split_shared_fills, uncollapse_batch_matmuls
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
from shardc.training.mesh import BATCH, Grid, make_grid
from shardc.training.optimizer import AdamWConfig

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
    """torch-mlir's output for one training step, and what its arguments are."""

    text: str
    func_name: str
    input_names: list[str]
    target_names: list[str]
    param_names: list[str]
    param_shapes: list[tuple[int, ...]]
    dtype: str

    @property
    def arg_names(self) -> list[str]:
        return [*self.input_names, *self.target_names, *self.param_names]

    @property
    def result_names(self) -> list[str]:
        return ["loss", *(f"grad.{n}" for n in self.param_names)]


def export_train_step(
    model: Any,
    inputs: Sequence[Any],
    targets: Sequence[Any],
    loss_fn: Callable[..., Any],
    *,
    func_name: str = "train_step",
) -> ExportedStep:
    """Import the loss and the parameter gradients of `loss_fn(model(*inputs), *targets)`
    as linalg-on-tensors (see the module docstring for the signature)."""
    torch, fx = require_torch()
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    if any(True for _ in model.named_buffers()):
        names = ", ".join(n for n, _ in model.named_buffers())
        raise TorchTrainError(f"modules with buffers are not supported yet (buffers: {names})")
    inputs, targets = tuple(inputs), tuple(targets)
    params = {k: v.detach() for k, v in model.named_parameters()}
    keys = list(params)
    n_in, n_tg = len(inputs), len(targets)

    def loss_of(p: dict, ins: tuple, tgs: tuple) -> Any:
        out = torch.func.functional_call(model, p, ins)
        return loss_fn(out, *tgs)

    def step(*args: Any) -> tuple:
        ins, tgs, flat = args[:n_in], args[n_in : n_in + n_tg], args[n_in + n_tg :]
        grads, loss = torch.func.grad_and_value(loss_of)(dict(zip(keys, flat)), ins, tgs)
        return (loss, *(grads[k] for k in keys))

    example = (*inputs, *targets, *params.values())
    diags: list[str] = []
    try:
        with sdpa_kernel([SDPBackend.MATH]), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gm = make_fx(torch.func.functionalize(step), decomposition_table=get_decomposition_table())(*example)
            module = fx.stateless_fx_import(gm, output_type="linalg-on-tensors", model_name=func_name, fx_importer=_importer(diags))
    except Exception as e:  # torch or torch-mlir refused the module: say which op
        raise TorchTrainError(f"torch-mlir cannot import the training step of {type(model).__name__}: {_reason(diags, e)}") from None
    dtypes = {str(p.dtype).removeprefix("torch.") for p in params.values()}
    dtype = dtypes.pop() if len(dtypes) == 1 else "float32"
    return ExportedStep(
        str(module), func_name,
        [f"input{i}" for i in range(n_in)], [f"target{i}" for i in range(n_tg)],
        keys, [tuple(p.shape) for p in params.values()], dtype,
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
    """A parameter as the plan sees it (what `axis.abstract_state` reads)."""

    path: str
    shape: tuple[int, ...]
    axes: LogicalAxes
    decay: bool = True


def resolve_param_axes(
    names: Sequence[str],
    shapes: Sequence[tuple[int, ...]],
    axes: Mapping[str, LogicalAxes],
    plan: ShardingPlan,
) -> list[ParamInfo]:
    """Each parameter's logical axes: the first pattern that fully matches its FQN, else
    all None (replicated). Every pattern must match a parameter, every named axis must be
    one the plan has a rule for, and the axes must have the parameter's rank."""
    known = set(plan.tp_rules) | set(plan.zero())
    compiled = []
    for pattern, ax in axes.items():
        try:
            compiled.append((pattern, re.compile(pattern), tuple(ax)))
        except re.error as e:
            raise TorchTrainError(f"axes pattern {pattern!r} is not a regular expression: {e}") from None
    used: set[str] = set()
    out = []
    for name, shape in zip(names, shapes):
        ax: LogicalAxes = (None,) * len(shape)
        for pattern, rx, pax in compiled:
            if rx.fullmatch(name):
                used.add(pattern)
                ax = pax
                break
        if len(ax) != len(shape):
            raise TorchTrainError(f"parameter {name} of shape {shape}: logical axes {ax} name {len(ax)} dimensions, it has {len(shape)}")
        for a in ax:
            if a is not None and a not in known:
                raise TorchTrainError(
                    f"parameter {name} of shape {shape}: logical axis {a!r} is not in the plan "
                    f"(TP rules: {sorted(plan.tp_rules) or 'none'}, ZeRO rules: {sorted(plan.zero()) or 'none'}); "
                    "write None for a dimension that is never split"
                )
        out.append(ParamInfo(name, tuple(shape), ax))
    for pattern, _, _ in compiled:
        if pattern not in used:
            raise TorchTrainError(f"axes pattern {pattern!r} matches no parameter (parameters: {', '.join(names)})")
    return out


# =========================================================================================
# The step module
# =========================================================================================


def _data_spec(rank: int) -> PartitionSpec:
    return PartitionSpec(BATCH, *([None] * (rank - 1))) if rank else PartitionSpec()


def _annotate_step(module: Any, exported: ExportedStep, grid: Grid, layouts: Sequence[ParamLayouts], results: bool = True) -> None:
    """Shard annotations at the boundary of the imported `@train_step` (or forward, with
    `results=False`: its results are left to propagation), in place."""
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
            spec = _data_spec(rank)
            specs = [(spec, False), (spec, True)]
        else:
            lay = layouts[k - n_data]
            specs = [(lay.storage, False), (lay.compute, True)]
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
    (the torch-mlir import, annotated) and `@adamw_step`, lowered to mpi and compiled."""

    exported: ExportedStep
    params: list[ParamInfo]
    layouts: list[ParamLayouts]
    grid: Grid
    policy: ShardingPolicy
    plan: ShardingPlan
    opt: AdamWConfig
    module: Any
    compiled: Any
    shard_collectives: dict[str, Counter[str]]
    """Per function, the shard collectives before lowering, keyed with their grid axes."""
    collectives: dict[str, Counter[str]]
    """Per function, the communication ops of the lowered program (mpi.*)."""
    compile_seconds: float = 0.0

    @staticmethod
    def build(
        exported: ExportedStep,
        axes: Mapping[str, LogicalAxes],
        plan: ShardingPlan,
        policy: ShardingPolicy,
        grid: Grid,
        opt: AdamWConfig = TORCH_ADAMW,
    ) -> TorchStepProgram:
        """Resolve and check every layout (before anything is allocated), annotate the
        step, add AdamW and compile through `spmd.PIPELINE`."""
        from shardc.context import make_context
        from shardc.ir.locations import LocatingParser
        from shardc.runtime import compile_module
        from shardc.training.spmd import PIPELINE, count_collectives, run_pipeline

        t0 = time.perf_counter()
        params = resolve_param_axes(exported.param_names, exported.param_shapes, axes, plan)
        try:
            validate_layouts(params, plan, policy, grid)  # type: ignore[arg-type]
        except ShardingConfigError as e:
            raise TorchTrainError(str(e)) from None
        layouts = [resolve(p.axes, plan, policy) for p in params]  # type: ignore[arg-type]
        module = LocatingParser(make_context(), exported.text, "<torch-mlir>").parse_module()
        uncollapse_batch_matmuls(module)
        split_shared_fills(module)
        _check_data(module, exported, grid)
        _annotate_step(module, exported, grid, layouts)
        first = module.body.block.first_op
        module.body.block.insert_op_before(grid.grid_op(), first)
        module.body.block.add_op(_adamw_func(params, layouts, grid, exported.dtype, opt))
        lower_at = PIPELINE.index("convert-shard-to-mpi")
        run_pipeline(module, PIPELINE[:lower_at])
        shard_level = count_collectives(module, by_axes=True)
        run_pipeline(module, PIPELINE[lower_at:])
        compiled = compile_module(module, "torch_train_step")
        prog = TorchStepProgram(exported, params, layouts, grid, policy, plan, opt, module, compiled, shard_level, count_collectives(module))
        prog.compile_seconds = time.perf_counter() - t0
        return prog

    def call(self, name: str, *args: object) -> Any:
        return self.compiled.call(name, *args)


def _check_data(module: Any, exported: ExportedStep, grid: Grid) -> None:
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType

    f = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == exported.func_name)
    names = [*exported.input_names, *exported.target_names]
    state = []
    for name, arg in zip(names, f.body.blocks[0].args):
        t = arg.type
        shape = tuple(t.get_shape()) if isinstance(t, TensorType) else ()
        state.append(StateArray(f"data/{name}", shape, _data_spec(len(shape))))
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
    assert mod_spec is not None and mod_spec.loader is not None
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


@dataclass
class TorchTrainResult:
    """Per-step mean loss, the final global parameters by FQN, the compiled program."""

    losses: list[float]
    params: dict[str, np.ndarray]
    program: TorchStepProgram
    eval_losses: list[tuple[int, float]] = field(default_factory=list)

    def state_dict(self, model: Any) -> dict[str, Any]:
        """`model.state_dict()`'s keys (tied aliases included) with the trained values."""
        torch, _ = require_torch()
        canonical = {id(p): n for n, p in model.named_parameters()}
        out = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            out[name] = torch.from_numpy(np.ascontiguousarray(self.params[canonical[id(p)]])).to(p.dtype)
        for name, b in model.named_buffers():
            out[name] = b.detach().clone()
        return out


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


class _Rank:
    """One rank's local state (parameters in storage layout, moments in update layout)."""

    def __init__(self, prog: TorchStepProgram, rank: int, params: Mapping[str, np.ndarray]):
        from shardc.training.spmd import local_part

        self.p, self.rank = prog, rank
        g = prog.grid
        self.params = [local_part(np.asarray(params[i.path]), lay.storage, g, rank) for i, lay in zip(prog.params, prog.layouts)]
        self.mu = [np.zeros_like(local_part(np.asarray(params[i.path]), lay.update, g, rank)) for i, lay in zip(prog.params, prog.layouts)]
        self.nu = [np.zeros_like(m) for m in self.mu]
        self.step = 0

    def train_step(self, microbatches: Sequence[Sequence[np.ndarray]], lr: float) -> float:
        from shardc.training.spmd import local_part

        acc: list[np.ndarray] | None = None
        losses = []
        for mb in microbatches:
            data = [local_part(np.asarray(x), _data_spec(np.ndim(x)), self.p.grid, self.rank) for x in mb]
            loss, *grads = self.p.call(self.p.exported.func_name, *data, *self.params)
            losses.append(float(np.asarray(loss)))
            acc = [np.asarray(g) for g in grads] if acc is None else [a + np.asarray(g) for a, g in zip(acc, grads)]
        assert acc is not None
        self.step += 1
        n = len(self.params)
        dt = self.params[0].dtype if self.params else np.float32
        out = self.p.call("adamw_step", *self.params, *acc, *self.mu, *self.nu, dt.type(lr), self.step, dt.type(1.0 / len(microbatches)))
        self.params, self.mu, self.nu = list(out[:n]), list(out[n : 2 * n]), list(out[2 * n :])
        return float(np.mean(losses))


def train_module(
    model: Any,
    batches: Sequence[Sequence[Any]],
    loss_fn: Callable[..., Any],
    *,
    axes: Mapping[str, LogicalAxes] | None = None,
    plan: ShardingPlan | None = None,
    policy: ShardingPolicy | None = None,
    world: int | None = 1,
    n_inputs: int = 1,
    accum: int = 1,
    steps: int | None = None,
    lr: float | Callable[[int], float] = 1e-3,
    opt: AdamWConfig = TORCH_ADAMW,
) -> TorchTrainResult:
    """Train `model` with AdamW on `batches` (global microbatches: tuples whose first
    `n_inputs` entries go to the model and the rest to `loss_fn` after its output), `accum`
    microbatches per step, `steps` steps (default: as many as the batches give), `lr` a
    number or a function of the step (from 1). `world` simulated ranks, or None for the
    MPI world (call on every rank of an mpiexec job). The model itself is not changed:
    load `result.state_dict(model)` into it."""
    plan = plan or ShardingPlan()
    policy = policy or ShardingPolicy(tp=1, zero=False)
    if accum < 1:
        raise TorchTrainError(f"accum must be positive, got {accum}")
    if not batches:
        raise TorchTrainError("no batches to train on")
    steps = len(batches) // accum if steps is None else steps
    if steps * accum > len(batches):
        raise TorchTrainError(f"{steps} steps of {accum} microbatches need {steps * accum} batches, {len(batches)} given")
    torch, _ = require_torch()
    first = tuple(x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x)) for x in batches[0])
    exported = export_train_step(model, first[:n_inputs], first[n_inputs:], loss_fn)
    size = world if world is not None else _mpi_size()
    try:
        grid = make_grid(size, policy.tp)
    except ValueError as e:
        raise TorchTrainError(str(e)) from None
    prog = TorchStepProgram.build(exported, axes or {}, plan, policy, grid, opt)
    init = {n: _np(p) for n, p in model.named_parameters()}
    data = [[_np(x) for x in b] for b in batches[: steps * accum]]
    lr_at = lr if callable(lr) else (lambda _s, v=float(lr): v)

    def run_rank(rank: int) -> tuple[list[float], list[np.ndarray]]:
        state = _Rank(prog, rank, init)
        losses = [state.train_step(data[s * accum : (s + 1) * accum], lr_at(s + 1)) for s in range(steps)]
        return losses, [np.asarray(p) for p in state.params]

    if world is not None:
        from shardc.runtime.comm import run_simulated

        outs = run_simulated(size, run_rank, per_rank_args=[(r,) for r in range(size)])
    else:
        outs = _run_mpi(run_rank)
    from shardc.training.spmd import assemble

    params = {
        info.path: assemble([o[1][i] for o in outs], info.shape, lay.storage, grid)
        for i, (info, lay) in enumerate(zip(prog.params, prog.layouts))
    }
    return TorchTrainResult(outs[0][0], params, prog)


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
) -> tuple[str, list[str]]:
    """The forward of `model` as annotated MLIR text for `world` ranks under the training
    layouts (parameters arrive in storage layout and are used in compute layout, inputs
    split over `batch`), and its argument names (inputs, then parameters by FQN). Run it
    with `shardc-run --simulate N` / `mpiexec shardc-run`, or `forward_module`."""
    from shardc.context import make_context
    from shardc.frontends.torch import export_module
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import module_to_string

    plan = plan or ShardingPlan()
    policy = policy or ShardingPolicy(tp=1, zero=False)
    try:
        grid = make_grid(world, policy.tp)
    except ValueError as e:
        raise TorchTrainError(str(e)) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = export_module(model, tuple(inputs), func_name=func_name)
    except Exception as e:  # noqa: BLE001 - torch-mlir's refusal, as one line
        raise TorchTrainError(f"torch-mlir cannot import the forward of {type(model).__name__}: {_reason([], e)}") from None
    shapes = [tuple(p.shape) for n, p in model.named_parameters()]
    params = resolve_param_axes(exported.param_names, shapes, axes or {}, plan)
    try:
        validate_layouts(params, plan, policy, grid)  # type: ignore[arg-type]
    except ShardingConfigError as e:
        raise TorchTrainError(str(e)) from None
    layouts = [resolve(p.axes, plan, policy) for p in params]  # type: ignore[arg-type]
    module = LocatingParser(make_context(), exported.text, "<torch-mlir>").parse_module()
    uncollapse_batch_matmuls(module)
    split_shared_fills(module)
    step = ExportedStep(exported.text, func_name, exported.input_names, [], exported.param_names, shapes, "")
    _check_data(module, step, grid)
    _annotate_step(module, step, grid, layouts, results=False)
    module.body.block.insert_op_before(grid.grid_op(), module.body.block.first_op)
    return module_to_string(module), exported.arg_names


def forward_module(
    model: Any,
    inputs: Sequence[Any],
    *,
    params: Mapping[str, np.ndarray] | None = None,
    world: int | None = 1,
    pipeline: str | None = "shard-to-mpi-pipeline",
    **layout: Any,
) -> list[np.ndarray]:
    """The global outputs of `model(*inputs)` computed sharded on `world` simulated ranks
    (None: the MPI world) by the same plan and policy as training (`axes`, `plan`,
    `policy` keywords); `params` (a `TorchTrainResult.params`) replaces the module's."""
    size = world if world is not None else _mpi_size()
    text, names = sharded_forward(model, inputs, world=size, **layout)
    state = {n: _np(p) for n, p in model.named_parameters()}
    state.update(params or {})
    values = [*(_np(x) for x in inputs), *(state[n] for n in names[len(inputs) :])]
    from shardc.runtime.launch import run_program

    return run_program(text, values, ranks=world, pipeline=pipeline)


def _mpi_size() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size()


def _run_mpi(run_rank: Callable[[int], Any]) -> list[Any]:
    from mpi4py import MPI

    from shardc.runtime.comm import MPIComm, abort_on_error, use_comm

    world = MPI.COMM_WORLD
    with abort_on_error(world), use_comm(MPIComm(world)):
        mine = run_rank(world.Get_rank())
    return world.allgather(mine)


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
