"""The training step compiled in two parts, `@train_step` on one rank and `@adamw_step`
with `@loss` on another (`shardc.runtime.parts`): under `mpiexec` the job's first compile
no longer leaves every rank but one waiting (issue #16). The parts are of about equal
cost (the GPT step at n_layer 12: passes 2.2 s and 1.9 s of CPU), and their lowered
functions are those of the whole step module, byte for byte
(tests/unit/training/test_step_parts.py).

`build_program` is `StepProgram.build` for a communicator of several ranks; alone, or
to keep every stage's text (which needs the whole module), it is `StepProgram.build`.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from shardc.training.axis import ShardingPlan, ShardingPolicy, resolve
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.mesh import Grid
from shardc.training.optimizer import AdamWConfig, step_donation
from shardc.training.spmd import PIPELINE, Stage, StepProgram, count_collectives, run_pipeline

PARTS: tuple[tuple[str, ...], ...] = (("train_step",), ("adamw_step", "loss"))
"""The step's functions by part, in the whole module's order."""


def _merge_meta(metas: list[dict[str, Any]]) -> dict[str, Any]:
    """Per function tables joined; each pass's seconds summed over the parts (the ranks'
    seconds together, not the wall clock: `part_passes` has each part's own)."""
    stages: list[list[Any]] = []
    for meta in metas:
        for k, (name, seconds) in enumerate(meta["stages"]):
            if k == len(stages):
                stages.append([name, 0.0])
            stages[k][1] += seconds
    out: dict[str, Any] = {"stages": stages, "part_passes": [sum(seconds for _, seconds in meta["stages"]) for meta in metas]}
    for table in ("shard_collectives", "collectives"):
        out[table] = {f: c for meta in metas for f, c in meta[table].items()}
    return out


def _part(model: GPTConfig, batch: int, grid: Grid, policy: ShardingPolicy, plan: ShardingPlan, dtype: str, opt: AdamWConfig, names: tuple[str, ...]) -> Any:
    def build() -> tuple[Any, dict[str, Any]]:
        from xdsl.dialects.builtin import ModuleOp

        from shardc.training.axis import StateArray, validate_layouts, validate_state
        from shardc.training.step import Sharded, build_adamw_step, build_loss, build_train_step

        sharded = Sharded(grid, plan, policy)
        # what `build_step_module` checks before it builds anything
        validate_layouts(param_specs(model), plan, policy, grid)
        validate_state([StateArray(n, (batch, model.block_size), sharded.data_spec(2)) for n in ("data/tokens", "data/targets")], grid)
        makers = {
            "train_step": lambda: build_train_step(model, batch, dtype, sharded),
            "adamw_step": lambda: build_adamw_step(model, opt, dtype, sharded),
            "loss": lambda: build_loss(model, batch, dtype, sharded),
        }
        module = ModuleOp([grid.grid_op(), *(makers[n]().func for n in names)])  # type: ignore[arg-type]
        lower_at = PIPELINE.index("convert-shard-to-mpi")
        stages = run_pipeline(module, PIPELINE[:lower_at])
        shard_level = count_collectives(module, by_axes=True)
        stages += run_pipeline(module, PIPELINE[lower_at:])[1:]
        return module, {"stages": [[st.name, st.seconds] for st in stages], "shard_collectives": shard_level, "collectives": count_collectives(module)}

    return build


def build_program(
    model: GPTConfig,
    batch: int,
    grid: Grid,
    policy: ShardingPolicy,
    plan: ShardingPlan,
    dtype: str = "float32",
    opt: AdamWConfig | None = None,
    keep_text: bool = False,
    world: Any = None,
) -> StepProgram:
    """`StepProgram.build`, the parts compiled on different ranks of `world` (rank 0
    decides: when it keeps the stage texts, every rank takes the whole-module path)."""
    from shardc.runtime.parts import compile_parts_cached

    n = 1 if world is None else world.Get_size()
    if n > 1:
        whole = world.bcast(keep_text, root=0) if world.Get_rank() == 0 else world.bcast(None, root=0)
    else:
        whole = True
    if whole:
        return StepProgram.build(model, batch, grid, policy, plan, dtype, opt, keep_text, world)
    opt = opt or AdamWConfig()
    t0 = time.perf_counter()
    specs = param_specs(model)
    donate = step_donation(len(specs))
    from shardc.runtime.cache import make_key

    key = make_key("gpt-step", model=model, batch=batch, grid=grid, policy=policy, plan=plan, dtype=dtype, opt=opt, pipeline=PIPELINE, fuse=True, donate=donate, parts=PARTS)
    parts = [_part(model, batch, grid, policy, plan, dtype, opt, names) for names in PARTS]
    got = compile_parts_cached(key, parts, _merge_meta, "train_step", world=world, donate=donate)
    prog = StepProgram(
        model, batch, grid, policy, plan, dtype, opt, got.module, got.compiled, [Stage(name, seconds) for name, seconds in got.meta["stages"]],
        _counters(got.meta["collectives"]), _counters(got.meta["shard_collectives"]), specs, [resolve(s.axes, plan, policy) for s in specs],
    )
    prog.compile_seconds = time.perf_counter() - t0
    prog.cached = got.source
    prog.check_signature()
    return prog


def _counters(table: dict[str, dict[str, int]]) -> dict[str, Counter[str]]:
    return {f: Counter(c) for f, c in table.items()}


__all__ = ["PARTS", "build_program"]
