"""The dlti overlay: xDSL's DLTI attributes parsed as mlir-opt parses them, plus the query
the shard->MPI lowering needs (`module_rank`).

mlir-opt accepts both `#dlti.map<"key" = value>` and `#dlti.map<#dlti.dl_entry<"key",
value>>` (and an empty `#dlti.map<>`) and prints the first form; xDSL's parser only
takes the first, non-empty form. A module carrying `mpi.dlti = #dlti.map<
"MPI:comm_world_rank" = 1 : i32>` tells the MPI lowering which rank it compiles for
(trunk's key; the hyphenated `"MPI:comm_world-rank"` is read too).

https://mlir.llvm.org/docs/Dialects/DLTIDialect/
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import dlti as xdlti
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.utils.exceptions import VerifyException

from shardc.dialects.overlays import extend_dialect

DataLayoutEntryAttr = xdlti.DataLayoutEntryAttr

MPI_RANK_KEY = "MPI:comm_world_rank"
MPI_SIZE_KEY = "MPI:comm_world_size"
# Spellings accepted on input besides trunk's.
_ALIASES = {MPI_RANK_KEY: "MPI:comm_world-rank", MPI_SIZE_KEY: "MPI:comm_world-size"}


def _key_text(key: Attribute) -> str:
    return f'"{key.data}"' if isinstance(key, StringAttr) else str(key)


def parse_entries(parser: AttrParser) -> tuple[ArrayAttr[DataLayoutEntryAttr]]:
    """`<>`, `<key = value, ...>` or `<#dlti.dl_entry<key, value>, ...>`, with MLIR's
    diagnostics for repeated and empty keys."""
    entries: list[DataLayoutEntryAttr] = []
    seen: set[Attribute] = set()

    def parse_entry() -> None:
        pos = parser.pos
        if parser.parse_optional_characters("#dlti.dl_entry") is not None:
            # Parse the parts ourselves: building the entry first would verify it.
            parser.parse_punctuation("<")
            key = parser.parse_attribute()
            parser.parse_punctuation(",")
            value = parser.parse_attribute()
            parser.parse_punctuation(">")
        else:
            key = parser.parse_attribute()
            parser.parse_punctuation("=")
            value = parser.parse_attribute()
        if isinstance(key, StringAttr) and not key.data:
            parser.raise_error("empty string as DLTI key is not allowed", pos)
        if key in seen:
            parser.raise_error(f"repeated DLTI key: {_key_text(key)}", pos)
        seen.add(key)
        entries.append(DataLayoutEntryAttr(key, value))

    parser.parse_punctuation("<")
    if parser.parse_optional_punctuation(">") is None:
        parse_entry()
        while parser.parse_optional_punctuation(",") is not None:
            parse_entry()
        parser.parse_punctuation(">")
    return (ArrayAttr(entries),)


class _MLIREntries:
    """Parsing shared by the entry maps (the printer is xDSL's, already like MLIR's).
    xDSL's attribute classes are final, so ours derive from its abstract DLTIEntryMap:
    `isinstance(attr, xdsl.dialects.dlti.DLTIEntryMap)` holds for both."""

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[ArrayAttr[DataLayoutEntryAttr]]:
        return parse_entries(parser)

    def verify(self) -> None:
        assert isinstance(self, xdlti.DLTIEntryMap)
        keys = [entry.key for entry in self.entries]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise VerifyException(f"repeated DLTI key: {_key_text(key)}")


@irdl_attr_definition(init=False)
class MapAttr(_MLIREntries, xdlti.DLTIEntryMap):
    """`#dlti.map<...>`: DLTI key/value pairs, e.g. the MPI rank of a module."""

    name = "dlti.map"


@irdl_attr_definition(init=False)
class DataLayoutSpecAttr(_MLIREntries, xdlti.DLTIEntryMap):
    """`#dlti.dl_spec<...>`."""

    name = "dlti.dl_spec"


@irdl_attr_definition(init=False)
class TargetDeviceSpecAttr(_MLIREntries, xdlti.DLTIEntryMap):
    """`#dlti.target_device_spec<...>`."""

    name = "dlti.target_device_spec"


@irdl_attr_definition(init=False)
class TargetSystemSpecAttr(_MLIREntries, xdlti.DLTIEntryMap):
    """`#dlti.target_system_spec<...>`."""

    name = "dlti.target_system_spec"


def query(op: Operation, key: str) -> Attribute | None:
    """The value for `key` in the DLTI attributes of `op` or its closest ancestor that has
    one (a simplified `dlti::query`: one key, no nesting)."""
    current: Operation | None = op
    while current is not None:
        for attr in current.attributes.values():
            if isinstance(attr, xdlti.DLTIEntryMap):
                try:
                    return attr[key]
                except KeyError:
                    pass
        current = current.parent_op()
    return None


def _query_mpi(module: Operation, key: str) -> Attribute | None:
    value = query(module, key)
    return query(module, _ALIASES[key]) if value is None else value


def module_rank(module: Operation) -> int | None:
    """The MPI rank a module is compiled for (`"MPI:comm_world_rank"` in its DLTI
    attributes), None when unspecified. A non-integer value is an IR error."""
    value = _query_mpi(module, MPI_RANK_KEY)
    if value is None:
        return None
    if not isinstance(value, IntegerAttr):
        raise VerifyException(f"expected an integer for DLTI key \"{MPI_RANK_KEY}\", got {value}")
    return value.value.data


def module_size(module: Operation) -> int | None:
    """`"MPI:comm_world_size"`, when a module records it; None otherwise."""
    value = _query_mpi(module, MPI_SIZE_KEY)
    return value.value.data if isinstance(value, IntegerAttr) else None


_OURS: Sequence[type[Attribute]] = (
    MapAttr,
    DataLayoutSpecAttr,
    TargetDeviceSpecAttr,
    TargetSystemSpecAttr,
)

DLTI = extend_dialect(xdlti.DLTI, attrs=_OURS)
