"""`shardc-train --auto`: choose the sharding policy (a mix per parameter group) from predictions.

The trainer's plans are the seed's: per parameter a storage, compute and update layout,
set by a `ShardingPolicy` (tp over the `shard` axis, ZeRO and FSDP over `batch`) on a
(batch, shard) grid. On N ranks the policies are few (every tp dividing N and the heads,
times data parallel / ZeRO / FSDP), so the plan is chosen exactly by enumeration: each
candidate is checked against the grid (`validate_layouts`, the check training makes),
priced by the cost model the auto-sharding pass minimizes (`shardc.passes.cost_model`:
contractions at the measured BLAS rate, elementwise work at the measured bandwidth, a
fixed cost per op, every collective by alpha-beta over its grid axis), and the fastest
in tokens/s whose predicted peak memory per rank fits the budget wins.

Beyond the whole-model policies, `--auto` chooses a layout kind (dp, zero, fsdp) per
parameter group (embeddings, attention, MLP, norms, head, other: `group_of`): per tp it
prices every assignment (`mixed_policies`; groups where two kinds give the same layouts
keep one, so at most 3^6 per tp, 27 for the GPT at tp 1; at tp > 1 attention and MLP may
each also turn TP off, 81 for the GPT at tp 2) and keeps the fastest that fits, exactly,
by the same enumeration. A mixed policy is priced by the same `predict`, its
collectives and transient copies per layout kind.

The prediction is read off the model's parameter specs and the layouts, not off a
compiled program, so that `--plan-only --world 1024` answers in a second:

* compute per microbatch: the GPT's matmul FLOPs (tp-split ones divided by tp, the tied
  LM head whole: the vocabulary is not split for TP), times 3 for forward + backward;
  elementwise traffic of the layers' activations; AdamW over the update layout;
* collectives, as the compiled step holds them: per microbatch 4 all_reduces per layer
  over `shard` (tp > 1) and the gradients' all_reduce (DP) or reduce_scatter (ZeRO, for
  the arrays the update layout splits; all_reduce for the others) over `batch`; FSDP's
  all_gather of the stored parameters per microbatch; ZeRO's all_gather after the update;
* memory per rank: the state (`per_rank_bytes`: parameters, gradients, moments), the
  activations a microbatch keeps for its backward pass, and the transient copies a
  policy makes (FSDP's gathered parameters, ZeRO's unreduced gradient: one at a time,
  each reduce-scattered as the backward pass makes it).

The cost model's rates are the ones cached for this machine and MPI (`load_rates`; the
defaults until `shardc-opt --auto-sharding="rates=measure"` or `load_rates(recalibrate=True)`
has measured them).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from typing import Any
from dataclasses import dataclass, field, replace

from shardc.training.axis import (
    GPT_PLAN,
    GROUP_NAMES,
    LAYOUT_KINDS,
    LayoutOverride,
    layout_kind,
    ShardingConfigError,
    ShardingPlan,
    ShardingPolicy,
    ShardingValidationError,
    StateBytes,
    group_of,
    per_rank_bytes,
    resolve,
    validate_layouts,
)
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.mesh import BATCH, SHARD, Grid, GridError, make_grid

OPS_PER_LAYER = 110
"""Ops one layer's forward and backward run in the compiled step (about 35 + 75)."""
OPS_FIXED = 60
"""Ops outside the layers: embedding, final norm, LM head, loss and their gradients."""
OPS_PER_PARAM = 2
"""Ops of the (fused, in-place) AdamW update per parameter array."""


GENERATED_OP_SECONDS = 10e-6
"""The least a compiled step's op costs: its generated statement allocates, checks shapes
and calls numpy a few times. The cost model's `op_overhead` times one bare numpy call
(about 0.3 us here), which prices a 1-layer step at a twentieth of its measured time;
the steps measured on the development machine (1-4 layers, n_embd 16-256, one rank)
cost 8-20 us per op above their FLOPs and bytes."""


IMPORTED_ACTIVATIONS = 0.85
"""What a torch module's imported step holds at its peak per byte of the activations its
projections, attention, norms and logits keep, and `IMPORTED_UPDATE_COPIES`: per byte of
its parameters (compute layout), what it holds beside them whatever the batch (the
gradients' copies, AdamW's new parameters and moments beside the old). Fitted to a
Llama-shaped transformers model (hidden 256, 4 layers, 8/4 heads, seq 128, batch 2 and 4,
dp/ZeRO/FSDP/tp=2; tracemalloc's peak + the module's parameters, which numpy views and
the trace cannot see): within 7% on each; the 2.5x once fitted to 1-layer models of
width 32 put it at 1.6x. Models that small hold a few hundred KiB more than predicted
(the step's constants, per-op copies)."""
IMPORTED_UPDATE_COPIES = 2.5


ACTIVATION_PASSES = {"gelu_tanh": (18, 4), "gelu": (12, 2), "silu": (7, 0), "relu": (3, 1), "other": (6, 1)}
"""Per activation kind: the elementwise passes over its input (forward and backward
together) the imported step runs, and the tensors of that size it keeps for the backward
pass beyond the next projection's input. The passes are counted in the imported GPT-2
(`NewGELUActivation`: x ** 3, scaling, tanh and their gradients, 21 ops on the MLP's
width per layer with the bias) and Llama (SiLU and the gate's product: 10); the kept
tensors fitted to their measured peaks (SiLU's are within the Llama's fit of
`IMPORTED_ACTIVATIONS`)."""


class PlanError(ValueError):
    """No policy fits: the message names the smallest budget that does (one line)."""


def policy_name(p: ShardingPolicy) -> str:
    """`dp`, `zero`, `fsdp`, `tp=2`, `tp=2+zero`, `tp=2+fsdp`; a mixed policy adds its
    overrides by group (or pattern): `fsdp[norms=dp,attention=zero]`."""
    kind = layout_kind(p.zero, p.fsdp)  # (a plain policy uses TP everywhere)
    if p.tp == 1:
        name = kind
    else:
        name = f"tp={p.tp}" if kind == "dp" else f"tp={p.tp}+{kind}"
    if p.overrides:
        name += "[" + ",".join(o.label for o in p.overrides) + "]"
    return name


def hand_policies(world: int) -> list[ShardingPolicy]:
    """Every policy the grid allows by its shape: tp dividing `world`, then DP, ZeRO, FSDP
    (`choose` passes over ZeRO and FSDP where tp = world leaves one data replica: they
    split nothing there)."""
    return [
        ShardingPolicy(tp, zero, fsdp)
        for tp in range(1, world + 1) if world % tp == 0
        for zero, fsdp in ((False, False), (True, False), (True, True))
    ]


# -----------------------------------------------------------------------------------------
# Mixed policies: a layout kind per parameter group
# -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParamGroup:
    """A parameter group: its name, an FQN pattern that matches its parameters and no
    other (`re.fullmatch`), and the parameters."""

    name: str
    pattern: str
    specs: tuple[Any, ...]


def param_groups(specs: Sequence[Any]) -> list[ParamGroup]:
    """The model's parameters by `group_of`, in `GROUP_NAMES` order (`other` last); each
    group's pattern is its members' FQNs, escaped, with layer indices folded to `\\d+`."""
    members: dict[str, list[Any]] = {}
    for s in specs:
        members.setdefault(group_of(s.path), []).append(s)
    out = []
    for name in GROUP_NAMES:
        if name in members:
            folded = dict.fromkeys(re.sub(r"\\\.\d+\\\.", r"\\.\\d+\\.", re.escape(s.path)) for s in members[name])
            out.append(ParamGroup(name, "|".join(folded), tuple(members[name])))
    return out


def mixed_policies(specs: Sequence[Any], plan: ShardingPlan, tp: int) -> list[ShardingPolicy]:
    """Every assignment of dp / zero / fsdp to the parameter groups (`param_groups`) for
    tensor-parallel degree `tp`, as policies: a group where two kinds give the same
    layouts keeps the first (a norm ZeRO does not split is dp), a uniform assignment is
    the plain policy, a mixed one the most common kind with the others as overrides. With
    tp > 1 a group the TP rules split may also turn TP off (`dp/notp`: computed whole over
    `shard`), but not every such group at once (that is a smaller tp, priced as such). The
    groups are few (at most 6, so at most 3^6 assignments, times 3 where attention and
    MLP may each drop TP): `choose` prices them all."""
    import itertools

    groups = param_groups(specs)
    options: list[list[tuple[str, bool]]] = []
    for g in groups:
        seen: list[tuple[Any, ...]] = []
        kinds: list[tuple[str, bool]] = []
        for uses_tp in (True, False) if tp > 1 else (True,):
            for kind, (zero, fsdp) in LAYOUT_KINDS.items():
                probe = ShardingPolicy(tp, zero, fsdp, (LayoutOverride(".*", zero, fsdp, tp=uses_tp),))
                lays = tuple(resolve(s.axes, plan, probe, s.path) for s in g.specs)
                if lays not in seen:
                    seen.append(lays)
                    kinds.append((kind, uses_tp))
        options.append(kinds)
    free = [i for i, o in enumerate(options) if len(o) > 1]
    may_drop_tp = {i for i in free if any(not t for _, t in options[i])}
    out: list[ShardingPolicy] = []
    seen_policies: set[ShardingPolicy] = set()
    for chosen in itertools.product(*(options[i] for i in free)):
        kinds = dict(zip(free, chosen))
        if may_drop_tp and all(not kinds[i][1] for i in may_drop_tp):
            continue  # no group left split over `shard`
        counts = {k: [kind for kind, _ in kinds.values()].count(k) for k in LAYOUT_KINDS}
        base = max(LAYOUT_KINDS, key=lambda k: counts[k]) if kinds else "dp"  # ties: dp, zero, fsdp
        overrides = tuple(
            LayoutOverride(groups[i].pattern, *LAYOUT_KINDS[k], name=groups[i].name, tp=t) for i, (k, t) in kinds.items() if k != base or not t
        )
        policy = ShardingPolicy(tp, *LAYOUT_KINDS[base], overrides=overrides)
        if policy not in seen_policies:
            seen_policies.add(policy)
            out.append(policy)
    return out


def auto_policies(specs: Sequence[Any], plan: ShardingPlan, world: int, mixed: bool = True) -> list[ShardingPolicy]:
    """What `--auto` prices on `world` ranks: the hand policies (each a candidate, or a
    reason the grid refuses it), then per tp dividing `world` every other mix of layout
    kinds over the parameter groups (`mixed_policies`); `mixed=False`: the hand ones."""
    hand = hand_policies(world)
    if not mixed:
        return hand
    known = set(hand)
    return hand + [p for tp in range(1, world + 1) if world % tp == 0 for p in mixed_policies(specs, plan, tp) if p not in known]


def group_kinds(policy: ShardingPolicy, specs: Sequence[Any]) -> list[str]:
    """`group=kind` per parameter group of a policy (`embeddings=fsdp`, `attention=dp/notp`, ...)."""
    return [f"{g.name}={layout_kind(*policy.choice(g.specs[0].path), policy.uses_tp(g.specs[0].path))}" for g in param_groups(specs)]


@dataclass(frozen=True)
class MemoryEstimate:
    """Predicted bytes per rank: the state between steps, the activation peak of a
    microbatch, and the transient copies the policy makes."""

    state: StateBytes
    activations: float
    transient: float

    @property
    def total(self) -> float:
        return self.state.total + self.activations + self.transient


@dataclass(frozen=True)
class Collective:
    kind: str
    axis: str
    count: int
    nbytes: float
    """Bytes of one collective's input on a rank."""
    seconds: float
    """All `count` of them together."""


@dataclass(frozen=True)
class Prediction:
    """One policy on one grid, priced."""

    policy: ShardingPolicy
    grid: Grid
    compute_s: float
    collectives: tuple[Collective, ...]
    memory: MemoryEstimate
    tokens: int
    """Tokens per optimizer step (the global batch times the block size)."""
    model: Any
    """The GPTConfig, or the torch module's `ModuleShape`."""
    specs: tuple[Any, ...] = ()
    """The parameters (path, shape, logical axes) the layouts are of."""
    plan: ShardingPlan = GPT_PLAN
    precision: str = "f32"
    """`--precision`: "bf16" prices products of bf16 copies (`bf16_costs`)."""
    grad_reduce: str = "f32"
    """`--grad-reduce`: "bf16" prices the gradients' reductions over batch at bf16's
    bytes, plus their casts (`grad_reduce_casts`)."""

    @property
    def name(self) -> str:
        return policy_name(self.policy)

    @property
    def comm_s(self) -> float:
        return sum(c.seconds for c in self.collectives)

    @property
    def step_s(self) -> float:
        return self.compute_s + self.comm_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.step_s


def predict(
    model: GPTConfig,
    policy: ShardingPolicy,
    grid: Grid,
    per_device_batch: int,
    accum: int = 1,
    cost: object = None,
    itemsize: int = 4,
    plan: ShardingPlan = GPT_PLAN,
    precision: str = "f32",
    grad_reduce: str = "f32",
) -> Prediction:
    """The predicted optimizer step of `policy` on `grid` (see the module's docstring);
    `cost` is a `shardc.passes.cost_model.CostModel` (default: the cached rates);
    `precision` "bf16": `--precision bf16`'s step (`bf16_costs`); `grad_reduce` "bf16":
    `--grad-reduce bf16`'s."""
    from shardc.passes.cost_model import CostModel, load_rates

    cm: CostModel = cost if cost is not None else CostModel(load_rates())  # type: ignore[assignment]
    b, T, C, H, M, V, L = per_device_batch, model.block_size, model.n_embd, model.n_head, model.n_mlp, model.vocab_size, model.n_layer
    k, dp = grid.shard, grid.batch
    n = b * T  # tokens of a replica's microbatch (every rank of the replica reads them)
    specs = param_specs(model)
    layouts = [resolve(s.axes, plan, policy, s.path) for s in specs]

    compute_elems = sum(_local(s.shape, lay.compute, grid) for s, lay in zip(specs, layouts))
    update_elems = sum(_local(s.shape, lay.update, grid) for s, lay in zip(specs, layouts))

    # -- compute ----------------------------------------------------------------------
    # per layer, the pieces `shard` splits its attention and its MLP into: tp, or 1 for a
    # group whose override turns TP off (computed whole, no all_reduce of its output)
    pieces = {s.path: math.prod(grid.axis_size(SHARD) for d in lay.compute if SHARD in (d or ())) for s, lay in zip(specs, layouts)}
    blocks = [(pieces[f"h.{i}.attn.c_attn.weight"], pieces[f"h.{i}.mlp.c_fc.weight"]) for i in range(L)]
    fwd_flops = sum(2 * n * C * 4 * C / ka + 2 * n * C * 2 * M / km + 2 * 2 * b * (H / ka) * T * T * (C / H) for ka, km in blocks) + 2 * n * C * V
    layer_bytes = sum(24 * n * C + 12 * n * M / km + 10 * b * (H / ka) * T * T + 4 * n * 3 * C / ka for ka, km in blocks) * itemsize
    elem_bytes = layer_bytes + 10 * n * V * itemsize + 4 * n * C * itemsize  # LM head softmax/CE, embedding
    micro = cm.contraction_time(3 * fwd_flops, precision) + cm.elementwise_time(3 * elem_bytes)  # backward: twice forward
    per_op = cm.on_shared_core(max(cm.rates.op_overhead, GENERATED_OP_SECONDS))
    micro += per_op * (OPS_PER_LAYER * L + OPS_FIXED)
    bf16 = precision == "bf16"
    operands = gpt_product_operands(specs) if bf16 else frozenset()
    # the bf16 copies products read: per layer forward (ln_1's and ln_2's outputs, q, k, v,
    # attention's output, the MLP's hidden, the probabilities) and as many gradients backward
    layer_copies = sum(2 * (2 * n * C + n * 4 * C / ka + n * M / km + b * (H / ka) * T * T) for ka, km in blocks)
    copies = bf16_costs(specs, layouts, grid, operands, layer_copies + n * C + n * V, {"wte": 3}) if bf16 else None
    if copies is not None:
        micro += cm.elementwise_time(copies.bytes) + per_op * copies.ops
    micro += cm.elementwise_time(2 * compute_elems * itemsize) if accum > 1 else 0.0  # accumulate
    micro += grad_reduce_casts(grad_reduce, grid, compute_elems, update_elems, itemsize, cm)
    update = cm.elementwise_time(14 * update_elems * itemsize) + per_op * OPS_PER_PARAM * len(specs)
    compute_s = accum * micro + update

    # -- collectives --------------------------------------------------------------------
    # each split block all_reduces its output forward and its input's gradient backward
    tp_reduces = accum * 2 * sum((ka > 1) + (km > 1) for ka, km in blocks)
    rows = _state_collectives(specs, layouts, policy, grid, accum, itemsize, cm, [("all_reduce", tp_reduces, n * C * itemsize)], operands, grad_reduce)

    # -- memory -------------------------------------------------------------------------
    # what a layer keeps for its backward pass in the compiled step (the fused kernels keep
    # one MLP hidden and recompute the rest), and the backward's working set at the peak
    # (about five MLP-hidden-sized arrays): fitted to the traced peaks of n_layer 4 and 12
    # at tp 1 and 2 (the per-layer and fixed parts; 4 n C + 3 n C/k + 2 n M/k + ... kept
    # before over-predicted n_layer 12 by 18-24%)
    saved = sum(1.5 * n * C + (3 * n * C + b * H * T * T) / ka + n * M / km for ka, km in blocks) * itemsize
    widest_mlp = min((km for _, km in blocks), default=k)
    activations = saved + (5 * n * M / widest_mlp + 3 * n * V + 2 * n * C) * itemsize
    # the compiled GPT step reduce-scatters each gradient as the backward pass makes it:
    # one unreduced gradient at a time (measured: a full set over-predicted ZeRO by 12-18%)
    largest = max((_local(s.shape, lay.compute, grid) for s, lay in zip(specs, layouts)), default=0)
    state, transient = _state_memory(specs, layouts, plan, policy, grid, itemsize, largest, operands)
    if copies is not None:  # the forward products' bf16 inputs, kept for the weight gradients
        activations += (layer_copies / 2 + n * C) * BF16_BYTES
        transient += copies.live
    memory = MemoryEstimate(state, activations, transient)
    tokens = b * dp * accum * T
    return Prediction(policy, grid, compute_s, tuple(rows), memory, tokens, model, tuple(specs), plan, precision, grad_reduce)


# -----------------------------------------------------------------------------------------
# A torch module's step, from its shape
# -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearShape:
    """A projection of the module (nn.Linear, transformers' Conv1D, a tied LM head):
    the parameter its weight is (`weight`, an FQN of `ModuleShape.params`), its features
    and which dimension of the weight holds the input features."""

    weight: str
    in_features: int
    out_features: int
    in_dim: int


@dataclass(frozen=True)
class AttentionShape:
    """An attention block: its width (heads x head dim), heads, and the weights of its
    projections (split over `shard`: the block runs on local heads)."""

    width: int
    heads: int
    weights: tuple[str, ...]


@dataclass(frozen=True)
class ModuleShape:
    """What the prediction reads of a torch module (`shardc.frontends.torch_plan` reads
    it off the nn.Module): its parameters with their logical axes and the plan, its
    projections, attention blocks and normalizations, the ops its imported forward holds
    (an estimate from its leaf modules), the block size and the logits' width."""

    name: str
    params: tuple[Any, ...]
    plan: ShardingPlan
    linears: tuple[LinearShape, ...]
    attention: tuple[AttentionShape, ...]
    norm_widths: tuple[int, ...]
    forward_ops: int
    block_size: int
    vocab_size: int
    activations: tuple[tuple[str, int], ...] = ()
    """(kind, width) per activation module: a key of `ACTIVATION_PASSES` and the widest
    output of the projections beside it (an MLP's hidden width)."""
    float64_norms: int = 0
    """How many of `norm_widths` the import computes in float64 (nn.LayerNorm's
    statistics: twice the bytes of the float32 ones, RMSNorm's)."""


def predict_module(
    shape: ModuleShape,
    policy: ShardingPolicy,
    grid: Grid,
    per_device_batch: int,
    accum: int = 1,
    cost: object = None,
    itemsize: int = 4,
    precision: str = "f32",
    grad_reduce: str = "f32",
) -> Prediction:
    """The predicted optimizer step of a torch module under `policy` on `grid`, priced as
    `predict` prices the GPT, from the module's own projections (each one's FLOPs divided
    by the pieces `shard` splits its weight into; a row-parallel one, its input features
    split, all_reduces its output forward and its input's gradient backward), attention
    blocks (on local heads where their projections are split), normalizations and the
    logits' softmax and cross-entropy; state and collectives from its parameters' layouts.
    `precision` "bf16": `--precision bf16`'s step (`bf16_costs`); `grad_reduce`: `predict`'s."""
    from shardc.passes.cost_model import CostModel, load_rates

    cm: CostModel = cost if cost is not None else CostModel(load_rates())  # type: ignore[assignment]
    b, T, V = per_device_batch, shape.block_size, shape.vocab_size
    n = b * T
    specs = shape.params
    layouts = [resolve(s.axes, shape.plan, policy, s.path) for s in specs]
    by_path = {s.path: lay.compute for s, lay in zip(specs, layouts)}
    compute_elems = sum(_local(s.shape, lay.compute, grid) for s, lay in zip(specs, layouts))
    update_elems = sum(_local(s.shape, lay.update, grid) for s, lay in zip(specs, layouts))

    def shard_pieces(path: str, dim: int | None = None) -> int:
        spec = by_path.get(path)
        if spec is None:
            return 1
        dims = range(len(spec)) if dim is None else [dim]
        return math.prod(grid.axis_size(SHARD) for d in dims if SHARD in (spec[d] or ()))

    flops = elem = saved = 0.0
    copies_fwd = copies_bwd = 0.0  # bf16 copies of the products' activations: inputs, gradients
    reduces = 0
    reduce_bytes = 0.0
    for lin in shape.linears:
        k = shard_pieces(lin.weight)
        k_in = shard_pieces(lin.weight, lin.in_dim)
        flops += 2 * n * lin.in_features * lin.out_features / k
        elem += 4 * n * (lin.in_features / k_in + lin.out_features * k_in / k) * itemsize
        saved += n * lin.in_features / k_in * itemsize
        copies_fwd += n * lin.in_features / k_in
        copies_bwd += n * lin.out_features * k_in / k
        if k_in > 1:  # row-parallel: the partial outputs are summed
            reduces += 2
            reduce_bytes += 2 * n * lin.out_features * itemsize
    for att in shape.attention:
        k = max((shard_pieces(w) for w in att.weights), default=1)
        heads = att.heads / k
        flops += 2 * 2 * b * T * T * att.width / k
        elem += 10 * b * heads * T * T * itemsize
        saved += 2 * b * heads * T * T * itemsize
        copies_fwd += 3 * n * att.width / k + b * heads * T * T  # q, k, v, probabilities
        copies_bwd += n * att.width / k + b * heads * T * T  # the output's and the scores' gradients
    for i, width in enumerate(shape.norm_widths):
        size = 8 if i < shape.float64_norms else itemsize  # nn.LayerNorm's statistics in float64
        elem += 16 * n * width * size
        saved += 2 * n * width * size
    for kind, width in shape.activations:
        passes, kept = ACTIVATION_PASSES.get(kind, ACTIVATION_PASSES["other"])
        elem += passes * n * width * itemsize  # ~3 tensors a pass, a third of the passes forward
        saved += kept * n * width * itemsize
    elem += 10 * n * V * itemsize  # softmax and cross-entropy of the logits
    saved += 3 * n * V * itemsize
    per_op = cm.on_shared_core(max(cm.rates.op_overhead, GENERATED_OP_SECONDS))
    micro = cm.contraction_time(3 * flops, precision) + cm.elementwise_time(3 * elem) + per_op * 3 * shape.forward_ops
    operands = frozenset(lin.weight for lin in shape.linears) if precision == "bf16" else frozenset()
    copies = bf16_costs(specs, layouts, grid, operands, copies_fwd + copies_bwd, _readers(shape)) if operands else None
    if copies is not None:
        micro += cm.elementwise_time(copies.bytes) + per_op * copies.ops
        saved += copies_fwd * BF16_BYTES
    saved *= IMPORTED_ACTIVATIONS
    micro += cm.elementwise_time(2 * compute_elems * itemsize) if accum > 1 else 0.0
    micro += grad_reduce_casts(grad_reduce, grid, compute_elems, update_elems, itemsize, cm)
    update = cm.elementwise_time(14 * update_elems * itemsize) + per_op * OPS_PER_PARAM * len(specs)
    compute_s = accum * micro + update
    tp = [("all_reduce", accum * reduces, reduce_bytes / reduces)] if reduces else []
    rows = _state_collectives(specs, layouts, policy, grid, accum, itemsize, cm, tp, operands, grad_reduce)
    state, transient = _state_memory(specs, layouts, shape.plan, policy, grid, itemsize, None, operands)
    if copies is not None:
        transient += copies.live
    memory = MemoryEstimate(state, saved, transient + IMPORTED_UPDATE_COPIES * compute_elems * itemsize)
    tokens = b * grid.batch * accum * T
    return Prediction(policy, grid, compute_s, tuple(rows), memory, tokens, shape, tuple(specs), shape.plan, precision, grad_reduce)


def grad_reduce_casts(grad_reduce: str, grid: Grid, compute_elems: float, update_elems: float, itemsize: int, cm: Any) -> float:
    """A microbatch's cost of `--grad-reduce bf16`'s casts where gradients are reduced
    over batch (`reduction-precision`): every local gradient rounded to bf16 (read
    float32, write bf16), and what the reductions return widened back: the update
    layout's elements (a reduce_scatter's slice under ZeRO, whole under DP)."""
    if grad_reduce != "bf16" or grid.batch < 2:
        return 0.0
    return float(cm.elementwise_time((itemsize + BF16_BYTES) * (compute_elems + update_elems)))


def _local(shape: Sequence[int], spec: Any, grid: Grid) -> int:
    return math.prod(d // spec.pieces(grid, i) for i, d in enumerate(shape))


# -----------------------------------------------------------------------------------------
# --precision bf16: the mixed-precision pass's copies
# -----------------------------------------------------------------------------------------

BF16_BYTES = 2
CAST_BYTES = 4 + BF16_BYTES
"""A cast pass over a float32 value: read it, write its bf16 copy."""


def gpt_product_operands(specs: Sequence[Any]) -> frozenset[str]:
    """The GPT's parameters that products read (the mixed-precision pass gives each a
    bf16 copy): the token embedding (the tied LM head) and the layers' projection
    weights; biases, norms and the position embedding are added, not multiplied."""
    return frozenset(s.path for s in specs if s.path == "wte" or (s.path.endswith(".weight") and len(s.shape) >= 2))


@dataclass(frozen=True)
class BF16Copies:
    """What a `--precision bf16` step spends on bf16 copies per microbatch: the bytes of
    its cast passes, the cast ops of their own, and the parameters' copies live at once."""

    bytes: float
    ops: int
    live: float


def bf16_costs(
    specs: Sequence[Any], layouts: Sequence[Any], grid: Grid, operands: frozenset[str], activation_elems: float,
    readers: dict[str, int] | None = None,
) -> BF16Copies:
    """The bf16 copies of a microbatch as the compiled step makes them: a parameter read
    where it is stored is cast before each product that reads it (`remake_casts`: its
    forward product and the backward `dx = dy W^T`, 2 readers unless `readers` says
    otherwise) and freed after it, so one layer's copies are live at once; one gathered
    to its compute layout (FSDP) is cast once where it is stored and the gather moves the
    bf16 copy (priced by `_state_collectives`, its memory by `_state_memory`). The
    `activation_elems` a microbatch's products read (forward inputs and backward
    gradients) get their bf16 copy written in the pass that makes the float32 value
    (the fused kernels' cast): its bytes, no op of its own."""
    nbytes = activation_elems * BF16_BYTES
    ops = 0
    per_layer: dict[str, float] = {}
    for s, lay in zip(specs, layouts):
        if s.path not in operands:
            continue
        stored, used = _local(s.shape, lay.storage, grid), _local(s.shape, lay.compute, grid)
        if stored < used:  # gathered: cast once, before the gather
            nbytes += stored * CAST_BYTES
            ops += 1
            continue
        times = (readers or {}).get(s.path, 2)
        nbytes += times * used * CAST_BYTES
        ops += times
        layer = re.search(r"\.(\d+)\.", s.path)
        key = layer.group(1) if layer else s.path
        per_layer[key] = per_layer.get(key, 0.0) + used * BF16_BYTES
    return BF16Copies(nbytes, ops, max(per_layer.values(), default=0.0))


def _readers(shape: ModuleShape) -> dict[str, int]:
    """Products per microbatch that read each projection weight (2 per projection: a
    tied one, e.g. an embedding the LM head reads, counts each)."""
    out: dict[str, int] = {}
    for lin in shape.linears:
        out[lin.weight] = out.get(lin.weight, 0) + 2
    return out


def _state_collectives(
    specs: Sequence[Any], layouts: Sequence[Any], policy: ShardingPolicy, grid: Grid, accum: int, itemsize: int,
    cm: Any, tp_reduces: Sequence[tuple[str, int, float]], bf16_operands: frozenset[str] = frozenset(), grad_reduce: str = "f32",
) -> list[Collective]:
    """The step's collectives as the compiled step holds them: `tp_reduces` (kind, count
    per step, bytes) over `shard`, the gradients' all_reduce (DP) or reduce_scatter (ZeRO,
    for the arrays the update layout splits; all_reduce for the others) over `batch`,
    FSDP's all_gather of the stored parameters per microbatch, ZeRO's after the update,
    and the loss's all_reduce. `bf16_operands` (`--precision bf16`: the parameters products
    read): FSDP gathers their bf16 copies, half the bytes; ZeRO's updated masters are
    gathered in float32. Gradients are reduced in float32, or at bf16's bytes under
    `grad_reduce` "bf16" (`--grad-reduce bf16`)."""
    rows: list[Collective] = []
    reduced = BF16_BYTES if grad_reduce == "bf16" else itemsize  # a gradient element's bytes on the wire

    def add(kind: str, axis: str, count: int, nbytes: float) -> None:
        group = grid.axis_size(axis)
        if count and group > 1:
            rows.append(Collective(kind, axis, count, nbytes, count * cm.collective_time(kind, nbytes, group)))

    for kind, count, nbytes in tp_reduces:
        add(kind, SHARD, count, nbytes)
    for (zero, fsdp), members in _by_choice(specs, layouts, policy).items():  # a mixed policy: per layout kind
        split = [(s, lay) for s, lay in members if any(BATCH in (d or ()) for d in lay.update)]
        whole = [(s, lay) for s, lay in members if not any(BATCH in (d or ()) for d in lay.update)]
        if zero:
            add("reduce_scatter", BATCH, accum * len(split), _mean(_local(s.shape, lay.compute, grid) for s, lay in split) * reduced)
            add("all_reduce", BATCH, accum * len(whole), _mean(_local(s.shape, lay.compute, grid) for s, lay in whole) * reduced)
            sizes = (BF16_BYTES if fsdp and s.path in bf16_operands else itemsize for s, _ in split)
            gathered = _mean(_local(s.shape, lay.update, grid) * size for (s, lay), size in zip(split, sizes))
            add("all_gather", BATCH, accum * len(split) if fsdp else len(split), gathered)
        else:
            compute_elems = sum(_local(s.shape, lay.compute, grid) for s, lay in members)
            add("all_reduce", BATCH, accum * len(members), compute_elems / max(len(members), 1) * reduced)
    add("all_reduce", BATCH if grid.batch > 1 else SHARD, accum, itemsize)  # the loss
    return _merged(rows) if policy.overrides else rows


def _by_choice(specs: Sequence[Any], layouts: Sequence[Any], policy: ShardingPolicy) -> dict[tuple[bool, bool], list[tuple[Any, Any]]]:
    """The parameters (with their layouts) per (zero, fsdp) choice of the policy: one
    group for a plain policy, one per layout kind a mixed one uses."""
    out: dict[tuple[bool, bool], list[tuple[Any, Any]]] = {}
    for s, lay in zip(specs, layouts):
        out.setdefault(policy.choice(s.path), []).append((s, lay))
    return out


def _merged(rows: Sequence[Collective]) -> list[Collective]:
    """A mixed policy's rows of one kind and axis as one (counts and seconds summed, bytes
    averaged per collective), in first-seen order: the rows priced per layout kind print
    once each."""
    out: dict[tuple[str, str], Collective] = {}
    for r in rows:
        o = out.get((r.kind, r.axis))
        if o is None:
            out[(r.kind, r.axis)] = r
            continue
        count = o.count + r.count
        out[(r.kind, r.axis)] = Collective(r.kind, r.axis, count, (o.nbytes * o.count + r.nbytes * r.count) / count, o.seconds + r.seconds)
    return list(out.values())


def _state_memory(
    specs: Sequence[Any], layouts: Sequence[Any], plan: ShardingPlan, policy: ShardingPolicy, grid: Grid, itemsize: int,
    unreduced_elems: float | None = None, bf16_operands: frozenset[str] = frozenset(),
) -> tuple[StateBytes, float]:
    """The state per rank and the transient copies the policy makes: ZeRO's unreduced
    gradients of a microbatch (`unreduced_elems` of them live at once; default: all),
    FSDP's gathered parameters (of `bf16_operands`, the whole gathered bf16 copy)."""
    state = per_rank_bytes(specs, plan, policy, grid, itemsize)
    transient = 0.0
    zero_elems = 0.0
    for (zero, fsdp), members in _by_choice(specs, layouts, policy).items():  # one group for a plain policy
        elems = sum(_local(s.shape, lay.compute, grid) for s, lay in members)
        if zero and grid.batch > 1:
            zero_elems += elems
        if fsdp:
            stored = sum(_local(s.shape, lay.storage, grid) for s, lay in members)
            transient += (elems - stored) * itemsize  # the gathered parameters
            for s, lay in members:  # gathered as bf16 copies instead (`--precision bf16`)
                if s.path in bf16_operands:
                    used, own = _local(s.shape, lay.compute, grid), _local(s.shape, lay.storage, grid)
                    transient += used * BF16_BYTES - (used - own) * itemsize
    # a microbatch's gradients before their reduce_scatter (`unreduced_elems` live at once)
    transient += (zero_elems if unreduced_elems is None else min(zero_elems, unreduced_elems)) * itemsize
    return state, transient


def _mean(values: object) -> float:
    vals = list(values)  # type: ignore[call-overload]
    return sum(vals) / len(vals) if vals else 0.0


@dataclass
class AutoPlan:
    """The chosen prediction, the runner-up, everything that fit and what did not."""

    chosen: Prediction
    runner_up: Prediction | None
    fitting: list[Prediction]
    over_budget: list[Prediction]
    invalid: list[tuple[ShardingPolicy, str]]
    budget: float | None
    seconds: float
    rates_source: str
    considered: list[Prediction] = field(default_factory=list)


def choose(
    model: GPTConfig,
    world: int,
    per_device_batch: int,
    accum: int = 1,
    budget: float | None = None,
    cost: object = None,
    ranks_per_host: int | None = None,
    policies: Sequence[ShardingPolicy] | None = None,
    plan: ShardingPlan = GPT_PLAN,
    itemsize: int = 4,
    pad_vocab: bool = False,
    mixed: bool = True,
    precision: str = "f32",
    grad_reduce: str = "f32",
) -> AutoPlan:
    """The fastest policy (predicted tokens/s) on `world` ranks whose predicted memory per
    rank fits `budget` bytes (None: any); raises PlanError naming the smallest budget that
    fits when none does, or when no policy suits the grid at all. `pad_vocab`: the
    model's vocabulary is the tokenizer's ids, padded per grid as the trainer pads it (to
    a multiple of lcm(8, data replicas)). The policies priced: `policies`, or every mix
    of dp / zero / fsdp over the parameter groups per tp (`auto_policies`; `mixed=False`:
    the hand policies). Exact by enumeration: the groups are few. `precision`,
    `grad_reduce`: `predict`'s."""
    from shardc.passes.cost_model import CostModel, load_rates

    start = time.perf_counter()
    cm = cost if cost is not None else CostModel(load_rates())

    def padded(grid: Grid) -> GPTConfig:
        if not pad_vocab:
            return model
        pad = math.lcm(8, grid.batch)
        return replace(model, vocab_size=-(-model.vocab_size // pad) * pad)

    def check(policy: ShardingPolicy, grid: Grid) -> None:
        split = {group_of(s.path) for s in param_specs(model) if policy.uses_tp(s.path)} if policy.tp > 1 else set()
        if "attention" in split and model.n_head % policy.tp:  # whole heads per rank; none split: any count
            raise GridError(f"tp={policy.tp} does not divide the {model.n_head} heads")
        if "mlp" in split and model.n_mlp % policy.tp:
            raise GridError(f"tp={policy.tp} does not divide the MLP's {model.n_mlp} hidden units")
        validate_layouts(param_specs(padded(grid)), plan, policy, grid)

    if policies is None:
        policies = auto_policies(param_specs(model), plan, world, mixed)
    valid, invalid = _valid_policies(policies, world, ranks_per_host, check, (GridError, ShardingConfigError))
    considered = [predict(padded(grid), policy, grid, per_device_batch, accum, cm, itemsize, plan, precision, grad_reduce) for policy, grid in valid]
    return _pick(considered, invalid, world, budget, cm, start)


def _valid_policies(
    policies: Sequence[ShardingPolicy], world: int, ranks_per_host: int | None,
    check: Callable[[ShardingPolicy, Grid], None], errors: tuple[type[Exception], ...],
) -> tuple[list[tuple[ShardingPolicy, Grid]], list[tuple[ShardingPolicy, str]]]:
    """The policies whose grid on `world` ranks `check` accepts, with their grids, and the
    others with why not (`check` raises ShardingValidationError, or one of `errors`).
    ZeRO and FSDP are passed over where the grid leaves one data replica: they split
    nothing there, the plan is plain tp."""
    valid: list[tuple[ShardingPolicy, Grid]] = []
    invalid: list[tuple[ShardingPolicy, str]] = []
    for policy in policies:
        try:
            grid = make_grid(world, policy.tp, ranks_per_host)
            if grid.batch == 1 and policy.uses_zero():
                continue
            check(policy, grid)
        except ShardingValidationError as e:
            if not policy.overrides:  # a mix's reason is its plain policies'
                invalid.append((policy, e.failures[0]))
            continue
        except errors as e:
            if not policy.overrides:
                invalid.append((policy, str(e)))
            continue
        valid.append((policy, grid))
    return valid, invalid


def _pick(considered: list[Prediction], invalid: list[tuple[ShardingPolicy, str]], world: int, budget: float | None, cm: Any, start: float) -> AutoPlan:
    """The fastest of `considered` that fits `budget`, or the PlanError line."""
    if not considered:
        reason = invalid[0][1] if invalid else "no policy"
        raise PlanError(f"no sharding policy suits {world} rank{'s' if world > 1 else ''}: {reason}")
    fitting = [p for p in considered if budget is None or p.memory.total <= budget]
    if not fitting:
        from shardc.passes.auto_sharding import format_size

        least = min(considered, key=lambda p: p.memory.total)
        asked, needed = format_size(budget or 0), format_size(least.memory.total)
        if asked == needed:  # within the rounding: in bytes
            asked, needed = f"{math.floor(budget or 0)}B", f"{math.ceil(least.memory.total)}B"
        raise PlanError(
            f"memory budget {asked} per rank fits no plan on {world} rank{'s' if world > 1 else ''}: "
            f"the smallest that fits is {needed} ({least.name})"
        )
    fitting.sort(key=lambda p: (-p.tokens_per_s, p.memory.total, len(p.policy.overrides)))
    over = [p for p in considered if p not in fitting]
    source = getattr(getattr(cm, "rates", None), "source", "default")
    return AutoPlan(fitting[0], fitting[1] if len(fitting) > 1 else None, fitting, over, invalid, budget, time.perf_counter() - start, source, considered)


def _check_heads(shape: ModuleShape, policy: ShardingPolicy, grid: Grid) -> None:
    """Each rank of a tp group must hold whole attention heads: a split of an attention
    block's projections that cuts its heads raises GridError."""
    params = {s.path: s for s in shape.params}
    for att in shape.attention:
        split = any(SHARD in (d or ()) for w in att.weights if w in params for d in resolve(params[w].axes, shape.plan, policy, w).compute)
        if split and att.heads % grid.shard:
            raise GridError(f"tp={grid.shard} does not divide the {att.heads} attention heads of {shape.name}")


def choose_module(
    shape: ModuleShape,
    world: int,
    per_device_batch: int,
    accum: int = 1,
    budget: float | None = None,
    cost: object = None,
    ranks_per_host: int | None = None,
    check: Callable[[ShardingPolicy, Grid], None] | None = None,
    itemsize: int = 4,
    mixed: bool = True,
    precision: str = "f32",
    grad_reduce: str = "f32",
) -> AutoPlan:
    """`choose` for a torch module (every mix over its parameter groups, as `choose`): every hand policy on `world` ranks whose layouts the
    grid takes (`validate_layouts`) and `check` accepts (a ValueError: why not, e.g. a tp
    that cuts attention heads), priced by `predict_module`. A tp the module's logical
    axes split nothing for is left out and said so: it would compute the whole model on
    every rank of a tp group; so are ZeRO and FSDP where no axis has a ZeRO rule (they
    would be DP with extra copies)."""
    from shardc.passes.cost_model import CostModel, load_rates

    start = time.perf_counter()
    cm = cost if cost is not None else CostModel(load_rates())
    splits_tp = any(SHARD in (d or ()) for s in shape.params for d in resolve(s.axes, shape.plan, ShardingPolicy(2, False, False)).compute)
    splits_zero = any(BATCH in (d or ()) for s in shape.params for d in resolve(s.axes, shape.plan, ShardingPolicy(1, True, False)).update)

    def check_policy(policy: ShardingPolicy, grid: Grid) -> None:
        if policy.tp > 1 and not splits_tp:
            raise GridError(f"{shape.name}'s logical axes split nothing over shard")
        if policy.uses_zero() and not splits_zero:
            raise GridError(f"{shape.name}'s logical axes name nothing ZeRO splits over batch")
        validate_layouts(shape.params, shape.plan, policy, grid)
        _check_heads(shape, policy, grid)
        if check is not None:
            check(policy, grid)

    # ValueError: GridError, ShardingConfigError, the check's
    valid, invalid = _valid_policies(auto_policies(shape.params, shape.plan, world, mixed), world, ranks_per_host, check_policy, (ValueError,))
    considered = [predict_module(shape, policy, grid, per_device_batch, accum, cm, itemsize, precision, grad_reduce) for policy, grid in valid]
    return _pick(considered, invalid, world, budget, cm, start)


# -----------------------------------------------------------------------------------------
# Printing
# -----------------------------------------------------------------------------------------


def size_text(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


def _spec_text(spec: object, grid: Grid) -> str:
    """A partition spec with the grid's axes of size 1 left out: `[-, batch]`."""
    dims = [[a for a in (d or ()) if grid.axis_size(a) > 1] for d in spec]  # type: ignore[attr-defined]
    return "[" + ", ".join("+".join(d) if d else "-" for d in dims) + "]"


def parameter_groups(specs: Sequence[Any], policy: ShardingPolicy, grid: Grid, plan: ShardingPlan = GPT_PLAN) -> list[str]:
    """One line per parameter group (layers folded: `h.*.mlp.c_fc.weight x4`) with its
    storage / compute / update layouts; parameters kept whole in all three are one line.
    `specs`: the parameters (path, shape, logical axes), or a GPTConfig for its own."""
    groups: dict[str, list[object]] = {}
    whole: list[str] = []
    if isinstance(specs, GPTConfig):
        specs = param_specs(specs)
    for s in specs:
        name = re.sub(r"(^|\.)\d+\.", r"\1*.", s.path)
        lay = resolve(s.axes, plan, policy, s.path)
        texts = tuple(_spec_text(x, grid) for x in (lay.storage, lay.compute, lay.update))
        if all(t.strip("[]").replace("-", "").replace(", ", "") == "" for t in texts):
            if name not in whole:
                whole.append(name)
            continue
        groups.setdefault(name, [s, texts, 0])[2] += 1  # type: ignore[operator]
    lines = []
    for name, (s, texts, count) in groups.items():
        times = f" x{count}" if count > 1 else ""
        if len(set(texts)) == 1:
            where = f"all {texts[0]}"
        else:
            where = f"storage {texts[0]} compute {texts[1]} update {texts[2]}"
        lines.append(f"    {name}{times} {tuple(s.shape)}: {where}")  # type: ignore[attr-defined]
    if len(whole) > 6:  # a model with few split parameters: the count and the ends
        lines.append(f"    replicated: {len(whole)} groups ({', '.join(whole[:3])}, ..., {whole[-1]})")
    elif whole:
        lines.append(f"    replicated: {', '.join(whole)}")
    return lines


def prediction_text(p: Prediction) -> str:
    m = p.memory
    precision = " in bf16 (float32 masters)" if p.precision == "bf16" else ""
    if p.grad_reduce == "bf16" and p.grid.batch > 1:
        precision += ", gradients reduced in bf16"
    return (
        f"{p.name}{precision} on grid {p.grid}: {p.step_s * 1e3:.1f} ms/step ({p.compute_s * 1e3:.1f} compute + {p.comm_s * 1e3:.1f} collectives), "
        f"{p.tokens_per_s:,.0f} tokens/s, {size_text(m.total)}/rank "
        f"(state {size_text(m.state.total)}, activations {size_text(m.activations)}, transient {size_text(m.transient)})"
    )


def traded(chosen: Prediction, other: Prediction) -> str:
    """What the chosen plan gives up, or gains, against another."""
    speed = chosen.tokens_per_s / other.tokens_per_s
    mem = chosen.memory.total / other.memory.total
    return (
        f"{chosen.name} vs {other.name}: {speed:.2f}x the tokens/s at {mem:.2f}x the memory per rank"
    )


def plan_lines(plan: AutoPlan, tool: str = "shardc-train") -> list[str]:
    c = plan.chosen
    budget = f"memory budget {size_text(plan.budget)}/rank" if plan.budget is not None else "no memory budget"
    head = (
        f"{tool}: auto plan for {c.grid.size} rank{'s' if c.grid.size > 1 else ''} ({budget}; "
        f"{len(plan.considered)} policies priced, {len(plan.fitting)} fit, in {plan.seconds * 1e3:.0f} ms; rates: {plan.rates_source})"
    )
    lines = [head, f"  chosen: {prediction_text(c)}"]
    if c.policy.overrides:
        lines.append("    layouts per group: " + ", ".join(group_kinds(c.policy, c.specs)))
    lines += parameter_groups(c.specs, c.policy, c.grid, c.plan)
    if c.collectives:
        lines.append("    collectives/step: " + ", ".join(f"{x.count} {x.kind} over {x.axis} ({size_text(x.nbytes)})" for x in c.collectives))
    if plan.runner_up is not None:
        lines.append(f"  runner-up: {prediction_text(plan.runner_up)}")
        lines.append(f"  traded: {traded(c, plan.runner_up)}")
    if plan.invalid:
        names = ", ".join(policy_name(p) for p, _ in plan.invalid)
        lines.append(f"  not on this grid: {names} ({plan.invalid[0][1]})")
    faster = [p for p in plan.over_budget if p.tokens_per_s > c.tokens_per_s]
    if faster:
        best = max(faster, key=lambda p: p.tokens_per_s)
        lines.append(f"  over budget: {best.name} ({best.tokens_per_s:,.0f} tokens/s, {size_text(best.memory.total)}/rank); {traded(c, best)}")
    return lines


# -----------------------------------------------------------------------------------------
# The job: plan, train, measure
# -----------------------------------------------------------------------------------------


def host_cost_model(cost: object, ranks_per_host: int | None) -> Any:
    """`cost` (a CostModel; None: the cached rates) for ranks running `ranks_per_host` to
    a host (None: a core each, as `--plan-only --world N` plans a cluster) with this
    host's cores (`shardc.host.physical_cores`, those this process may use):
    more ranks than cores share them (`CostModel.on_host`)."""
    from shardc import host
    from shardc.passes.cost_model import CostModel, load_rates

    cm: CostModel = cost if cost is not None else CostModel(load_rates())  # type: ignore[assignment]
    return cm if ranks_per_host is None else cm.on_host(ranks_per_host, host.physical_cores())


def plan_job(job: object, world: int, ranks_per_host: int | None = None) -> AutoPlan:
    """The auto plan of a `shardc-train` job (`shardc.training.job.Job`) on `world` ranks:
    its model flags, its tokenizer's vocabulary, `--per-device-batch`, `--accum`,
    `--memory-budget`, `--precision` and `--grad-reduce`, priced for `ranks_per_host` ranks sharing this host's cores
    (`host_cost_model`; None: a core each). Problems as JobError lines."""
    from shardc.training.job import JobError
    from shardc.training.tokenizer import make_tokenizer

    a = job.settings  # type: ignore[attr-defined]
    try:
        tok = make_tokenizer(a.tokenizer, job.text(), a.vocab_size)  # type: ignore[attr-defined]
        model = GPTConfig(a.n_layer, a.n_head, a.n_embd, a.block_size, tok.n_tokens)
        cost = host_cost_model(None, ranks_per_host)
        precision, grad_reduce = getattr(a, "precision", "f32"), getattr(a, "grad_reduce", "f32")
        return choose(model, world, a.per_device_batch, a.accum, a.memory_budget, cost, ranks_per_host=ranks_per_host, pad_vocab=True, precision=precision, grad_reduce=grad_reduce)
    except ValueError as e:  # PlanError and the configuration's errors
        raise JobError(str(e)) from None


class Measurement:
    """Peak memory of a job's training, two ways. `compiled(trace)` (the job calls it once
    the step is compiled) takes the resident-set baseline, resets the kernel's peak mark
    (`/proc/self/clear_refs`) and, with `trace` (the rank whose progress sees the steps),
    starts tracemalloc, which numpy reports its buffers to. At the first step's report
    (`watch`) the numpy bytes live are the state (the first step's one-time allocations,
    imports and generated code, are left out), and the trace's peak restarts; at the
    second's, that peak above what was live at the first is the step's activations and
    copies, and tracing stops, so only two steps run slower (the step time is the median
    of the later ones). `traced_bytes()`: state + step peak, what the prediction models;
    `peak_bytes()`: the resident-set peak above the baseline, which also holds the
    runtime's own pages (libraries, BLAS buffers, the first step's imports)."""

    TRACED_STEPS = 2
    """The steps whose reports `stepped` reads the trace at; the second's stops it."""

    def __init__(self) -> None:
        self.baseline: int | None = None
        self.peak: int | None = None
        self.traced: int | None = None
        self.live: int | None = None
        self.numpy_live = 0
        self.untraced = 0

    @staticmethod
    def _status(field_name: str) -> int | None:
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith(field_name + ":"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def compiled(self, trace: bool = False, untraced_bytes: int = 0) -> None:
        """`untraced_bytes`: state made before tracing that numpy does not report (a torch
        module's parameters, which the state's arrays view), counted as live state."""
        import gc
        import tracemalloc

        self.untraced = untraced_bytes

        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        self.baseline = self._status("VmRSS")
        if trace and not tracemalloc.is_tracing():
            tracemalloc.start()

    def stepped(self) -> None:
        import tracemalloc

        if not tracemalloc.is_tracing() or self.traced is not None:
            return
        if self.live is None:
            import numpy as np

            domain = np.lib.tracemalloc_domain
            self.numpy_live = self.untraced + sum(t.size for t in tracemalloc.take_snapshot().traces if t.domain == domain)
            self.live = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            return
        self.traced = self.numpy_live + max(tracemalloc.get_traced_memory()[1] - self.live, 0)
        tracemalloc.stop()

    def stop(self) -> None:
        """End tracing where the run had fewer than two steps."""
        import tracemalloc

        if tracemalloc.is_tracing() and self.traced is None:
            tracemalloc.stop()

    def watch(self, progress: Any) -> Any:
        """`progress` (a step callback with `close`) that also ends the first step's trace."""
        return _Watched(progress, self)

    def trained(self) -> None:
        self.stop()
        if self.peak is None:
            self.peak = self._status("VmHWM")

    def peak_bytes(self) -> int | None:
        self.trained()
        return None if self.peak is None or self.baseline is None else max(self.peak - self.baseline, 0)

    def traced_bytes(self) -> int | None:
        self.stop()
        return self.traced


class _Watched:
    """`progress` that also tells `measure` of each step. `quiet_steps`: the steps whose
    call stops the trace; on simulated ranks the other threads wait at a barrier
    meanwhile (`trainer.simulated_step_hooks`: stopping tracemalloc while another
    thread allocates in numpy crashes CPython 3.11)."""

    def __init__(self, progress: Any, measure: Measurement):
        import tracemalloc

        self.progress, self.measure = progress, measure
        self.quiet_steps = Measurement.TRACED_STEPS if tracemalloc.is_tracing() and measure.traced is None else 0

    def __call__(self, step: Any) -> None:
        self.measure.stepped()
        self.progress(step)

    def close(self) -> None:
        self.progress.close()


def measured_step_seconds(out: str) -> float | None:
    """The median seconds of the run's steps after the two `Measurement` traces (after the
    first when there are fewer than 4; loss.csv under `--out`)."""
    import csv
    import statistics

    try:
        with open(f"{out}/loss.csv") as f:
            secs = [float(r["seconds"]) for r in csv.DictReader(f)]
    except (OSError, KeyError, ValueError):
        return None
    secs = secs[2:] if len(secs) >= 4 else secs[1:] or secs
    return statistics.median(secs) if secs else None


def measured_line(plan: AutoPlan, step_s: float | None, traced: int | None, peak: int | None, simulated: int | None, tool: str = "shardc-train") -> str:
    """The measured step time and memory per rank beside the prediction (`simulated`: the
    ranks were threads of one process, whose memory is shared out)."""
    c = plan.chosen
    step = "n/a" if step_s is None else f"{step_s * 1e3:.1f} ms/step"
    threads = "; simulated ranks share one interpreter: --np times them apart" if simulated else ""
    traced_text = "n/a" if traced is None else size_text(traced)
    rss = "n/a" if peak is None else size_text(peak)
    return (
        f"{tool}: measured {c.name}: {step} (predicted {c.step_s * 1e3:.1f}{threads}), "
        f"memory {traced_text}/rank (state + a step's peak) (predicted {size_text(c.memory.total)}), "
        f"resident peak {rss}/rank above the compiled step"
    )


__all__ = [
    "Measurement", "host_cost_model", "measured_line", "measured_step_seconds", "plan_job",
    "AttentionShape", "LinearShape", "ModuleShape", "choose_module", "predict_module",
    "AutoPlan", "Collective", "MemoryEstimate", "PlanError", "Prediction", "choose", "hand_policies",
    "ParamGroup", "auto_policies", "group_kinds", "mixed_policies", "param_groups",
    "parameter_groups", "plan_lines", "policy_name", "predict", "prediction_text", "size_text", "traded",
]
