"""The layout view: block diagrams of a tensor over a grid (which rank holds which
block), for known grids and specs; shardc-train --show-layouts; shardc-view."""

import io

from rich.text import Text

from shardc.runtime.execute.sharding import RuntimeSharding
from shardc.training.layout_view import blocks, grid_text, print_texts, ranks_text, render_layout, spec_text


def test_two_split_dims_on_a_2x2_grid():
    rs = RuntimeSharding("g", (2, 2), ((0,), (1,)))
    assert render_layout((4, 6), rs, (2, 2)).plain == (
        "┌────────────┬────────────┐\n"
        "│ [0:2, 0:3] │ [0:2, 3:6] │\n"
        "│   rank 0   │   rank 1   │\n"
        "├────────────┼────────────┤\n"
        "│ [2:4, 0:3] │ [2:4, 3:6] │\n"
        "│   rank 2   │   rank 3   │\n"
        "└────────────┴────────────┘"
    )


def test_replicas_share_a_block_and_rows_follow_the_first_split_dim():
    rs = RuntimeSharding("g", (2, 2), ((0,),))  # dim 0 over axis 0; axis 1 replicates
    assert render_layout((8, 3), rs, (2, 2)).plain == (
        "┌───────────┐\n"
        "│  [0:4, :] │\n"
        "│ ranks 0,1 │\n"
        "├───────────┤\n"
        "│  [4:8, :] │\n"
        "│ ranks 2,3 │\n"
        "└───────────┘"
    )
    assert render_layout((8, 3), RuntimeSharding("g", (4,), ((),)), (4,)).plain.splitlines()[2] == "│ all 4 ranks │"


def test_a_dimension_over_two_axes_uneven_pieces_and_ranks_text():
    rs = RuntimeSharding("g", (2, 2), ((1, 0),))  # axis 1 major: piece k = 2*c1 + c0
    bl = blocks((8,), rs, (2, 2))
    assert [b.ranks for b in bl] == [(0,), (1,), (2,), (3,)]
    assert [b.ranges for b in bl] == [((0, 2),), ((4, 6),), ((2, 4),), ((6, 8),)]  # rank (c0, c1) holds piece 2*c1 + c0
    uneven = render_layout((10,), RuntimeSharding("g", (3,), ((0,),)), (3,)).plain
    assert uneven.splitlines()[1] == "│ [0:3]  │ [3:6]  │ [6:10] │"
    assert ranks_text([0, 1, 2, 5], 8) == "ranks 0-2,5" and ranks_text([3], 4) == "rank 3" and ranks_text(range(4), 4) == "all 4 ranks"


def test_grid_and_spec_text():
    assert grid_text((2, 2), ("batch", "shard")) == "         shard=0  shard=1\nbatch=0        0        1\nbatch=1        2        3"
    assert grid_text((3,)) == "axis0: 0  1  2"
    assert spec_text(((), (1, 0)), 3, ("batch", "shard")) == "(-, shard+batch, -)"


def test_colours_only_on_a_terminal():
    t = render_layout((4,), RuntimeSharding("g", (2,), ((0,),)), (2,))
    plain, coloured = io.StringIO(), io.StringIO()
    print_texts([t], file=plain)
    print_texts([t], file=coloured, color=True)
    assert "\x1b[" not in plain.getvalue() and plain.getvalue() == t.plain + "\n"
    assert "\x1b[" in coloured.getvalue()
    assert isinstance(t, Text) and len({str(s.style) for s in t.spans}) == 2  # one colour per block


def test_shardc_train_show_layouts(capsys):
    from shardc.tools.train import main

    assert main(["--show-layouts", "--np", "4", "--tp", "2", "--fsdp", "--n-layer", "1", "--n-head", "4", "--n-embd", "16"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("shardc-train: 4 ranks, grid (batch=2, shard=2), policy tp=2 zero=True fsdp=True\n")
    assert "  batch=1        2        3\n" in out
    # FSDP stores the embedding split over batch, computes with it whole
    assert "wte  [32, 16]  axes (vocab, n_embd)\n  storage = update: split (batch, -), per rank [16, 16]\n" in out
    assert "    │ [0:16, :]  │\n    │ ranks 0,1  │\n    ├────────────┤\n    │ [16:32, :] │\n    │ ranks 2,3  │\n" in out
    assert "  compute: replicated, every rank holds [32, 16]\n" in out
    assert "h.0.ln_1.weight  [16]  axes (n_embd)\n  storage = compute = update: replicated, every rank holds [16]\n" in out
    # TP splits the heads over shard; ZeRO then over batch inside each shard piece
    i = out.index("h.0.attn.c_attn.weight  [16, 3, 4, 4]")
    assert "storage = update: split (-, -, shard+batch, -), per rank [16, 3, 1, 4]" in out[i:]
    assert "compute: split (-, -, shard, -), per rank [16, 3, 2, 4]" in out[i:]


def test_shardc_view_after_propagation(tmp_path, capsys):
    from shardc.tools.view import main

    p = tmp_path / "p.mlir"
    p.write_text(
        "shard.grid @g(shape = 2x2)\n"
        "func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {\n"
        "  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding\n"
        "  %y = shard.shard %x to %s : tensor<4x6xf32>\n"
        "  %z = tosa.abs %y : (tensor<4x6xf32>) -> tensor<4x6xf32>\n"
        "  return %z : tensor<4x6xf32>\n"
        "}\n"
    )
    assert main([str(p)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("grid @g 2x2\n           axis1=0  axis1=1\n  axis0=0        0        1\n  axis0=1        2        3\n")
    # propagation annotates the abs's operand and result too
    assert "@f: 3 annotated values\n" in out
    assert "%sharded_3 = shard.shard %0 to %sharding_2 : tensor<4x6xf32>\n  grid @g, split (0, 1)" in out
    assert "%sharded = shard.shard %arg0 to %sharding : tensor<4x6xf32>\n  grid @g, split (0, 1), rank 0 holds [2, 3] of [4, 6]\n" in out
    assert "  │ [2:4, 0:3] │ [2:4, 3:6] │\n  │   rank 2   │   rank 3   │\n" in out
    assert main([str(p), "--pipeline", "none"]) == 0
    assert "@f: 1 annotated value\n" in capsys.readouterr().out


def test_shardc_view_errors(tmp_path, capsys):
    from shardc.tools.view import main

    assert main([str(tmp_path / "missing.mlir")]) == 1
    assert capsys.readouterr().err == f"shardc-view: error: cannot read '{tmp_path / 'missing.mlir'}': No such file or directory\n"
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  %0 = shard.shard\n}\n")
    assert main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:3:1: error: ") and err.endswith("\n}\n^\n")  # the source line, as shardc-opt shows it
