"""The constant pool stores each runtime dataclass's attribute names once per shape
(class, attributes), not once per object (issue #16: the GPT step's 11,000 objects;
its pool 4.3 MB -> 2.6 MB, decoded 1.2x faster); a shape table naming anything but a
runtime dataclass, or dunder attributes, never loads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shardc.runtime.codegen import cache
from shardc.runtime.codegen.cache import CorruptEntry, dump_bindings, load_bindings
from shardc.runtime.execute.structured_run import Aligner

_ALIGNER = ["global", "shardc.runtime.execute.structured_run", "Aligner"]


def _pool(tree: dict) -> bytes:
    return json.dumps(tree).encode() + b"\0"


def _aligner(**kw) -> Aligner:
    a = object.__new__(Aligner)
    a.__dict__.update(kw)
    return a


def test_objects_share_their_shape_and_round_trip():
    a, b = _aligner(perm=(1, 0), take=None), _aligner(perm=(0, 1), take=[slice(1, 2)])
    odd = _aligner(perm=(0,))  # another attribute set: another shape
    data = dump_bindings({"_a": a, "_b": b, "_c": (a, odd), "_x": np.float32(2)})
    tree = json.loads(data[: data.index(b"\0")])
    shapes = tree[cache._SHAPES]  # pyright: ignore[reportPrivateUsage]
    assert [s[1] for s in shapes] == [["perm", "take"], ["perm"]]
    assert data.count(b'"perm"') == 2  # once per shape, not per object
    pool = load_bindings(data)
    assert type(pool["_a"]) is Aligner and vars(pool["_a"]) == {"perm": (1, 0), "take": None}
    assert vars(pool["_b"]) == {"perm": (0, 1), "take": [slice(1, 2)]}
    assert pool["_c"][0] is pool["_a"] and vars(pool["_c"][1]) == {"perm": (0,)}


def test_a_pool_without_objects_has_no_shape_table():
    data = dump_bindings({"_t": (1, "a"), "_n": np.int64(3)})
    assert cache._SHAPES.encode() not in data  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize(
    "shapes, obj",
    [
        ([[["global", "shardc.runtime.codegen.compile", "CompileError"], []]], ["object", 0, []]),  # not a dataclass
        ([[["global", "shardc.runtime.codegen.compile", "compile_text"], []]], ["object", 0, []]),  # not nameable
        ([[_ALIGNER, ["__class__"]]], ["object", 0, [1]]),  # a dunder attribute
        ([[_ALIGNER, [3]]], ["object", 0, [1]]),  # a name that is not a string
        ([[_ALIGNER, ["perm"]]], ["object", 1, [1]]),  # no such shape
        ([[_ALIGNER, ["perm"]]], ["object", 0, [1, 2]]),  # values that do not fit the names
        ([[_ALIGNER, ["perm"]]], ["object", "0", [1]]),
        ("not a table", ["object", 0, []]),
        ([[_ALIGNER]], ["object", 0, []]),
    ],
)
def test_hostile_shapes_are_refused(shapes, obj):
    with pytest.raises(CorruptEntry):
        load_bindings(_pool({cache._SHAPES: shapes, "_k_1": obj}))  # pyright: ignore[reportPrivateUsage]
