"""Logical axes, the sharding plan and policy, and the three layouts of a parameter.

A model names the dimensions of its parameters (`n_embd`, `heads`, `vocab`, ...); a
`ShardingPlan` says which names may be split: its TP rules over the `shard` mesh axis
(the layout the model computes in), its ZeRO rules over `batch` (extra splitting of
optimizer state and, with FSDP, of stored parameters). Without explicit ZeRO rules the
TP-split names are split over batch too. The execution's `ShardingPolicy` picks which
layouts are used:

  compute  TP rules only                       forward and backward
  update   compute + ZeRO rules if zero        optimizer step, moments, accumulated grads
  storage  update if fsdp, else compute        parameters between steps

A policy may differ per parameter group: `overrides` (`LayoutOverride`: an FQN regex and
its zero/fsdp/tp) pick another of the three for the parameters they match (FSDP for the big
matrices, plain data parallelism for norms and biases), so `resolve` takes the
parameter's path as well as its axes. TP's degree is one for the whole model, but a group
may turn it off (`tp=False`): its compute layout ignores the TP rules, so it is computed
whole on every `shard` rank (sharding propagation gathers or slices the activations at
the group's edges) while ZeRO/FSDP still split it over batch.

A dimension split over both axes is split over `shard` first, then `batch` within each
shard piece (`("shard", "batch")`, MLIR `split_axes = [[1, 0]]`), so a device's update
piece lies inside its compute piece: going from compute to update layout only needs
communication across batch replicas.

`validate_state` checks every state array (parameters, accumulated gradients, the two
AdamW moments) against the grid before anything is allocated: a dimension split k ways
must divide by k, and failures name the state path, shape and partition spec.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from shardc.training.mesh import BATCH, SHARD, Grid

if TYPE_CHECKING:  # the shard dialect is loaded only where IR is built (not on a cache hit)
    from xdsl.ir import SSAValue

    from shardc.dialects.shard import ShardingOp

MeshAxes = tuple[str, ...]


class PartitionSpec(tuple[MeshAxes | None, ...]):
    """Per tensor dimension, the mesh axes it is split over (major first), or None."""

    def __new__(cls, *dims: MeshAxes | str | None) -> PartitionSpec:
        norm: list[MeshAxes | None] = []
        for d in dims:
            if d is None or d == ():
                norm.append(None)
            elif isinstance(d, str):
                norm.append((d,))
            else:
                norm.append(tuple(d))
        return super().__new__(cls, norm)

    def __repr__(self) -> str:
        return "PartitionSpec(" + ", ".join(repr(d) for d in self) + ")"

    __str__ = __repr__

    def pieces(self, grid: Grid, dim: int) -> int:
        axes = self[dim]
        return math.prod(grid.axis_size(a) for a in axes) if axes else 1

    def split_axes(self) -> list[list[int]]:
        """MLIR `split_axes` (grid axis indices per dimension), trailing empties trimmed
        down to one entry (MLIR's parser rejects `split_axes = []`)."""
        out = [[Grid.axis_index(a) for a in (d or ())] for d in self]
        while len(out) > 1 and not out[-1]:
            out.pop()
        return out or [[]]


class ShardingConfigError(ValueError):
    """An invalid policy or plan."""


class ShardingValidationError(ValueError):
    """State arrays that do not divide over the grid; `failures` has one line each."""

    def __init__(self, failures: Sequence[str]):
        super().__init__("\n".join(failures))
        self.failures = list(failures)


@dataclass(frozen=True)
class ShardingPlan:
    """Logical-axis rules of a model: `tp_rules` map names to `shard`, `zero_rules` to
    `batch` (None: the names the TP rules split)."""

    tp_rules: Mapping[str, str] = field(default_factory=dict)
    zero_rules: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        for name, axis in self.tp_rules.items():
            if axis != SHARD:
                raise ShardingConfigError(f"TP rule {name!r} -> {axis!r}: TP rules map onto {SHARD!r}")
        for name, axis in (self.zero_rules or {}).items():
            if axis != BATCH:
                raise ShardingConfigError(f"ZeRO rule {name!r} -> {axis!r}: ZeRO rules map onto {BATCH!r}")

    def zero(self) -> Mapping[str, str]:
        if self.zero_rules is not None:
            return self.zero_rules
        return {name: BATCH for name in self.tp_rules}


# GPT: attention heads and the MLP hidden dimension are split for TP; the vocabulary is
# kept whole for TP (the tied embedding/LM head) but may be split for ZeRO storage.
GPT_PLAN = ShardingPlan(
    tp_rules={"heads": SHARD, "n_mlp": SHARD},
    zero_rules={"heads": BATCH, "n_mlp": BATCH, "vocab": BATCH},
)


GROUP_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("norms", ("norm", "ln_", "ln")),
    ("embeddings", ("wte", "wpe", "embed", "emb")),
    ("head", ("lm_head", "head", "classifier", "score")),
    ("attention", ("attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj", "query", "key", "value")),
    ("mlp", ("mlp", "ffn", "feed_forward", "intermediate", "fc", "w1", "w2", "w3")),
)
"""The parameter groups `--auto` chooses a layout kind for (and `--policy-override`
names), each by keywords searched in a parameter's FQN segments (the first group that
names one wins: a norm inside an attention block is a norm); parameters no group names
are `other`."""

GROUP_NAMES = (*(g for g, _ in GROUP_KEYWORDS), "other")
"""What a layout override's pattern may be instead of a regex: a group of `group_of`."""


def group_of(path: str) -> str:
    """The parameter group of FQN `path` (`GROUP_KEYWORDS`, else `other`)."""
    segments = path.lower().split(".")
    for group, words in GROUP_KEYWORDS:
        if any(seg == w or seg.startswith(w) or (len(w) > 3 and w in seg) for seg in segments for w in words):
            return group
    return "other"


@dataclass(frozen=True)
class LayoutOverride:
    """The parameters whose FQN `pattern` matches (`re.fullmatch`, as the plan's axis
    patterns) use ZeRO / FSDP as given, instead of the policy's own choice: FSDP for the
    big matrices, plain data parallelism for norms and biases. `tp=False` keeps them whole
    over `shard` (no TP for the group: a small attention beside a wide MLP). A pattern
    that is a group name (`GROUP_NAMES`: `attention`, `norms`, ...) stands for that group,
    so the per-group mix `--auto` prints can be given back as it is."""

    pattern: str
    zero: bool
    fsdp: bool = False
    name: str = field(default="", compare=False, repr=False)
    """What the pattern stands for in plan texts (`norms`), or empty: the pattern."""
    tp: bool = True

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except re.error as e:
            raise ShardingConfigError(f"layout override {self.pattern!r}: bad regex ({e})") from None
        if self.fsdp and not self.zero:
            raise ShardingConfigError(f"layout override {self.pattern!r}: fsdp requires zero")

    def matches(self, path: str) -> bool:
        """Whether the parameter `path` is one this override sets: in the group it names, or
        matched whole by its regex."""
        if self.pattern in GROUP_NAMES:
            return group_of(path) == self.pattern
        return re.fullmatch(self.pattern, path) is not None

    @property
    def kind(self) -> str:
        return layout_kind(self.zero, self.fsdp, self.tp)

    @property
    def label(self) -> str:
        """`NAME=KIND` (the group's name, else the pattern) as plans and policy lines print it."""
        return f"{self.name or self.pattern}={self.kind}"


def layout_kind(zero: bool, fsdp: bool, tp: bool = True) -> str:
    """`dp`, `zero` or `fsdp`: the name of a (zero, fsdp) choice, with `/notp` when the
    group is kept whole over `shard` (the `--policy-override` spelling)."""
    return ("fsdp" if fsdp else "zero" if zero else "dp") + ("" if tp else NO_TP_SUFFIX)


NO_TP_SUFFIX = "/notp"
"""What a layout name carries when its group does not use TP (`attention=dp/notp`)."""


LAYOUT_KINDS = {"dp": (False, False), "zero": (True, False), "fsdp": (True, True)}
"""The (zero, fsdp) choice each layout name stands for."""


@dataclass(frozen=True)
class ShardingPolicy:
    """How an execution uses the plan: TP degree, ZeRO (optimizer state and updates split
    over batch) and FSDP (stored parameters split over batch too; requires ZeRO), and per
    parameter group `overrides` of ZeRO/FSDP and TP on/off (the first whose pattern
    matches a parameter's FQN wins; the others use `zero`/`fsdp` and TP)."""

    tp: int = 1
    zero: bool = True
    fsdp: bool = False
    overrides: tuple[LayoutOverride, ...] = ()

    def __post_init__(self) -> None:
        if self.tp < 1:
            raise ShardingConfigError(f"tp must be positive, got {self.tp}")
        if self.fsdp and not self.zero:
            raise ShardingConfigError("fsdp=True requires zero=True")
        object.__setattr__(self, "overrides", tuple(self.overrides))

    def __repr__(self) -> str:  # a plain policy's repr (and compile-cache key) as before overrides
        more = f", overrides={self.overrides!r}" if self.overrides else ""
        return f"ShardingPolicy(tp={self.tp!r}, zero={self.zero!r}, fsdp={self.fsdp!r}{more})"

    def choice(self, path: str | None) -> tuple[bool, bool]:
        """(zero, fsdp) of the parameter `path`. A policy with overrides needs the path."""
        if self.overrides:
            if path is None:
                raise ShardingConfigError("a policy with per-parameter overrides resolves layouts by parameter path")
            for o in self.overrides:
                if o.matches(path):
                    return o.zero, o.fsdp
        return self.zero, self.fsdp

    def uses_tp(self, path: str | None) -> bool:
        """Whether the parameter `path` is split by the TP rules (its override's `tp`)."""
        if self.overrides and path is not None:
            for o in self.overrides:
                if o.matches(path):
                    return o.tp
        return True

    def uses_zero(self) -> bool:
        """Whether any parameter's layout is ZeRO's or FSDP's."""
        return self.zero or any(o.zero for o in self.overrides)

    def text(self) -> str:
        """`tp=2 zero=True fsdp=False`, then each override as `PATTERN=fsdp`."""
        head = f"tp={self.tp} zero={self.zero} fsdp={self.fsdp}"
        return " ".join([head, *(o.label for o in self.overrides)])


@dataclass(frozen=True)
class ParamLayouts:
    storage: PartitionSpec
    compute: PartitionSpec
    update: PartitionSpec

    @property
    def grads(self) -> PartitionSpec:
        """The gradient accumulator's layout: the update layout. With FSDP that is the
        storage layout (the seed's contract); with ZeRO alone we keep gradients split as
        well (ZeRO-2), so the step reduce-scatters them to their owners instead of
        all-reducing a replicated buffer of which the update reads 1/dp."""
        return self.update


def _assign(axes: Sequence[str], rules: Mapping[str, str], base: Sequence[MeshAxes]) -> list[MeshAxes]:
    """Add each rule's mesh axis to the first dimension whose name it matches, unless the
    array already uses that mesh axis (a mesh axis splits an array at most once)."""
    out = [tuple(b) for b in base]
    used = {a for b in out for a in b}
    for i, name in enumerate(axes):
        mesh_axis = rules.get(name)
        if mesh_axis is not None and mesh_axis not in used:
            out[i] = (*out[i], mesh_axis)
            used.add(mesh_axis)
    return out


def resolve(axes: Sequence[str], plan: ShardingPlan, policy: ShardingPolicy, path: str | None = None) -> ParamLayouts:
    """The storage, compute and update partition specs of a parameter with logical `axes`
    (and FQN `path`, which picks its policy's override, if any)."""
    zero, fsdp = policy.choice(path)
    compute = _assign(axes, plan.tp_rules if policy.uses_tp(path) else {}, [()] * len(axes))
    update = _assign(axes, plan.zero(), compute) if zero else compute
    storage = update if fsdp else compute
    return ParamLayouts(PartitionSpec(*storage), PartitionSpec(*compute), PartitionSpec(*update))


# ---------------------------------------------------------------------------------------
# The abstract training state
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateArray:
    path: str
    shape: tuple[int, ...]
    spec: PartitionSpec
    itemsize: int = 4

    def local_shape(self, grid: Grid) -> tuple[int, ...]:
        return tuple(n // self.spec.pieces(grid, i) for i, n in enumerate(self.shape))

    def local_bytes(self, grid: Grid) -> int:
        return math.prod(self.local_shape(grid)) * self.itemsize

    def check(self, grid: Grid) -> str | None:
        """The failure line, or None when every split dimension divides."""
        for i, n in enumerate(self.shape):
            k = self.spec.pieces(grid, i)
            if n % k:
                return (
                    f"state {self.path} of shape {self.shape} with partition spec {self.spec} "
                    f"does not fit grid {grid}: dimension {i} of size {n} is split {k} ways"
                )
        return None


class _HasAxes:  # the part of gpt.ParamSpec used here (path, shape, axes)
    path: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]


def abstract_state(params: Iterable[_HasAxes], plan: ShardingPlan, policy: ShardingPolicy, itemsize: int = 4) -> list[StateArray]:
    """Every persistent array of the training state with its layout: parameters and the
    gradient accumulator and AdamW's moments in update layout."""
    state: list[StateArray] = []
    params = list(params)
    for kind in ("params", "grads", "opt_state/mu", "opt_state/nu"):
        for p in params:
            lay = resolve(p.axes, plan, policy, p.path)
            spec = lay.storage if kind == "params" else lay.update
            state.append(StateArray(f"{kind}/{p.path}", tuple(p.shape), spec, itemsize))
    return state


def validate_state(state: Iterable[StateArray], grid: Grid) -> None:
    """Raise ShardingValidationError listing every array that does not divide."""
    failures = [f for s in state if (f := s.check(grid)) is not None]
    if failures:
        raise ShardingValidationError(failures)


def validate_layouts(params: Iterable[_HasAxes], plan: ShardingPlan, policy: ShardingPolicy, grid: Grid) -> None:
    """Check the storage, compute and update layouts of every parameter (the state) before
    anything is allocated. Compute layouts are implied: they split a subset of what the
    update layout splits."""
    if policy.tp != grid.shard:
        raise ShardingConfigError(f"policy tp={policy.tp} does not match the grid {grid}")
    params = list(params)
    check_overrides(params, policy)
    validate_state(abstract_state(params, plan, policy), grid)


def check_overrides(params: Iterable[_HasAxes], policy: ShardingPolicy) -> None:
    """Every override must match a parameter: a pattern that matches none is a typo."""
    paths = [p.path for p in params]
    for o in policy.overrides:
        if not any(o.matches(path) for path in paths):
            shown = ", ".join(paths[:4]) + (", ..." if len(paths) > 4 else "")
            raise ShardingConfigError(
                f"layout override {o.pattern!r} matches no parameter (the FQNs, matched whole: {shown}; or a group: {', '.join(GROUP_NAMES)})"
            )


@dataclass(frozen=True)
class StateBytes:
    """Per-rank persistent bytes of the training state."""

    params: int
    grads: int
    opt_state: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.opt_state


def per_rank_bytes(params: Iterable[_HasAxes], plan: ShardingPlan, policy: ShardingPolicy, grid: Grid, itemsize: int = 4) -> StateBytes:
    """Bytes each rank keeps between steps, assuming the layouts divide (validate first)."""
    totals = {"params": 0, "grads": 0, "opt_state": 0}
    for s in abstract_state(params, plan, policy, itemsize):
        totals[s.path.split("/")[0]] += s.local_bytes(grid)
    return StateBytes(**totals)


# ---------------------------------------------------------------------------------------
# Shard annotations
# ---------------------------------------------------------------------------------------


def sharding_op(grid: Grid, spec: PartitionSpec) -> ShardingOp:
    from shardc.dialects.shard import ShardingOp

    return ShardingOp(grid.name, spec.split_axes())


def annotate(fb: object, value: SSAValue, grid: Grid, spec: PartitionSpec, for_users: bool = False) -> SSAValue:
    """Append `shard.sharding` + `shard.shard` for `value` to the builder `fb` (anything with
    `add_op`) and return the annotated value."""
    sharding = sharding_op(grid, spec)
    fb.add_op(sharding)  # type: ignore[attr-defined]
    from shardc.dialects.shard import ShardOp

    shard = ShardOp(value, sharding.result, annotate_for_users=for_users)
    fb.add_op(shard)  # type: ignore[attr-defined]
    return shard.result
