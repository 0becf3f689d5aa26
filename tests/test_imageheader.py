"""Image headers (engine/inputs/imageheader.py): size and colour read before decoding, the pixel limit."""

import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "reliability"))
from crafted import jpeg_header_bomb, png_header_bomb  # noqa: E402

from fineprune_cli.engine.inputs import imagefolder  # noqa: E402
from fineprune_cli.engine.inputs.imageheader import MAX_PIXELS, Header, read_header  # noqa: E402
from fineprune_cli.errors import DataError  # noqa: E402


@pytest.mark.parametrize(
    "mode, suffix, colour",
    [
        ("RGB", "png", True),
        ("L", "png", False),
        ("P", "png", True),
        ("LA", "png", False),
        ("RGBA", "png", True),
        ("RGB", "jpg", True),
        ("L", "jpg", False),
    ],
)
def test_headers_give_size_and_colour(tmp_path, mode, suffix, colour):
    path = tmp_path / f"x.{suffix}"
    Image.new(mode, (13, 7)).save(path)
    assert read_header(path) == Header(13, 7, colour)


def test_a_57_byte_png_declaring_60000_squared_is_refused_before_decoding(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_header_bomb())
    assert len(bomb.read_bytes()) == 57
    monkeypatch.setattr(imagefolder, "_decode", lambda *a: pytest.fail("decoded"))
    for call in (lambda: read_header(bomb), lambda: imagefolder.read_image(bomb, "RGB")):
        with pytest.raises(
            DataError, match=f"bomb.png declares 60000 x 60000 pixels, more than the limit of {MAX_PIXELS:,}"
        ):
            call()


def test_the_limit_is_inclusive_and_jpegs_are_checked_too(tmp_path):
    side = int(MAX_PIXELS**0.5)
    (tmp_path / "ok.png").write_bytes(png_header_bomb(side, side))
    (tmp_path / "big.jpg").write_bytes(jpeg_header_bomb(side + 1, side))
    assert read_header(tmp_path / "ok.png") == Header(side, side, True)
    with pytest.raises(DataError, match="big.jpg declares 8193 x 8192"):
        read_header(tmp_path / "big.jpg")


@pytest.mark.parametrize(
    "data, words",
    [
        (b"", "not a PNG or JPEG"),
        (b"GIF89a....", "not a PNG or JPEG"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "truncated PNG header"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "no JPEG frame header"),
        (b"\xff\xd8" + b"\xff\xe0\x00\x02" * 20000, "no JPEG frame header"),
        (png_header_bomb(0, 5), "declares 0 x 5"),
        (png_header_bomb(4, 4, colour_type=5), "colour type 5"),
    ],
)
def test_broken_headers_name_the_file(tmp_path, data, words):
    path = tmp_path / "odd.png"
    path.write_bytes(data)
    with pytest.raises(DataError, match=f"odd.png.*{words}"):
        read_header(path)


def test_a_decode_failure_is_one_line_without_the_decoders_own_output(tmp_path, capfd):
    """libpng writes 'libpng error: ...' to the process's stderr before torchvision raises."""
    path = tmp_path / "crc.png"
    Image.new("RGB", (4, 4)).save(path)
    raw = bytearray(path.read_bytes())
    raw[29] ^= 0xFF  # the IHDR chunk's CRC
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="cannot decode image .*crc.png"):
        imagefolder.read_image(path, "RGB")
    assert capfd.readouterr().err == ""


def test_a_permission_error_is_not_called_a_decoding_failure(tmp_path, monkeypatch):
    path = tmp_path / "x.png"
    Image.new("RGB", (4, 4)).save(path)
    monkeypatch.setattr(
        Path, "read_bytes", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
    )
    with pytest.raises(DataError, match="cannot read image .*x.png: Permission denied"):
        imagefolder.read_image(path, "RGB")


def test_read_image_converts_to_the_mode_asked(tmp_path):
    im = Image.new("P", (4, 4), 0)
    im.putpalette([250, 5, 5] + [0] * 765)
    im.save(tmp_path / "p.png")
    assert imagefolder.read_image(tmp_path / "p.png", "RGB")[:, 0, 0].tolist() == [250, 5, 5]
    assert imagefolder.read_image(tmp_path / "p.png", "GRAY").shape == (1, 4, 4)
    assert torch.equal(
        imagefolder.read_image(tmp_path / "p.png", "RGB", 2),
        torch.tensor([250, 5, 5], dtype=torch.uint8).view(3, 1, 1).expand(3, 2, 2),
    )


def test_a_png_with_broken_image_data_is_one_error_not_a_crash(tmp_path):
    """torchvision's PNG decoder dies by SIGSEGV on an error in the data (here a zlib stream
    that is not one, under a valid header): PNGs are decoded by Pillow, which raises."""
    import struct
    import zlib

    data = b"not zlib data at all"
    idat = struct.pack(">I", len(data)) + b"IDAT" + data + struct.pack(">I", zlib.crc32(b"IDAT" + data))
    path = tmp_path / "broken.png"
    path.write_bytes(png_header_bomb(8, 8)[:33] + idat + png_header_bomb(8, 8)[-12:])
    with pytest.raises(DataError, match="cannot decode image .*broken.png"):
        imagefolder.read_image(path, "RGB")


@pytest.mark.parametrize(
    "damage, words",
    [(lambda raw: raw[:-20], "truncated PNG"), (lambda raw: raw[:45] + bytes([raw[45] ^ 1]) + raw[46:], "bad CRC")],
)
def test_a_cut_or_flipped_png_is_refused_not_decoded_to_other_pixels(tmp_path, damage, words):
    from io import BytesIO

    buf = BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(buf, "PNG")
    path = tmp_path / "x.png"
    path.write_bytes(damage(buf.getvalue()))
    with pytest.raises(DataError, match=f"cannot decode image .*x.png: .*{words}"):
        imagefolder.read_image(path, "RGB")
