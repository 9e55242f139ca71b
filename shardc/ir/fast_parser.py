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
* op names are resolved once per (name, default dialect);
* `dense_resource<key>` blobs go to shardc's table (`shardc.ir.resources`): the file's
  `{-# dialect_resources ... #-}` section is read before the first attribute that
  names a key, so the attribute gets the key the blob was entered under; its
  `external_resources` are kept on the parsed module (`attach_file_metadata`);
* a `0x...` element of a float dense literal is the element's bit pattern, as in MLIR
  (`dense<0xFF800000> : tensor<f32>` is -inf; xDSL reads it as the integer's value).
"""

from __future__ import annotations

import math
import re
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import AnyFloat, DenseResourceAttr, IndexType, IntegerType, ModuleOp, ShapedType, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue, TypeAttribute
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.parser.attribute_parser import AttrParser
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRToken, MLIRTokenKind, PunctuationSpelling

from shardc.ir import dense, resources
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

_BRACKET_TOKENS = re.compile(r'->|>=|"(?:[^"\\]++|\\.)*+"|[\[\]{}()<>]')  # possessive: no state kept per character
_DEPTH = {"[": 1, "{": 1, "(": 1, "<": 1, "]": -1, "}": -1, ")": -1, ">": -1}
_ALIAS_REFS = re.compile(r"[#!][a-zA-Z0-9$._-]+")
#: Texts that make a parse depend on more than the text and the context.
_UNCACHEABLE = re.compile(r"loc\(|distinct\[|dense_resource")

#: A named linalg op's operands as printed: `ins(%a, %b : t, t) outs(%c : t)`, then an
#: optional `-> t`, with types that hold no comma, alias or nested bracket.
_VALUE = r"%(?:[0-9]+|[a-zA-Z$._-][a-zA-Z0-9$._-]*)(?:#[0-9]+)?"
_PLAIN_TYPE = r"[a-z][a-z0-9_]*(?:<[^<>,#!\"(){}\[\]]*>)?"
_VALUES = rf"({_VALUE}(?:[ \t\n]*,[ \t\n]*{_VALUE})*)"
_TYPES = rf"({_PLAIN_TYPE}(?:[ \t\n]*,[ \t\n]*{_PLAIN_TYPE})*)"
_NAMED_FORM_TEXT = (
    rf"ins\([ \t\n]*{_VALUES}[ \t\n]*:[ \t\n]*{_TYPES}[ \t\n]*\)"
    rf"[ \t\n]*outs\([ \t\n]*{_VALUES}[ \t\n]*:[ \t\n]*{_TYPES}[ \t\n]*\)"
    rf"(?:[ \t\n]*->[ \t\n]*({_PLAIN_TYPE})(?![<a-zA-Z0-9_]))?"
)
_NAMED_REGEXES: tuple[re.Pattern[str], ...] | None = None
#: Named ops a process reads token by token before it compiles the regular expressions:
#: compiling them (0.9 ms) costs what about 27 ops cost the slow way (32 us each), which
#: a small program (a lit test, examples/mlp.mlir's four) would never win back.
TOKEN_BY_TOKEN_FIRST = 16
_named_ops_met = 0


def _named_regexes() -> tuple[re.Pattern[str], ...] | None:
    """The named form, one value, one type, and what may not follow the form for it to
    be the op's whole operand part; None for the process's first `TOKEN_BY_TOKEN_FIRST`
    named ops, compiled at the next one."""
    global _NAMED_REGEXES, _named_ops_met
    if _NAMED_REGEXES is None:
        _named_ops_met += 1
        if _named_ops_met <= TOKEN_BY_TOKEN_FIRST:
            return None
        _NAMED_REGEXES = (
            re.compile(_NAMED_FORM_TEXT),
            re.compile(r"%([0-9]+|[a-zA-Z$._-][a-zA-Z0-9$._-]*)(?:#([0-9]+))?"),
            re.compile(_PLAIN_TYPE),
            re.compile(r"[ \t\n]*(?:->|attrs\b|//)"),
        )
    return _NAMED_REGEXES


_MAX_ENTRIES = 100_000
_MAX_CACHED_TEXT = 1 << 16
"""Texts longer than this (a dense literal's data, a function body) are neither scanned
for their end nor kept as cache keys."""
_METADATA_BEGIN = re.compile(r"\{-#")


def balanced_end(content: str, pos: int, limit: int | None = None) -> int:
    """The end of the bracketed text opening at `pos` (`->`, `>=` and string literals
    do not count as brackets), or -1 (also when it does not close within `limit`
    characters)."""
    depth = 0
    for m in _BRACKET_TOKENS.finditer(content, pos, len(content) if limit is None else min(len(content), pos + limit)):
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


@dataclass
class _HexElement(AttrParser._TensorLiteralElement):  # pyright: ignore[reportPrivateUsage]
    """A `0x...` element of a dense literal: for a float element type, its bit pattern
    (`dense<0xFF800000> : tensor<f32>` is -inf), as in MLIR."""

    def to_type(self, parser: AttrParser, type: Any) -> Any:
        if isinstance(type, AnyFloat) and isinstance(self.value, int) and not isinstance(self.value, bool):
            if self.value.bit_length() > type.bitwidth:
                parser.raise_error("hexadecimal float constant out of range for type", at_position=self.span)
            return next(type.iter_unpack(self.value.to_bytes(type.compile_time_size, "little")))
        return super().to_type(parser, type)


_DENSE_FORMATS = frozenset({"<e", "<f", "<d", "<b", "<h", "<i", "<q", "<B", "<H", "<I", "<Q"})
_HEX_BODY = re.compile(r'\s*"0x([0-9A-Fa-f]*)"\s*\Z')
_FLOAT_NUMBER = r"-?[0-9]+(?:\.[0-9]*(?:[eE][-+]?[0-9]+)?)?"  # MLIR: an exponent only after a point
_INT_NUMBER = r"-?[0-9]+"
_ONE_NUMBER = re.compile(rf"\s*({_FLOAT_NUMBER})\s*\Z")
#: a flattened list: numbers between commas, each one well formed (possessive: no
#: backtracking state kept per element)
_FLOAT_LIST = re.compile(rf"(?:\s*+{_FLOAT_NUMBER}\s*+,)*+\s*+{_FLOAT_NUMBER}\s*+")
_INT_LIST = re.compile(rf"(?:\s*+{_INT_NUMBER}\s*+,)*+\s*+{_INT_NUMBER}\s*+")
_TOO_LONG_INT = re.compile(r"[0-9]{19}")
_LIST_CHARS = re.compile(r"[^0-9eE.+\-,\[\]\s]")
_STRUCTURE = str.maketrans({c: None for c in "0123456789eE.+- \t\n\r"})
_UNBRACKET = str.maketrans({"[": " ", "]": " "})


def _nesting(shape: list[int]) -> str | None:
    """The brackets and commas of a list literal of `shape` (`[[,],[,]]` for 2x2), or
    None when that text would be long (the type does not fit a small body)."""
    length = 0
    for d in reversed(shape):
        length = 2 + d * length + max(d - 1, 0)
    if length > 1 << 26:
        return None
    text = ""
    for d in reversed(shape):
        text = "[" + ",".join([text] * d) + "]"
    return text


@dataclass
class _DenseBody:
    """The text inside `dense<...>` when it is one number, a hex string or a list of
    plain numbers (`read`), turned into element bytes for a type by `data`."""

    kind: str  # "hex", "one", "list"
    text: str

    @staticmethod
    def read(content: str, start: int, end: int) -> _DenseBody | None:
        if end - start < 64:
            small = content[start:end]
            m = _ONE_NUMBER.match(small)
            if m is not None:
                return _DenseBody("one", m.group(1))
        first = content[start : min(end, start + 64)].lstrip()[:1]
        if first == '"':
            m = _HEX_BODY.match(content, start, end)
            return _DenseBody("hex", m.group(1)) if m is not None else None
        if first == "[":
            text = content[start:end]
            return None if _LIST_CHARS.search(text) else _DenseBody("list", text)
        return None

    def data(self, element: Any, dtype: Any, shape: list[int]) -> bytes | None:
        """The element bytes (one element for a splat), or None where xDSL's parse
        should decide (a value out of range, a literal that does not fit the shape)."""
        import numpy as np  # only for a dense literal: shardc-opt's start-up does without

        is_int = not isinstance(element, AnyFloat)
        if self.kind == "hex":
            if len(self.text) % 2:
                return None
            raw = bytes.fromhex(self.text)
            n = math.prod(shape)
            return raw if len(raw) in (dtype.itemsize, dtype.itemsize * n) and n > 0 else None
        if self.kind == "one":
            if is_int and not re.fullmatch(_INT_NUMBER, self.text):
                return None
            values = np.array([int(self.text) if is_int else float(self.text)], dtype=object)
            return _pack(values, element, dtype)
        structure = self.text.translate(_STRUCTURE)
        expected = _nesting(shape)
        if expected is None or structure != expected or not shape or 0 in shape:
            return None
        del structure, expected
        flat = self.text.translate(_UNBRACKET)
        self.text = ""  # read once: its copy goes before the numbers are made
        if (_INT_LIST if is_int else _FLOAT_LIST).fullmatch(flat) is None:
            return None
        if is_int and _TOO_LONG_INT.search(flat):
            return None  # beyond int64: xDSL's integers decide
        # f32 and f64 straight from the text (numpy reads a double and rounds it once, as
        # xDSL's float() and struct packing do); integers and f16 through a wider type
        direct = dtype.kind == "f" and dtype.itemsize >= 4
        values = np.fromstring(flat, dtype=dtype.newbyteorder("=") if direct else np.int64 if is_int else np.float64, sep=",")
        del flat
        if values.size != math.prod(shape):
            return None
        return _pack(values, element, dtype)


def _pack(values: Any, element: Any, dtype: Any) -> bytes | None:
    """`values` as `element`'s bytes (`dtype`), as xDSL packs them: integers in the
    type's range (two's complement for signless), floats rounded from double."""
    import numpy as np

    if isinstance(element, IntegerType):
        lo, hi = element.value_range()
        if values.dtype == object:
            v = int(values[0])
            if not lo <= v < hi:
                return None
            return element.pack([element.get_normalized_value(v)])
        if values.size and (int(values.min()) < lo or int(values.max()) >= hi):
            return None
        return values.astype(dtype).tobytes()
    if isinstance(element, IndexType):
        return np.asarray(values, dtype=np.int64).astype(dtype).tobytes()
    with np.errstate(over="ignore"):
        out = np.asarray(values).astype(dtype, copy=False)
    if np.isinf(out).any():
        return None  # too large for the type (or 1e400): xDSL's packing decides
    return out.tobytes()


class FastParser(Parser):
    """A `Parser` with a faster lexer, leaner token handling and attribute caches."""

    def __init__(self, ctx: Context, input: str | bytes, name: str = "<unknown>") -> None:
        text = input.decode("utf-8") if isinstance(input, bytes) else input
        # xDSL's own lexer sees only an empty input: it lexes a first token at once, and
        # its string-literal regex backtracks exponentially on an unterminated literal
        # (a fuzzed input hung shardc-opt there); `FastLexer`'s cannot.
        super().__init__(ctx, "", name)
        self._parser_state = ParserState(FastLexer(Input(text, name)))
        self._caches = _ContextCaches.of(ctx, type(self))
        #: the file's builtin resources, key as written -> key in the table (lazily read)
        self._resource_keys: dict[str, str] | None = None
        #: (key, blob) pairs a pre-reading parser collects instead of entering them
        self._collected: list[tuple[str, str]] | None = None
        #: the file's external_resources groups
        self._external: list[resources.ExternalGroup] = []

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
        one whose parse ends at a closing bracket (or is one identifier) within
        `_MAX_CACHED_TEXT` characters: longer texts are not cached, so not scanned."""
        token = self._parser_state.current_token
        kind = token.kind
        start = token.span.start
        content: str = self._parser_state.lexer.input.content
        if kind is _L_SQUARE or kind is _L_BRACE:
            end = balanced_end(content, start, _MAX_CACHED_TEXT)
        elif kind is _BARE:
            text = token.text
            end = token.span.end
            if content[end : end + 1] != "<":
                return None
            if text in _BRACKETED_KEYWORDS:
                end = balanced_end(content, end, _MAX_CACHED_TEXT)
            elif text == "dense":
                end = balanced_end(content, end, _MAX_CACHED_TEXT)
                m = _TYPE_SUFFIX.match(content, end) if end >= 0 else None
                if m is None:
                    return None
                end = balanced_end(content, m.end() - 1, _MAX_CACHED_TEXT) if m.group(1) else m.end()
            else:
                return None
        elif kind is _HASH or kind is _BANG:
            end = token.span.end
            following = content[end : end + 1]
            if following == "<":
                end = balanced_end(content, end, _MAX_CACHED_TEXT)
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
        if span is None or span[1] - span[0] > _MAX_CACHED_TEXT:
            return parse()  # a long text (a dense literal's data) is not kept as a key
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

    # -- dense literals as buffers (shardc.ir.dense) ------------------------------------

    def parse_dense_int_or_fp_elements_attr(self, type: Any) -> Any:
        """`dense<...>` read into a buffer when its body is plain (`_parse_dense_buffer`),
        a splat held compact when large; any other body, or one that does not fit its
        type, is xDSL's parse, which reports what is wrong."""
        start = self._parser_state.current_token.span.start
        got = self._parse_dense_buffer(type)
        if got is not None:
            return got
        self._resume_from(start)
        return super().parse_dense_int_or_fp_elements_attr(type)

    def _parse_dense_buffer(self, type: Any) -> Any:
        """The attribute of a `dense<...>` whose body is one number, a hex string, or a
        list of numbers nested as the type's shape, read without an object per element;
        None (position unspecified: the caller rewinds) for any other body or type."""
        state = self._parser_state
        token = state.current_token
        if token.text != "<":
            return None
        content: str = state.lexer.input.content
        lt = token.span.start
        end = balanced_end(content, lt)
        if end < 0:
            return None
        body = _DenseBody.read(content, lt + 1, end - 1)
        if body is None:
            return None
        self._resume_from(end)
        if type is None:
            self.parse_punctuation(":", " in dense attribute")
            type = self._parse_dense_literal_type()
        element = type.get_element_type()
        fmt = getattr(element, "format", None)
        if not isinstance(element, AnyFloat | IntegerType | IndexType) or fmt not in _DENSE_FORMATS or (isinstance(element, IntegerType) and element.width.data == 1):
            return None
        import numpy as np

        data = body.data(element, np.dtype(fmt), list(type.get_shape()))
        return None if data is None else dense.from_bytes(type, data)

    def _parse_tensor_literal_element(self) -> AttrParser._TensorLiteralElement:  # pyright: ignore[reportPrivateUsage]
        token = self._parser_state.current_token
        if token.kind is MLIRTokenKind.INTEGER_LIT and token.text[:2] in ("0x", "0X"):
            self._consume_token()
            return _HexElement(False, int(token.text, 16), token.span)
        return super()._parse_tensor_literal_element()

    # -- named linalg ops -------------------------------------------------------------

    def parse_named_operands_fast(self) -> tuple[list[SSAValue], list[SSAValue], list[Attribute]] | None:
        """The ins, outs and result types of a named linalg op in its plain printed form
        (`ins(%a, %b : t, t) outs(%c : t) -> t`, every type parsed before), read with one
        regular expression instead of token by token; None (nothing consumed) for any
        other form, which `NamedOperation.parse` then reads and reports on."""
        state = self._parser_state
        token = state.current_token
        if token.kind is not _BARE or token.text != "ins":
            return None
        regexes = _named_regexes()
        if regexes is None:
            return None
        content: str = state.lexer.input.content
        form, one_value, one_type, goes_on = regexes
        m = form.match(content, token.span.start)
        if m is None or goes_on.match(content, m.end()):
            return None
        # (the result types are parsed as attributes, as NamedOperation.parse does)
        caches = self._caches
        groups: list[list[Any]] = []
        for index, table in ((2, caches.types), (4, caches.types), (5, caches.attributes)):
            if m.group(index) is None:
                groups.append([])
                continue
            found = []
            for t in one_type.finditer(content, m.start(index), m.end(index)):
                hit = table.get(t.group())
                if hit is None:
                    return None
                found.append(hit)
            groups.append(found)
        ins_types, outs_types, res_types = groups
        source = state.lexer.input
        values: list[list[UnresolvedOperand]] = []
        for index in (1, 3):
            values.append(
                [
                    UnresolvedOperand(Span(v.start(), v.end(1), source), int(v.group(2) or 0))
                    for v in one_value.finditer(content, m.start(index), m.end(index))
                ]
            )
        if len(values[0]) != len(ins_types) or len(values[1]) != len(outs_types):
            return None
        self._resume_from(m.end())
        ins = [self.resolve_operand(v, t) for v, t in zip(values[0], ins_types)]
        outs = [self.resolve_operand(v, t) for v, t in zip(values[1], outs_types)]
        return ins, outs, res_types

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

    # -- dense_resource blobs ------------------------------------------------------

    def _file_resource_keys(self) -> dict[str, str]:
        """Enter every builtin blob of this file's resource sections in the table; the
        key each was entered under, by the key the file writes. A section that does
        not parse is left for the main parse to report where it is."""
        if self._resource_keys is None:
            self._resource_keys = {}
            content: str = self._parser_state.lexer.input.content
            for m in _METADATA_BEGIN.finditer(content):
                reader = FastParser(self.ctx, content)
                reader._collected = []
                reader._resume_from(m.start())
                try:
                    reader._parse_file_metadata_dictionary()
                except Exception:
                    continue
                for key, blob in reader._collected:
                    try:
                        self._resource_keys[key] = resources.declare_blob(key, blob)
                    except resources.ResourceError:
                        pass
        return self._resource_keys

    def _parse_resource_key(self) -> str:
        """A resource key: a bare identifier or a string literal, as in MLIR."""
        key = self.parse_optional_identifier()
        if key is None:
            key = self.parse_optional_str_literal()
        if key is None:
            self.raise_error("expected identifier key for 'resource' entry")
        return key

    def _parse_builtin_dense_resource_attr(self) -> DenseResourceAttr:
        self.parse_characters("<", " in dense_resource attribute")
        key = self._parse_resource_key()
        self.parse_characters(">", " in dense_resource attribute")
        at = self._parser_state.current_token.span
        self.parse_characters(":", " in dense_resource attribute")
        type = self.parse_type()
        if not isinstance(type, ShapedType):
            self.raise_error("`dense_resource` expected a shaped type", at)
        return DenseResourceAttr(StringAttr(self._file_resource_keys().get(key, key)), type)

    def _parse_single_dialect_resources(self) -> None:
        token = self._parser_state.current_token
        if token.kind is _BARE and self.ctx.get_optional_dialect(token.text) is None:
            self.raise_error(f"dialect '{token.text}' is unknown", token.span)
        super()._parse_single_dialect_resources()

    def _parse_external_resources(self) -> None:
        """`external_resources: { group: { key: value, ... } }`, kept for the module
        (`attach_file_metadata`) to be printed back as mlir-opt prints them."""

        def entry() -> tuple[str, str | bool]:
            key = self._parse_resource_key()
            self._parse_token(MLIRTokenKind.COLON, "expected `:`")
            value: str | bool | None = self.parse_optional_str_literal()
            if value is None:
                value = self.parse_optional_boolean()
            if value is None:
                self.raise_error("expected string, boolean or hex blob resource value")
            return key, value

        def group() -> resources.ExternalGroup:
            name = self._parse_resource_key()
            self._parse_token(MLIRTokenKind.COLON, "expected `:`")
            return name, self.parse_comma_separated_list(self.Delimiter.BRACES, entry)

        self._external.extend(self.parse_comma_separated_list(self.Delimiter.BRACES, group))

    def attach_file_metadata(self, module: ModuleOp) -> ModuleOp:
        """Give the parsed module what the file's `{-# ... #-}` held besides blobs."""
        resources.set_external_resources(module, self._external)
        return module

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        return self.attach_file_metadata(super().parse_module(allow_implicit_module))

    def _parse_resource(self, dialect_name: str, interface: OpAsmDialectInterface) -> None:
        if dialect_name != "builtin":
            return super()._parse_resource(dialect_name, interface)
        key = self._parse_resource_key()
        self._parse_token(MLIRTokenKind.COLON, "expected `:`")
        at = self._parser_state.current_token.span
        blob = self.parse_optional_str_literal()
        if blob is None or not resources.is_blob(blob):
            self.raise_error(f"expected hex string blob for key '{key}'", at)
        if self._collected is not None:
            self._collected.append((key, blob))
        elif key not in self._file_resource_keys():  # (the pre-read failed further on)
            resources.declare_blob(key, blob)
