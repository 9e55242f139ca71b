"""`FastParser`: xDSL's `Parser` with its hot paths done in fewer Python calls.

It changes no xDSL class; it only overrides methods in a subclass:

* the lexer is `FastLexer` (regex fast path, tokens cached by position, text stored);
* token plumbing (`_consume_token`, `_parse_optional_token`, punctuation and
  characters) reads the parser state once instead of through three properties;
* types and bracketed attributes (`tensor<64x64xf32>`, `[#map, #map1]`,
  `{indexing_maps = ..., iterator_types = ...}`, `#shard<...>`) are parsed once per
  distinct text and context: attributes are immutable, so the next occurrence of the
  same text takes the parsed value and jumps past it. A text is cached only after a
  parse consumed exactly it, and its key includes the values of the aliases it names;
* op names are resolved once per (name, default dialect).
"""

from __future__ import annotations

import re
import weakref
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.ir import Attribute, Operation, TypeAttribute
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.lexer import Input
from xdsl.utils.mlir_lexer import MLIRToken, MLIRTokenKind, PunctuationSpelling

from shardc.ir.fast_lexer import FastLexer

_BARE = MLIRTokenKind.BARE_IDENT
_HASH = MLIRTokenKind.HASH_IDENT
_BANG = MLIRTokenKind.EXCLAMATION_IDENT
_L_SQUARE = MLIRTokenKind.L_SQUARE
_L_BRACE = MLIRTokenKind.L_BRACE

#: Bare keywords that start a bracketed builtin type or attribute whose parse ends at
#: its closing `>` (not `dense<...> : type` and the like, which go on after it).
_BRACKETED_KEYWORDS = frozenset(
    {"tensor", "memref", "vector", "complex", "tuple", "array", "affine_map", "affine_set", "strided"}
)
#: `dense<...> : type`: the literal and its type.
_TYPE_SUFFIX = re.compile(r"\s*:\s*(?:(tensor|vector|memref)<|[a-z][a-z0-9]*\b)")
#: Bare keywords that are whole types.
_SIMPLE_TYPE = re.compile(r"(?:[su]?i[0-9]+|index|bf16|tf32|f16|f32|f64|f80|f128|none)\Z")

_BRACKET_TOKENS = re.compile(r'->|>=|"(?:[^"\\]|\\.)*"|[\[\]{}()<>]')
_DEPTH = {"[": 1, "{": 1, "(": 1, "<": 1, "]": -1, "}": -1, ")": -1, ">": -1}
_ALIAS_REFS = re.compile(r"[#!][a-zA-Z0-9$._-]+")
#: Texts that make a parse depend on more than the text and the context.
_UNCACHEABLE = re.compile(r"loc\(|distinct\[|dense_resource")

_MAX_ENTRIES = 100_000


def balanced_end(content: str, pos: int) -> int:
    """The end of the bracketed text opening at `pos` (`->`, `>=` and string literals
    do not count as brackets), or -1."""
    depth = 0
    for m in _BRACKET_TOKENS.finditer(content, pos):
        delta = _DEPTH.get(m.group())
        if delta is not None:
            depth += delta
            if depth <= 0:
                return m.end()
    return -1


class _ContextCaches:
    """Parse results that depend only on the context (and parser class)."""

    _all: ClassVar[dict[tuple[int, type], tuple[weakref.ref[Context], _ContextCaches]]] = {}

    def __init__(self) -> None:
        self.types: dict[object, TypeAttribute] = {}
        self.attributes: dict[object, Attribute] = {}
        self.ops: dict[tuple[str, ...], type[Operation]] = {}

    @classmethod
    def of(cls, ctx: Context, parser_class: type) -> _ContextCaches:
        key = (id(ctx), parser_class)
        entry = cls._all.get(key)
        if entry is None or entry[0]() is not ctx:
            caches = cls()
            cls._all[key] = (weakref.ref(ctx), caches)
            return caches
        return entry[1]


class FastParser(Parser):
    """A `Parser` with a faster lexer, leaner token handling and attribute caches."""

    def __init__(self, ctx: Context, input: str | bytes, name: str = "<unknown>") -> None:
        super().__init__(ctx, input, name)
        text = self.lexer.input.content
        self._parser_state = ParserState(FastLexer(Input(text, name)))
        self._caches = _ContextCaches.of(ctx, type(self))

    # -- tokens --------------------------------------------------------------------

    def _consume_token(self, expected_kind: MLIRTokenKind | None = None) -> MLIRToken:
        state = self._parser_state
        token = state.current_token
        assert expected_kind is None or token.kind is expected_kind, (
            f"Unexpected token {token}, expected {expected_kind}"
        )
        state.current_token = state.lexer.lex()
        return token

    def _parse_optional_token(self, expected_kind: MLIRTokenKind) -> MLIRToken | None:
        state = self._parser_state
        token = state.current_token
        if token.kind is expected_kind:
            state.current_token = state.lexer.lex()
            return token
        return None

    def parse_optional_characters(self, text: str) -> str | None:
        state = self._parser_state
        if state.current_token.text == text:
            state.current_token = state.lexer.lex()
            return text
        return None

    def parse_optional_punctuation(self, punctuation: PunctuationSpelling) -> PunctuationSpelling | None:
        # A token whose text is a punctuation spelling is that punctuation.
        state = self._parser_state
        if state.current_token.text == punctuation:
            state.current_token = state.lexer.lex()
            return punctuation
        return None

    def parse_punctuation(self, punctuation: PunctuationSpelling, context_msg: str = "") -> PunctuationSpelling:
        state = self._parser_state
        if state.current_token.text == punctuation:
            state.current_token = state.lexer.lex()
            return punctuation
        self.raise_error(f"Expected '{punctuation}'" + context_msg, state.current_token.span)

    def _resume_from(self, pos: Any) -> None:
        state = self._parser_state
        if isinstance(pos, int):
            lexer = state.lexer
            lexer.pos = pos
            state.current_token = lexer.lex()
        else:
            self._parser_state = pos

    # -- cached types and attributes -------------------------------------------------

    def _cache_key(self, start: int, end: int) -> object | None:
        text: str = self._parser_state.lexer.input.content[start:end]
        if _UNCACHEABLE.search(text):
            return None
        aliases = self.attribute_aliases
        if aliases and ("#" in text or "!" in text):
            used = tuple((ref, aliases[ref]) for ref in _ALIAS_REFS.findall(text) if ref in aliases)
            if used:
                return (text, used)
        return text

    def _cached_span(self) -> tuple[int, int] | None:
        """Where the type or attribute starting at the current token ends, if it is
        one whose parse ends at a closing bracket (or is one identifier)."""
        token = self._parser_state.current_token
        kind = token.kind
        start = token.span.start
        content: str = self._parser_state.lexer.input.content
        if kind is _L_SQUARE or kind is _L_BRACE:
            end = balanced_end(content, start)
        elif kind is _BARE:
            text = token.text
            end = token.span.end
            if content[end : end + 1] != "<":
                return None
            if text in _BRACKETED_KEYWORDS:
                end = balanced_end(content, end)
            elif text == "dense":
                end = balanced_end(content, end)
                m = _TYPE_SUFFIX.match(content, end) if end >= 0 else None
                if m is None:
                    return None
                end = balanced_end(content, m.end() - 1) if m.group(1) else m.end()
            else:
                return None
        elif kind is _HASH or kind is _BANG:
            end = token.span.end
            following = content[end : end + 1]
            if following == "<":
                end = balanced_end(content, end)
            elif following.isspace() or following == "":
                # `#name <...>` would be parsed with its parameters: not cached
                rest = content[end : end + 64].lstrip()
                if rest[:1] == "<":
                    return None
        else:
            return None
        return None if end < 0 else (start, end)

    def _parse_cached(self, table: dict[object, Any], parse: Any) -> Any:
        span = self._cached_span()
        if span is None:
            return parse()
        key = self._cache_key(*span)
        if key is None:
            return parse()
        hit = table.get(key)
        if hit is not None:
            self._resume_from(span[1])
            return hit
        result = parse()
        if result is not None:
            # Cache only if the parse consumed exactly the scanned text.
            next_start = self._parser_state.current_token.span.start
            content = self._parser_state.lexer.input.content
            if next_start >= span[1] and not content[span[1] : next_start].strip():
                if len(table) >= _MAX_ENTRIES:
                    table.clear()
                table[key] = result
        return result

    def parse_optional_type(self) -> TypeAttribute | None:
        token = self._parser_state.current_token
        if token.kind is _BARE and _SIMPLE_TYPE.match(token.text):
            types = self._caches.types
            if (hit := types.get(token.text)) is None:
                hit = super().parse_optional_type()
                if hit is not None:
                    types[token.text] = hit
                return hit
            self._consume_token()
            return hit
        return self._parse_cached(self._caches.types, super().parse_optional_type)

    def parse_optional_attribute(self) -> Attribute | None:
        return self._parse_cached(self._caches.attributes, super().parse_optional_attribute)

    # -- op names ------------------------------------------------------------------

    def _lookup_op(self, name: str) -> type[Operation] | None:
        """`ctx.get_optional_op` for the current dialect stack, cached."""
        stack = self._parser_state.dialect_stack
        key = (name, *stack)
        ops = self._caches.ops
        op_type = ops.get(key)
        if op_type is None:
            op_type = self.ctx.get_optional_op(name, dialect_stack=stack)
            if op_type is not None:
                ops[key] = op_type
        return op_type
