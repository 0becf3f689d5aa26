"""What an image file declares before it is decoded: format, width, height, colour.

A 57-byte PNG can declare 60000 x 60000 pixels; the decoder would try to allocate 10 GB and
crash the process. Every file's header is read (a few hundred bytes) and checked against
MAX_PIXELS first, and the folder's colour mode is decided from the headers, so both data
paths convert every image the same way without decoding anything twice.
"""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...errors import DataError

MAX_PIXELS = 8192 * 8192  # per image, as declared in its header (67,108,864)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_COLOUR = {0: False, 2: True, 3: True, 4: False, 6: True}  # colour type -> colour (3: palette)
_JPEG_SOF = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # frame headers (not DHT/JPG/DAC)
_JPEG_STANDALONE = set(range(0xD0, 0xD8)) | {0x01}
_JPEG_MAX_SEGMENTS = 10_000


@dataclass(frozen=True)
class Header:
    width: int
    height: int
    colour: bool  # RGB(A) or palette; False: grey (with or without alpha)


def read_header(path: Path, data: bytes | None = None) -> Header:
    """The file's declared size and colour (read from `data`, its bytes, when given); a
    DataError naming the file when it is no PNG or JPEG, is cut short, declares no pixels or
    more than MAX_PIXELS."""
    try:
        with io.BytesIO(data) if data is not None else open(path, "rb") as f:
            header = _parse(f)
    except OSError as exc:
        raise DataError(f"cannot read image {path}: {exc.strerror or exc}") from None
    except DataError as exc:
        raise DataError(f"cannot decode image {path}: {exc}") from None
    if header.width < 1 or header.height < 1:
        raise DataError(f"cannot decode image {path}: it declares {header.width} x {header.height} pixels")
    if header.width * header.height > MAX_PIXELS:
        raise DataError(
            f"image {path} declares {header.width} x {header.height} pixels, more than the "
            f"limit of {MAX_PIXELS:,} per image"
        )
    return header


def _parse(f: BinaryIO) -> Header:
    head = f.read(8)
    if head == PNG_SIGNATURE:
        return _png(f.read(25))
    if head[:2] == b"\xff\xd8":
        f.seek(2)
        return _jpeg(f)
    raise DataError("not a PNG or JPEG file")


def _png(ihdr: bytes) -> Header:
    if len(ihdr) < 25 or ihdr[4:8] != b"IHDR":
        raise DataError("truncated PNG header")
    width, height, _, colour_type = struct.unpack(">IIBB", ihdr[8:18])
    if colour_type not in PNG_COLOUR:
        raise DataError(f"unknown PNG colour type {colour_type}")
    return Header(width, height, PNG_COLOUR[colour_type])


def _jpeg(f: BinaryIO) -> Header:
    """Walk the markers to the frame header (SOFn): its height, width and component count."""
    for _ in range(_JPEG_MAX_SEGMENTS):
        marker = f.read(2)
        while len(marker) == 2 and marker[0] == 0xFF and marker[1] == 0xFF:  # fill bytes
            marker = marker[1:] + f.read(1)
        if len(marker) < 2 or marker[0] != 0xFF:
            break
        if marker[1] in _JPEG_STANDALONE:
            continue
        size = f.read(2)
        if len(size) < 2:
            break
        length = struct.unpack(">H", size)[0]
        if marker[1] in _JPEG_SOF:
            frame = f.read(6)
            if len(frame) < 6:
                break
            _, height, width, components = struct.unpack(">BHHB", frame)
            return Header(width, height, components >= 3)
        if length < 2 or marker[1] == 0xD9:
            break
        f.seek(length - 2, 1)
    raise DataError("no JPEG frame header (truncated or not a JPEG)")


def check_png_chunks(raw: bytes) -> None:
    """Every chunk whole and its CRC right, up to IEND: what libpng checks and Pillow, which
    decodes our PNGs, does not for image data (a flipped byte could decode to other pixels)."""
    at = len(PNG_SIGNATURE)
    while at + 12 <= len(raw):
        length = struct.unpack(">I", raw[at : at + 4])[0]
        end = at + 12 + length
        if end > len(raw):
            break
        kind = raw[at + 4 : at + 8]
        if zlib.crc32(raw[at + 4 : end - 4]) != struct.unpack(">I", raw[end - 4 : end])[0]:
            raise DataError(f"{kind.decode('latin-1')!r} chunk has a bad CRC (damaged file)")
        if kind == b"IEND":
            return
        at = end
    raise DataError("truncated PNG (it ends before its IEND chunk)")
