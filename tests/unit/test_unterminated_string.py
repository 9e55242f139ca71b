"""An unterminated string literal must fail fast: xDSL's own pattern backtracks
exponentially on it (found by the fuzz test as a hang)."""

import time

import pytest
from xdsl.utils.exceptions import ParseError

from shardc.context import make_context
from shardc.ir.locations import LocatingParser


@pytest.mark.timeout(30, method="thread")  # a backtracking regex ignores signals
@pytest.mark.parametrize("tail", ["\\", "", "\\q"])
def test_unterminated_string_fails_fast(tail):
    text = 'func.func @f() {\n  %0 = "test.op"() {a = "' + "x" * 80 + tail + "} : () -> ()\n"
    start = time.monotonic()
    with pytest.raises(ParseError):
        LocatingParser(make_context(), text, "f.mlir").parse_module()
    assert time.monotonic() - start < 5


def test_escapes_still_parse():
    text = '"test.op"() {a = "q\\"x\\n\\t\\\\\\41"} : () -> ()\n'
    module = LocatingParser(make_context(allow_unregistered=True), text, "f.mlir").parse_module()
    assert module.body.block.first_op is not None


@pytest.mark.timeout(30, method="thread")
def test_unterminated_string_as_the_first_token_fails_fast():
    """The parser's first token was lexed by xDSL's own lexer (in `Parser.__init__`)
    before `FastLexer` took over: a file that starts with an unterminated literal hung
    there (the fuzz test, after its corpus grew)."""
    text = '// a comment first\n"' + "x" * 80 + "\n"
    start = time.monotonic()
    with pytest.raises(ParseError):
        LocatingParser(make_context(), text, "f.mlir").parse_module()
    assert time.monotonic() - start < 5
