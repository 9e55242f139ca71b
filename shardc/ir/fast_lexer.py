"""A drop-in `MLIRLexer` that lexes each position once.

xDSL's lexer decides a token character by character in Python and builds a frozen
`Span` per token; its parser also backtracks by re-lexing from a position (shape
delimiters `4x8xf32` alone re-lex every dimension). This lexer matches the common
tokens with one compiled regex, caches every token by the position it was lexed from,
and stores the token text on the token, so `token.text` is an attribute read instead
of two property calls and a slice. Anything unusual (string literals, `{-#`, `...`,
end of input, errors) goes to xDSL's own lexer, so tokens and messages are the same.
"""

from __future__ import annotations

import re
from typing import Any

from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input, Position, Span, Token
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind, StringLiteral


class FastSpan(Span[str]):
    """A `Span` whose `text` is stored at creation (it is read for every token)."""

    text: str = ""  # pyright: ignore[reportIncompatibleMethodOverride]


class _LazySpan:
    """The `span` of a `FastToken`, made on first use (most punctuation never needs it)."""

    def __get__(self, token: FastToken | None, owner: object = None) -> Any:
        if token is None:
            return self
        span: Any = _new(FastSpan)
        span.__dict__.update(start=token.start, end=token.end, input=token.input, text=token.text)
        token.__dict__["span"] = span
        return span


class FastToken(Token[MLIRTokenKind, str]):
    """A `Token` that stores its text and position and makes its `Span` lazily."""

    text: str = ""  # pyright: ignore[reportIncompatibleMethodOverride]
    span = _LazySpan()  # pyright: ignore

    def __init__(self, kind: MLIRTokenKind, text: str, start: int, end: int, input: Input[str]) -> None:
        self.kind = kind
        self.text = text
        self.start = start
        self.end = end
        self.input = input


_new = object.__new__

# Group names are MLIRTokenKind names, or P (one-character punctuation) and F (hand
# the position to xDSL's lexer). Alternatives are tried in order, as xDSL's `lex` does.
_SUFFIX_ID = r"(?:[0-9]+|[a-zA-Z$._-][a-zA-Z0-9$._-]*)"
_TOKEN = re.compile(
    r"(?:\s|//[^\n]*)*+"
    r"(?:"
    r"(?P<BARE_IDENT>[a-zA-Z_][a-zA-Z0-9_$.]*)"
    rf"|(?P<PERCENT_IDENT>%{_SUFFIX_ID})"
    r"|(?P<ARROW>->)"
    r"|(?P<AT_IDENT>@[a-zA-Z_][a-zA-Z0-9_$.]*)"
    r"|(?P<F>\{-\#|\#-\}|[\"@.]|$)"
    rf"|(?P<HASH_IDENT>\#{_SUFFIX_ID})"
    rf"|(?P<EXCLAMATION_IDENT>!{_SUFFIX_ID})"
    rf"|(?P<CARET_IDENT>\^{_SUFFIX_ID})"
    r"|(?P<P>[:,(){}\[\]<>=+/*?|-])"
    r"|(?P<INTEGER_LIT>0x[0-9a-fA-F]+|[0-9]+(?![.0-9]))"
    r"|(?P<FLOAT_LIT>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?)"
    r")",
    re.ASCII,
)
# xDSL's string regex backtracks exponentially on an unterminated literal; this one
# matches the same strings without backtracking (its alternatives start differently).
_STRING = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')
_KINDS: dict[str | None, MLIRTokenKind] = {kind.name: kind for kind in MLIRTokenKind}
_PUNCTUATION: dict[str, MLIRTokenKind] = {
    ":": MLIRTokenKind.COLON,
    ",": MLIRTokenKind.COMMA,
    "(": MLIRTokenKind.L_PAREN,
    ")": MLIRTokenKind.R_PAREN,
    "{": MLIRTokenKind.L_BRACE,
    "}": MLIRTokenKind.R_BRACE,
    "[": MLIRTokenKind.L_SQUARE,
    "]": MLIRTokenKind.R_SQUARE,
    "<": MLIRTokenKind.LESS,
    ">": MLIRTokenKind.GREATER,
    "=": MLIRTokenKind.EQUAL,
    "+": MLIRTokenKind.PLUS,
    "/": MLIRTokenKind.SLASH,
    "*": MLIRTokenKind.STAR,
    "?": MLIRTokenKind.QUESTION,
    "|": MLIRTokenKind.VERTICAL_BAR,
    "-": MLIRTokenKind.MINUS,
}


class FastLexer(MLIRLexer):
    """`MLIRLexer` with a regex fast path and a per-position token cache.

    The cache maps the position `lex` starts from (before whitespace) to the token;
    lexing is context-free, so a token lexed from a position is always the same.
    """

    def __init__(self, input: Input[str]) -> None:
        super().__init__(input)
        self._tokens: dict[int, MLIRToken] = {}

    def lex(self) -> MLIRToken:
        pos = self.pos
        token = self._tokens.get(pos)
        if token is not None:
            self.pos = token.end if type(token) is FastToken else token.span.end
            return token
        content = self.input.content
        m = _TOKEN.match(content, pos)
        group = m.lastgroup if m is not None else "F"
        if group == "F" or m is None:
            token = super().lex()
            # Keep the token as xDSL made it (string literals are StringLiteral spans).
            self._tokens[pos] = token
            return token
        start = m.start(group)
        end = m.end()
        text = content[start:end]
        kind = _PUNCTUATION[text] if group == "P" else _KINDS[group]
        token = FastToken(kind, text, start, end, self.input)
        self._tokens[pos] = token
        self.pos = end
        return token

    def _lex_string_literal(self, start_pos: Position) -> MLIRToken:
        """As xDSL's, with a regex that cannot backtrack: STRING_LIT, or BYTES_LIT
        when the escapes make the payload non-UTF-8-text."""
        m = _STRING.match(self.input.content, start_pos)
        if m is None:
            raise ParseError(
                Span(start_pos, self.pos, self.input),
                "End of file reached before closing string literal.",
            )
        self.pos = m.end()
        literal = StringLiteral(start_pos, self.pos, self.input)
        text = m.group()
        if "\\" not in text or _is_utf8(literal.bytes_contents):
            return Token(MLIRTokenKind.STRING_LIT, literal)
        return Token(MLIRTokenKind.BYTES_LIT, literal)


def _is_utf8(data: bytes) -> bool:
    """Whether escaped bytes are text (xDSL's lexer asks for ASCII, so `"\\CE\\BB"`, the
    escaped spelling of "λ" that MLIR prints, did not read back as a string)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
