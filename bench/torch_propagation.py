"""sharding-propagation + shard-partition time on torch-mlir's GPT forward against the
size of the program, to show it stays linear: the same model at 1 to 8 layers, the
tokens' batch split over one grid axis and the MLP weights Megatron-style over the other
(2x2 grid). Prints ops, milliseconds and microseconds per op for each size. Not a test;
needs the [torch] extra.

    python bench/torch_propagation.py [--layers 1,2,4,8] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from shardc.context import make_context
from shardc.frontends.annotate import annotate_arguments
from shardc.ir.locations import LocatingParser
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing import torch_models as tm


def _plan(n_layer: int) -> dict[str, list[list[int]]]:
    plan: dict[str, list[list[int]]] = {"idx": [[0]]}
    for i in range(n_layer):
        plan[f"blocks.{i}.fc.weight"] = [[1]]
        plan[f"blocks.{i}.out.weight"] = [[], [1]]
    return plan


def _count_ops(module) -> int:
    return sum(1 for _ in module.walk()) - 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", default="1,2,4,8")
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    print(f"{'layers':>6} {'ops':>7} {'propagate ms':>13} {'partition ms':>13} {'us/op':>7}")
    for n_layer in (int(x) for x in a.layers.split(",")):
        config = tm.GPTConfig(vocab_size=64, block_size=16, n_layer=n_layer, n_head=2, n_embd=32)
        _, _, exported = tm.gpt_export(config, batch=4)
        text = annotate_arguments(exported.text, (2, 2), _plan(n_layer), names=exported.arg_names)
        t_prop: list[float] = []
        t_part: list[float] = []
        ops = 0
        for _ in range(a.runs):
            ctx = make_context()
            module = LocatingParser(ctx, text, "gpt").parse_module()
            ops = _count_ops(module)
            t0 = time.perf_counter()
            ShardingPropagationPass().apply(ctx, module)
            t1 = time.perf_counter()
            ShardPartitionPass().apply(ctx, module)
            t2 = time.perf_counter()
            t_prop.append(t1 - t0)
            t_part.append(t2 - t1)
        prop, part = statistics.median(t_prop), statistics.median(t_part)
        print(f"{n_layer:>6} {ops:>7} {prop * 1e3:>13.1f} {part * 1e3:>13.1f} {(prop + part) / ops * 1e6:>7.0f}")


if __name__ == "__main__":
    main()
