"""`dense_resource<key>` blobs: where they are kept, how they decode to numpy.

MLIR keeps the blobs of `{-# dialect_resources: { builtin: { key: "0x..." } } #-}` in
the context's resource manager, not in the IR: an attribute holds only its key (and
xDSL's `DenseResourceAttr` cannot be given more). shardc keeps them in one
process-wide table, `BLOBS` (key -> hex text), so a blob is found from the attribute
alone, whichever module or context it came from:

* shardc's parsers (`FastParser`, hence `LocatingParser`, `shardc-opt`, `shardc-run`)
  read a file's resource section *before* its body and enter each blob with
  `declare_blob`. A key that already holds other bytes (two exports in one process
  both naming `torch_tensor_4_torch.float32`) is entered as `key_1`, `key_2`, ...
  (MLIR's manager renames the same way), and that file's `dense_resource<key>`
  attributes get the entered key; the same bytes under the same key (re-parsing
  printed text) keep their key.
* `MLIRPrinter` writes the section after the module for the blobs the printed IR
  references, in first-use order, as mlir-opt does (keys without a blob print bare and
  get no entry). A renamed key prints as the file wrote it (`written_key`) unless
  another blob of the same printed module already has that name, so output matches
  mlir-opt's however many modules the process has parsed.
* `resource_array(attr, type)` decodes a blob: a 4-byte little-endian alignment word,
  then the raw little-endian elements (i1 one byte each).

IR built in Python gets a blob with `dense_resource_attr(array, type, key)`. Blobs stay
in the table for the life of the process. A file's `external_resources` (which no IR
references) are kept on its module instead (`external_resources(module)`) and printed
back after the dialect resources, as mlir-opt does.
"""

from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseResourceAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    ShapedType,
    Signedness,
    StringAttr,
)
from xdsl.ir import Attribute, Operation

if TYPE_CHECKING:  # numpy is imported where arrays are made: parsing and printing need none
    import numpy as np

#: Every blob this process has parsed or created: key -> "0x" + hex digits.
BLOBS: dict[str, str] = {}
#: The key a file (or caller) wrote, for the keys entered under another name.
_WRITTEN: dict[str, str] = {}


class ResourceError(ValueError):
    """A dense_resource whose blob is missing or does not fit its type."""


_HEX = re.compile(r"0x(?:[0-9a-fA-F]{2})*\Z")
_BARE_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_$.]*\Z")


def is_blob(text: str) -> bool:
    """Whether `text` is a blob as MLIR writes one: `0x` and whole bytes in hex."""
    return _HEX.match(text) is not None


def string_literal(text: str) -> str:
    """`text` as MLIR prints a string: `\\` for a backslash, `\\XX` for `"` and for
    bytes outside printable ASCII."""
    out = []
    for b in text.encode():
        if b == 0x5C:
            out.append("\\\\")
        elif b < 0x20 or b > 0x7E or b == 0x22:
            out.append(f"\\{b:02X}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


def key_text(key: str) -> str:
    """A key as MLIR prints it: bare when it is an identifier, else a quoted string."""
    return key if _BARE_KEY.match(key) else string_literal(key)


#: An `external_resources` group: its name and entries (a string, hex blob or bool).
ExternalGroup = tuple[str, list[tuple[str, str | bool]]]
_EXTERNAL: weakref.WeakKeyDictionary[Operation, list[ExternalGroup]] = weakref.WeakKeyDictionary()


def set_external_resources(module: Operation, groups: list[ExternalGroup]) -> None:
    """Keep a parsed file's `external_resources` on its module. mlir-opt holds groups no
    handler claims (and its reproducer options) in a fallback map and prints them back;
    shardc keeps them, unread, for the printer."""
    if groups:
        _EXTERNAL[module] = groups
    else:
        _EXTERNAL.pop(module, None)


def external_resources(module: Operation) -> list[ExternalGroup]:
    return _EXTERNAL.get(module, [])


def declare_blob(key: str, blob: str) -> str:
    """Enter `blob` under `key`, or under `key_N` if `key` holds other bytes; the key used."""
    if not is_blob(blob):
        raise ResourceError(f"resource '{key}': a blob is a hex string starting 0x, got {blob[:16]!r}")
    candidate, n = key, 0
    while (held := BLOBS.get(candidate)) is not None and held != blob:
        n += 1
        candidate = f"{key}_{n}"
    BLOBS[candidate] = blob
    if candidate != key:
        _WRITTEN[candidate] = key
    return candidate


def written_key(key: str) -> str:
    """The key as its file wrote it (differs from `key` where `declare_blob` renamed it)."""
    return _WRITTEN.get(key, key)


def blob_of(key: str) -> str | None:
    """The hex text of the blob under `key`, if any (IR read by xDSL's own parser keeps
    its blobs on xDSL's builtin dialect, looked at second)."""
    blob = BLOBS.get(key)
    if blob is None:
        from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
        from xdsl.dialects.builtin import Builtin

        interface = Builtin.get_interface(OpAsmDialectInterface)
        blob = (interface.lookup(key) or None) if interface is not None else None
    return blob


def _numpy_dtype(element: Attribute) -> np.dtype:
    import numpy as np

    if isinstance(element, Float32Type):
        return np.dtype("<f4")
    if isinstance(element, Float64Type):
        return np.dtype("<f8")
    if isinstance(element, Float16Type):
        return np.dtype("<f2")
    if isinstance(element, BFloat16Type):
        return np.dtype("<u2")  # widened to float32 after reading
    if isinstance(element, IndexType):
        return np.dtype("<i8")
    if isinstance(element, IntegerType):
        width = element.width.data
        if width == 1:
            return np.dtype(np.bool_)
        if width not in (8, 16, 32, 64):
            raise ResourceError(f"dense_resource of i{width} elements is not supported")
        kind = "u" if element.signedness.data == Signedness.UNSIGNED else "i"
        return np.dtype(f"<{kind}{width // 8}")
    raise ResourceError(f"dense_resource of {element} elements is not supported")


def resource_array(attr: DenseResourceAttr, tensor_type: ShapedType | None = None) -> np.ndarray:
    """The elements of `dense_resource<key>` as a read-only array of `tensor_type`'s
    shape (the attribute's own type when not given); bf16 comes back as float32."""
    import numpy as np

    key = attr.resource_handle.data
    shaped = tensor_type if tensor_type is not None else attr.type
    blob = blob_of(key)
    if blob is None:
        raise ResourceError(f"dense_resource<{key}>: no blob named '{key}' in the dialect_resources section")
    dtype = _numpy_dtype(shaped.get_element_type())
    shape = tuple(shaped.get_shape())
    if any(d < 0 for d in shape):
        raise ResourceError(f"dense_resource<{key}>: type {shaped} is not statically shaped")
    data = bytes.fromhex(blob[2:])
    count = int(np.prod(shape, dtype=np.int64))
    payload = len(data) - 4
    if payload != count * dtype.itemsize:
        raise ResourceError(
            f"dense_resource<{key}>: blob holds {max(payload, 0)} bytes after its alignment word, "
            f"{shaped} needs {count * dtype.itemsize}"
        )
    array = np.frombuffer(data, dtype=dtype, offset=4).reshape(shape)
    if isinstance(shaped.get_element_type(), BFloat16Type):
        array = (array.astype(np.uint32) << 16).view(np.float32)
        array.flags.writeable = False
    return array


def array_blob(array: np.ndarray) -> str:
    """The blob text of an array: alignment word (the element size), little-endian bytes."""
    import numpy as np

    array = np.ascontiguousarray(array)
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    array = array.astype(array.dtype.newbyteorder("<"), copy=False)
    align = max(array.dtype.itemsize, 1)
    return "0x" + align.to_bytes(4, "little").hex().upper() + array.tobytes().hex().upper()


def dense_resource_attr(array: np.ndarray, tensor_type: ShapedType, key: str) -> DenseResourceAttr:
    """A `dense_resource` attribute whose blob holds `array` (under `key` or `key_N`)."""
    import numpy as np

    element = tensor_type.get_element_type()
    if isinstance(element, BFloat16Type):  # the upper half of each float32, rounded to nearest even
        bits = np.asarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
        data = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        data = np.asarray(array, dtype=_numpy_dtype(element))
    if data.shape != tuple(tensor_type.get_shape()):
        raise ResourceError(f"resource '{key}': array of shape {data.shape} for {tensor_type}")
    used = declare_blob(key, array_blob(data))
    return DenseResourceAttr(StringAttr(used), tensor_type)
