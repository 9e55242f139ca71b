"""The GPT step's cold compile without its passes: building the step module, printing
the lowered module, code generation (fusion, emitters, `del` placement, compiling the
generated Python) and the cache entry, as CPU seconds of one process (less sensitive
to a shared machine than `bench/compile_startup.py`'s wall clock).

    python bench/cold_codegen.py                        # n_layer 12, n_embd 768, 3 runs
    python bench/cold_codegen.py --baseline DIR --pairs 5   # alternating with DIR's shardc

Each run is a fresh process compiling into an empty cache directory (one rank's
program of the 2-rank ZeRO grid `bench/compile_startup.py` uses); the pipeline's passes
are timed apart and subtracted. With `--baseline`, runs alternate (baseline, this tree,
...) and the ratio of each pair is printed with their median and range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _child(n_layer: int, n_embd: int, n_head: int) -> None:
    from shardc.training import pipeline, spmd
    from shardc.training.gpt import GPTConfig
    from shardc.training.trainer import TrainingConfig

    passes = [0.0]
    run_pipeline = pipeline.run_pipeline

    def timed(*args: object, **kw: object) -> object:
        t = time.process_time()
        try:
            return run_pipeline(*args, **kw)  # type: ignore[arg-type]
        finally:
            passes[0] += time.process_time() - t

    pipeline.run_pipeline = timed  # type: ignore[assignment]  # lower_step's (shardc.training.pipeline)
    import shardc.ir.printer  # noqa: F401  (imports are not the compile's)
    import shardc.runtime.codegen.compile  # noqa: F401
    import shardc.training.step  # noqa: F401

    cfg = TrainingConfig(GPTConfig(n_layer, n_head, n_embd, 32, 64), per_device_batch=8, steps=1)
    grid = cfg.grid(2, 2)
    t = time.process_time()
    prog = spmd.StepProgram.build(cfg.model, cfg.microbatch(grid), grid, cfg.policy, cfg.plan, cfg.dtype, cfg.opt, False, None)
    total = time.process_time() - t
    assert prog.cached == "compiled", prog.cached
    print(json.dumps({"total": total, "passes": passes[0], "rest": total - passes[0]}))


def _run(args: argparse.Namespace, code: str | None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
    env["SHARDC_CACHE_DIR"] = tempfile.mkdtemp(prefix="shardc_cold_codegen_")
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([code, *filter(None, [env.get("PYTHONPATH")])])
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--n-layer", str(args.n_layer), "--n-embd", str(args.n_embd), "--n-head", str(args.n_head)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        sys.exit(f"cold_codegen.py: the compile failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--pairs", type=int, default=3, help="runs (pairs with --baseline)")
    ap.add_argument("--baseline", metavar="DIR", help="a tree holding another shardc: runs alternate with it")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pairs < 1:
        sys.exit("cold_codegen.py: --pairs must be at least 1")
    if args.child:
        _child(args.n_layer, args.n_embd, args.n_head)
        return
    if args.baseline is not None and not os.path.isdir(os.path.join(args.baseline, "shardc")):
        sys.exit(f"cold_codegen.py: {args.baseline} holds no shardc package")
    print(f"GPT step n_layer {args.n_layer}, n_embd {args.n_embd}: CPU seconds of the cold compile, passes apart")
    ratios = []
    for k in range(args.pairs):
        before = _run(args, args.baseline) if args.baseline else None
        after = _run(args, None)
        line = f"run {k}: this tree rest {after['rest']:.3f} s (passes {after['passes']:.3f})"
        if before is not None:
            ratios.append(after["rest"] / before["rest"])
            line += f"; baseline rest {before['rest']:.3f} s (passes {before['passes']:.3f}); ratio {ratios[-1]:.3f}"
        print(line, flush=True)
    if ratios:
        print(f"rest, this tree / baseline: median {statistics.median(ratios):.3f}x, range {min(ratios):.3f}-{max(ratios):.3f}x over {len(ratios)} pairs")


if __name__ == "__main__":
    main()
