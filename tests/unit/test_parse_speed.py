"""The fast parsing path (`shardc.ir.fast_lexer`, `shardc.ir.fast_parser`) gives what
xDSL's lexer and parser give, only sooner."""

from __future__ import annotations

import time

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input
from xdsl.utils.mlir_lexer import MLIRLexer

from shardc.context import make_context
from shardc.dialects.affine import MLIRAffineParsing
from shardc.ir.fast_lexer import _STRING, FastLexer  # pyright: ignore[reportPrivateUsage]
from shardc.ir.fast_parser import balanced_end
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.testing.gen_programs import generate_chain, generate_program

ODD = (
    '%0 = "a.b"() {x = "s\\n\\"q", y = 0x1F, z = 1.5e3, w = 1e5, v = -3, u = @s, t = @"x y",'
    " d = #a.b<4x?xf32>, e = !t.u, f = ^bb0, g = %a#1, h = ->, i = {-#, j = #-}, k = ... // c\n"
    ' 0x 0xg 00x1 1.2.3 %% # ! ^ @ $ "\\ff" "" tensor<4x8xf32> 4x?x8 é'
)


def _token(lexer: MLIRLexer, pos: int) -> object:
    lexer.pos = pos
    try:
        tok = lexer.lex()
    except ParseError as exc:
        return ("error", exc.msg)
    return (tok.kind, tok.span.start, tok.span.end, tok.text, lexer.pos, type(tok.span).__name__ == "StringLiteral")


def test_fast_lexer_lexes_every_position_as_xdsl() -> None:
    source = Input(ODD, "odd")
    ours, theirs = FastLexer(source), MLIRLexer(source)
    # (xDSL's lexer hangs on an unterminated string literal: those positions are left out)
    positions = [p for p in range(len(ODD) + 2) if ODD[p : p + 1] != '"' or _STRING.match(ODD, p)]
    for pos in positions + positions:  # the second time from the cache
        assert _token(ours, pos) == _token(theirs, pos), (pos, ODD[pos : pos + 10])


def test_unterminated_string_is_an_error_not_a_hang() -> None:
    # xDSL's string regex backtracks exponentially here
    lexer = FastLexer(Input('"' + "a" * 60, "s"))
    start = time.perf_counter()
    with pytest.raises(ParseError, match="End of file reached before closing string literal"):
        lexer.lex()
    assert time.perf_counter() - start < 1.0


def test_balanced_end() -> None:
    text = 'x<(d0) -> (d0), "a>b", [1]> rest'
    assert text[: balanced_end(text, 1)] == 'x<(d0) -> (d0), "a>b", [1]>'
    assert balanced_end("<<", 0) == -1


class _Reference(MLIRAffineParsing, Parser):
    """xDSL's parser with MLIR's affine expressions: what LocatingParser must match."""


def _printed(parser_class: type[Parser], text: str, generic: bool) -> str:
    module = parser_class(make_context(allow_unregistered=True), text, "f.mlir").parse_module()
    return module_to_string(module, generic=generic)


@pytest.mark.parametrize(
    "text",
    [generate_chain(30), generate_program(3, 10), generate_program(11, 10)],
    ids=["chain", "program3", "program11"],
)
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_locating_parser_builds_what_xdsl_builds(text: str, generic: bool) -> None:
    assert _printed(LocatingParser, text, generic) == _printed(_Reference, text, generic)


def test_cached_attributes_follow_aliases() -> None:
    """The same text means different attributes under different alias definitions."""
    ctx = make_context()
    body = 'func.func @f() attributes {m = [#a]} {\n  return\n}\n'
    first = LocatingParser(ctx, "#a = affine_map<(d0) -> (d0)>\n" + body, "x").parse_module()
    second = LocatingParser(ctx, "#a = affine_map<(d0) -> (d0 + 1)>\n" + body, "y").parse_module()
    assert "(d0) -> (d0)>" in module_to_string(first)
    assert "(d0) -> (d0 + 1)>" in module_to_string(second)


def test_repeated_types_share_one_instance() -> None:
    text = "func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {\n  return\n}\n"
    module = LocatingParser(make_context(), text, "t").parse_module()
    func = module.body.block.first_op
    assert func is not None
    args = func.regions[0].blocks.first.args  # type: ignore[union-attr]
    assert args[0].type is args[1].type


def test_parse_errors_keep_their_messages() -> None:
    text = "func.func @f(%a: tensor<4x8xf32>) {\n  %0 = arith.addi %a, %a : tensor<4x8xf32\n}\n"
    with pytest.raises(ParseError) as ours:
        LocatingParser(make_context(), text, "e").parse_module()
    with pytest.raises(ParseError) as theirs:
        _Reference(make_context(), text, "e").parse_module()
    assert ours.value.msg == theirs.value.msg
    assert ours.value.span.start == theirs.value.span.start
