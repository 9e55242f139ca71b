"""The training step compiled in two parts, `@train_step` on one rank and `@adamw_step`
with `@loss` on another (`shardc.runtime.codegen.parts`): under `mpiexec` the job's first compile
no longer leaves every rank but one waiting (issue #16). The parts are of about equal
cost (the GPT step at n_layer 12: passes 2.2 s and 1.9 s of CPU), and their lowered
functions are those of the whole step module, byte for byte
(tests/unit/training/test_step_parts.py).

`StepProgram.build` takes this path under a communicator of several ranks; alone, or
to keep every stage's text (which needs the whole module), it compiles the whole module.
"""

from __future__ import annotations

from typing import Any

from shardc.training.axis import ShardingPlan, ShardingPolicy
from shardc.training.gpt import GPTConfig
from shardc.training.mesh import Grid
from shardc.training.optimizer import AdamWConfig
from shardc.training.pipeline import lower_step, step_pipeline

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


def _part(model: GPTConfig, batch: int, grid: Grid, policy: ShardingPolicy, plan: ShardingPlan, dtype: str, opt: AdamWConfig, names: tuple[str, ...], passes: tuple[str, ...] = step_pipeline()) -> Any:
    def build() -> tuple[Any, dict[str, Any]]:
        from shardc.training.step import Sharded, build_step_module

        module = build_step_module(model, batch, dtype, opt, Sharded(grid, plan, policy), only=names)
        return module, lower_step(module, passes=passes)[1]

    return build


def compile_parted(
    model: GPTConfig, batch: int, grid: Grid, policy: ShardingPolicy, plan: ShardingPlan, dtype: str, opt: AdamWConfig, donate: Any, world: Any, precision: str = "f32", grad_reduce: str = "f32"
) -> Any:
    """The step through the compile cache, its parts (`PARTS`) compiled on different
    ranks of `world` on a miss (`shardc.runtime.codegen.parts.compile_parts_cached`); what
    `StepProgram.build` takes under a communicator of several ranks."""
    from shardc.runtime.codegen.cache import make_key
    from shardc.runtime.codegen.parts import compile_parts_cached

    passes = step_pipeline(precision, grad_reduce)
    key = make_key("gpt-step", model=model, batch=batch, grid=grid, policy=policy, plan=plan, dtype=dtype, opt=opt, pipeline=passes, fuse=True, donate=donate, parts=PARTS)
    parts = [_part(model, batch, grid, policy, plan, dtype, opt, names, passes) for names in PARTS]
    return compile_parts_cached(key, parts, _merge_meta, "train_step", world=world, donate=donate)


__all__ = ["PARTS", "compile_parted"]
