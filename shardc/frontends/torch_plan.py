"""`shardc-train --torch-model ... --auto` / `--plan-only`: the auto plan of a torch module.

The candidates are the trainer's hand policies (`shardc.training.auto_plan.hand_policies`:
DP, ZeRO, FSDP, every tp the ranks allow, and their mixes), each checked as training
checks it (the parameters' layouts on the grid, `plan_state`; whole attention heads per
rank for a transformers model) and priced by the cost model from the module itself
(`module_shape`): its parameters with the logical axes the task gives (written by the
user, derived by `shardc.frontends.hf` for a transformers model, or none: then ZeRO and
FSDP split what the plan's rules name and tp is left out), its projections
(`nn.Linear`, transformers' `Conv1D`, a head tied to the embedding counted once as a
projection), attention blocks, normalizations, activations (their kind and the width of
the projections beside them; modules, or functions a forward calls, `F.gelu(...)`, read
from its source) and an estimate of the ops its imported
forward holds. Nothing is imported through torch-mlir or compiled, so `--plan-only
--world 1024` answers as fast as the module is built.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from shardc.frontends.torch_source import load_cli_task
from shardc.frontends.torch_train import TorchTrainError, resolve_param_axes
from shardc.training.auto_plan import AttentionShape, AutoPlan, LinearShape, ModuleShape, choose_module, host_cost_model
from shardc.training.axis import ShardingPolicy
from shardc.training.job import Job, JobError
from shardc.training.mesh import Grid

OPS_PER_LEAF = {"linear": 4, "norm": 10, "embedding": 3, "activation": 6, "attention": 24}
"""Ops of a leaf module's forward in the imported program (torch-mlir's decompositions:
a projection is a transpose, a matmul, a bias add and a reshape; a norm its mean, variance,
rsqrt and scaling; attention its scores, mask, softmax and weighted sum), the rest 2."""
ATTENTION_HEAD_FIELDS = ("num_heads", "n_head", "n_heads", "num_attention_heads")


def _kind(m: Any) -> str:
    import torch.nn as nn

    name = type(m).__name__
    if isinstance(m, nn.Linear) or (name == "Conv1D" and hasattr(m, "nf")):
        return "linear"
    if isinstance(m, nn.Embedding):
        return "embedding"
    if "Norm" in name:
        return "norm"
    if any(a in name for a in ("GELU", "SiLU", "ReLU", "Tanh", "Activation", "Softmax")):
        return "activation"
    return "other"


def _features(m: Any) -> tuple[int, int]:
    """(inputs, outputs) of a projection: `nn.Linear`'s, or transformers' `Conv1D`, whose
    weight is stored [in, out]."""
    if type(m).__name__ == "Conv1D":
        return int(m.weight.shape[0]), int(m.weight.shape[1])
    return int(m.in_features), int(m.out_features)


def _activation_kind(m: Any) -> str:
    """The `ACTIVATION_PASSES` key of an activation module, from its class: transformers'
    tanh GELUs (`NewGELUActivation`, `GELUTanh`, `FastGELUActivation`, ...) and
    nn.GELU(approximate="tanh"), the erf GELU, SiLU, ReLU."""
    name = type(m).__name__
    if "GELU" in name and ("Tanh" in name or "New" in name or "Fast" in name or getattr(m, "approximate", "none") == "tanh"):
        return "gelu_tanh"
    if "GELU" in name:
        return "gelu"
    if "SiLU" in name or "Swish" in name:
        return "silu"
    if "ReLU" in name:
        return "relu"
    return "other"


FUNCTIONAL_ACTIVATIONS = {
    "gelu": "gelu", "silu": "silu", "relu": "relu", "relu6": "relu", "leaky_relu": "relu",
    "elu": "other", "selu": "other", "mish": "other", "hardswish": "other", "softplus": "other",
}
"""Activation functions a forward may call itself (`F.gelu(...)`, `torch.relu(...)`), by
name: their `ACTIVATION_PASSES` key (a gelu with `approximate="tanh"` is `gelu_tanh`)."""

_FUNCTIONAL_BASES = ("F", "functional", "torch", "nn")


@functools.cache
def functional_activations(cls: type) -> tuple[tuple[str, str | None], ...]:
    """(kind, the child module whose output it takes, if `self.<child>(...)`) of each call
    of an activation function written in `cls.forward` (`FUNCTIONAL_ACTIVATIONS`), read
    from its source: nothing is run (a probe forward could touch the module's buffers).
    A forward whose source cannot be read (builtin, generated) gives none; once per class."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.forward)))
    except (OSError, TypeError, SyntaxError, AttributeError):
        return ()
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FUNCTIONAL_ACTIVATIONS):
            continue
        base = node.func.value
        while isinstance(base, ast.Attribute):  # torch.nn.functional.gelu -> torch
            base = base.value
        if not (isinstance(base, ast.Name) and base.id in _FUNCTIONAL_BASES):
            continue
        kind = FUNCTIONAL_ACTIVATIONS[node.func.attr]
        if kind == "gelu" and any(k.arg == "approximate" and isinstance(k.value, ast.Constant) and k.value.value == "tanh" for k in node.keywords):
            kind = "gelu_tanh"
        arg = node.args[0] if node.args else None
        child = None
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and isinstance(arg.func.value, ast.Name) and arg.func.value.id == "self":
            child = arg.func.attr
        found.append((kind, child))
    return tuple(found)


def _heads(att: Any, config: Any, width: int) -> int:
    for source in (att, config):
        for f in ATTENTION_HEAD_FIELDS:
            v = getattr(source, f, None)
            if isinstance(v, int) and v > 0:
                return v
    return max(width // 64, 1)


def module_shape(task: Any, block_size: int, vocab_size: int) -> ModuleShape:
    """The `ModuleShape` of a TorchTask's module: its parameters with their logical axes
    (the task's FQN patterns, checked as training checks them), its projections (a
    weight shared by two modules, a tied LM head, is one parameter used twice), its
    attention blocks (the innermost modules whose class name says Attention) and norms,
    and its forward's ops counted from its leaf modules."""
    import torch.nn as nn

    model = task.model
    named = list(model.named_parameters())
    params = resolve_param_axes([n for n, _ in named], [tuple(p.shape) for _, p in named], task.axes, task.plan, task.no_decay)
    path_of = {id(p): n for n, p in named}
    linears: list[LinearShape] = []
    attention: list[AttentionShape] = []
    norms: list[int] = []
    wide_norms: list[int] = []
    activations: list[tuple[str, int]] = []
    ops = 0
    modules = list(model.named_modules())
    config = getattr(model, "config", None)
    widest: dict[str, int] = {}  # per module, the widest output of its projections
    for name, m in modules:
        if _kind(m) == "linear" and id(m.weight) in path_of:
            parent = name.rpartition(".")[0]
            widest[parent] = max(widest.get(parent, 0), _features(m)[1])
    for name, m in modules:
        kind = _kind(m)
        children = list(m.children())
        if kind == "linear" and id(m.weight) in path_of:
            n_in, n_out = _features(m)
            linears.append(LinearShape(path_of[id(m.weight)], n_in, n_out, 0 if type(m).__name__ == "Conv1D" else 1))
        elif kind == "norm" and getattr(m, "weight", None) is not None:
            (wide_norms if isinstance(m, nn.LayerNorm) else norms).append(int(m.weight.numel()))
        elif kind == "activation" and name.rpartition(".")[0] in widest:
            activations.append((_activation_kind(m), widest[name.rpartition(".")[0]]))
        if kind != "activation" and name in widest:  # `F.gelu(...)` in its own forward
            for act, child in functional_activations(type(m)):
                sub = getattr(m, child, None) if child else None
                activations.append((act, _features(sub)[1] if sub is not None and _kind(sub) == "linear" else widest[name]))
                ops += OPS_PER_LEAF["activation"]
        if not children:
            ops += OPS_PER_LEAF.get(kind, 2)
        if "Attention" in type(m).__name__ and not any("Attention" in type(d).__name__ for _, d in m.named_modules() if d is not m):
            inner = [d for d in m.modules() if _kind(d) == "linear" and id(d.weight) in path_of]
            if not inner:
                continue
            first = inner[0]
            width = _features(first)[0]
            attention.append(AttentionShape(width, _heads(m, config, width), tuple(path_of[id(d.weight)] for d in inner)))
            ops += OPS_PER_LEAF["attention"]
    return ModuleShape(
        type(model).__name__, tuple(params), task.plan, tuple(linears), tuple(attention), (*wide_norms, *norms), ops, block_size, vocab_size,
        tuple(activations), len(wide_norms),
    )


def plan_torch_job(job: Job, world: int, ranks_per_host: int | None = None, cost: object = None) -> AutoPlan:
    """The auto plan of a `--torch-model` job on `world` ranks: the module the job's
    flags build (vocabulary padded for the most data replicas, which every other grid's
    padding divides), its `module_shape`, `--per-device-batch`, `--accum`,
    `--memory-budget` and `--precision`, priced by `cost` (a CostModel; default: the cached rates) for
    `ranks_per_host` ranks sharing this host's cores (`host_cost_model`; None: a core
    each). Problems as JobError lines."""
    from shardc.frontends.hf import check_whole_heads, derive_layouts, is_hf_spec
    from shardc.frontends.torch import MissingTorch
    from shardc.training.auto_plan import PlanError

    a = job.settings
    tok = job.tokenizer(job.text())
    try:
        task = load_cli_task(a, tok.vocab_size, tok.n_tokens)
        shape = module_shape(task, a.block_size, tok.vocab_size)
        if shape.linears:  # the logits' width: the last projection's (an LM head, a classifier)
            shape = replace(shape, vocab_size=shape.linears[-1].out_features)
        layouts = derive_layouts(task.model) if is_hf_spec(a.torch_model) else None

        def check(policy: ShardingPolicy, grid: Grid) -> None:
            if layouts is not None:
                check_whole_heads(task.model, layouts, policy.tp)

        cost = host_cost_model(cost, ranks_per_host)
        precision, grad_reduce = getattr(a, "precision", "f32"), getattr(a, "grad_reduce", "f32")
        return choose_module(
            shape, world, a.per_device_batch, a.accum, a.memory_budget, cost=cost, ranks_per_host=ranks_per_host, check=check,
            precision=precision, grad_reduce=grad_reduce,
        )
    except MissingTorch as e:
        raise JobError(str(e)) from None
    except (PlanError, TorchTrainError, ValueError) as e:
        raise JobError(str(e)) from None


__all__ = ["FUNCTIONAL_ACTIVATIONS", "functional_activations", "module_shape", "plan_torch_job"]
