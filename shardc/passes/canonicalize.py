"""`canonicalize`: folding, canonicalization patterns, constant uniquing and dead code
removal under MLIR's greedy driver (`shardc.passes.greedy`), with mlir-opt's options, so
that our output equals mlir-opt's op for op.

Each op's patterns are those its traits give (xDSL's) followed by those the registry
(`shardc.passes.fold_registry`) adds for MLIR patterns xDSL's dialects lack; its folder is
the registry's, falling back to xDSL's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait
from xdsl.utils.exceptions import PassFailedException

from shardc.passes.fold_registry import registered_patterns, replaces_native_patterns
from shardc.passes.gc_pause import paused_gc
from shardc.passes.greedy import NO_LIMIT, GreedyRewriteConfig, apply_patterns_greedily

PatternFilter = Callable[[RewritePattern], bool]


@dataclass
class CanonicalizationPatterns:
    """Every op's canonicalization patterns (MLIR collects them from all loaded ops),
    optionally filtered, cached per op class."""

    pattern_filter: PatternFilter | None = None
    _cache: dict[type[Operation], tuple[RewritePattern, ...]] = field(
        default_factory=dict[type[Operation], tuple[RewritePattern, ...]]
    )

    def patterns_for(self, op: Operation) -> Sequence[RewritePattern]:
        key = type(op)
        patterns = self._cache.get(key)
        if patterns is None:
            found = (
                []
                if replaces_native_patterns(key)
                else [
                    p
                    for trait in op.get_traits_of_type(HasCanonicalizationPatternsTrait)
                    for p in trait.get_patterns(key)
                ]
            )
            found.extend(registered_patterns(key))
            if self.pattern_filter is not None:
                found = [p for p in found if self.pattern_filter(p)]
            patterns = self._cache[key] = tuple(found)
        return patterns


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Canonicalize operations: folding, canonicalization patterns, constant uniquing and
    dead code removal, with mlir-opt's options and results."""

    name = "canonicalize"

    top_down: bool = True
    region_simplify: Literal["disabled", "normal", "aggressive"] = "normal"
    max_iterations: int = 10
    max_num_rewrites: int = NO_LIMIT
    test_convergence: bool = False
    disable_patterns: tuple[str, ...] = ()
    enable_patterns: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        config = GreedyRewriteConfig(
            top_down=self.top_down,
            region_simplify=self.region_simplify,
            max_iterations=self.max_iterations,
            max_num_rewrites=self.max_num_rewrites,
        )
        patterns = CanonicalizationPatterns(self._filter())
        with paused_gc():
            converged = apply_patterns_greedily(op, patterns, config=config, ctx=ctx)
        if self.test_convergence and not converged:
            raise PassFailedException("canonicalizer failed to converge")

    def _filter(self) -> PatternFilter | None:
        """Patterns are labelled by their class name (MLIR uses the C++ debug name)."""
        disabled, enabled = set(self.disable_patterns), set(self.enable_patterns)
        if not disabled and not enabled:
            return None

        def keep(pattern: RewritePattern) -> bool:
            label = type(pattern).__name__
            if enabled and label not in enabled:
                return False
            return label not in disabled

        return keep
