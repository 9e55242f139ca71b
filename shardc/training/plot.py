"""A loss-curve PNG without a plotting library: lines rasterised with numpy, the file
written with zlib (PNG is a signature and three CRC'd chunks). Axis ranges are written
as small digits with a built-in 3x5 font, so the picture reads on its own.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_FONT = {  # 3x5 glyphs, rows top to bottom, 3 bits each
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "-": "000000111000000",
    "e": "000111101110011", " ": "000000000000000",
}


def write_png(path: str | Path, rgb: np.ndarray) -> None:
    """Write an (H, W, 3) uint8 image."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _line(img: np.ndarray, x0: float, y0: float, x1: float, y1: float, color: Sequence[int], width: int = 1) -> None:
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = np.rint(np.linspace(x0, x1, n)).astype(int)
    ys = np.rint(np.linspace(y0, y1, n)).astype(int)
    h, w, _ = img.shape
    for dx in range(-(width // 2), width - width // 2):
        for dy in range(-(width // 2), width - width // 2):
            x, y = xs + dx, ys + dy
            ok = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            img[y[ok], x[ok]] = color


def _text(img: np.ndarray, x: int, y: int, text: str, color: Sequence[int], scale: int = 2) -> None:
    for i, ch in enumerate(text):
        glyph = _FONT.get(ch, _FONT[" "])
        for r in range(5):
            for c in range(3):
                if glyph[r * 3 + c] == "1":
                    y0, x0 = y + r * scale, x + (i * 4 + c) * scale
                    img[y0 : y0 + scale, x0 : x0 + scale] = color


def _fmt(v: float) -> str:
    return f"{v:.3g}".replace("e+0", "e").replace("e-0", "e-")


def plot_losses(path: str | Path, losses: Sequence[float], evals: Sequence[tuple[int, float]] = (), size: tuple[int, int] = (640, 400)) -> None:
    """The training loss per step (blue) and held-out losses (orange dots) as a PNG."""
    w, h = size
    img = np.full((h, w, 3), 255, np.uint8)
    left, right, top, bottom = 70, w - 20, 20, h - 40
    values = [*losses, *(v for _, v in evals)]
    finite = [v for v in values if np.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    steps = max(len(losses), max((s for s, _ in evals), default=1), 2)

    def xy(step: float, v: float) -> tuple[float, float]:
        return left + (step - 1) / (steps - 1) * (right - left), bottom - (v - lo) / (hi - lo) * (bottom - top)

    grey, black = (200, 200, 200), (0, 0, 0)
    for k in range(5):
        y = top + k * (bottom - top) / 4
        _line(img, left, y, right, y, grey)
    _line(img, left, top, left, bottom, black)
    _line(img, left, bottom, right, bottom, black)
    _text(img, 4, top - 4, _fmt(hi), black)
    _text(img, 4, bottom - 6, _fmt(lo), black)
    _text(img, left, bottom + 10, "1", black)
    _text(img, right - 8 * len(str(steps)), bottom + 10, str(steps), black)
    pts = [xy(i + 1, v) for i, v in enumerate(losses) if np.isfinite(v)]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        _line(img, x0, y0, x1, y1, (31, 119, 180), 2)
    for s, v in evals:
        x, y = xy(s, v)
        img[max(0, int(y) - 3) : int(y) + 4, max(0, int(x) - 3) : int(x) + 4] = (255, 127, 14)
    write_png(path, img)


__all__ = ["plot_losses", "write_png"]
