"""JPEG streams built byte by byte for the integrity and bomb tests: a valid progressive JPEG of
any number of scans (a "scan bomb"), and damage inside a baseline JPEG's entropy-coded data."""

import struct

__all__ = ["entropy_span", "flip_bit", "scan_bomb", "zero_run"]


def _segment(marker, payload):
    return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload


def _pack_bits(bits):
    """Entropy-coded bytes of a bit string ('0'/'1'): padded with 1-bits, 0xFF stuffed."""
    bits += "1" * (-len(bits) % 8)
    raw = int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""
    return raw.replace(b"\xff", b"\xff\x00")


def _eob_runs(blocks):
    """AC scan data ending the band of ``blocks`` blocks with EOB runs (EOBr: symbol ``r``,
    coded on 4 bits by this file's AC table, then ``r`` bits of ``run - 2**r``)."""
    bits = []
    while blocks:
        r = min(14, blocks.bit_length() - 1)
        run = min(blocks, (1 << (r + 1)) - 1)
        bits.append(format(r, "04b") + (format(run - (1 << r), f"0{r}b") if r else ""))
        blocks -= run
    return "".join(bits)


def scan_bomb(height, width, scans, components=1, refinements=10):
    """A valid progressive JPEG (SOF2, Huffman) of a flat grey ``height`` x ``width`` image in
    ``scans`` scans (at most ``1 + components * 63 * (refinements + 1)``): one DC scan, then per
    component and AC coefficient a first scan with ``Al = refinements`` and one refinement scan
    per bit. Every coefficient is 0, so each scan is a few bytes, yet a decoder makes a pass over
    every block of the component per scan: libjpeg-turbo's ``-maxscans`` case."""
    most = 1 + components * 63 * (refinements + 1)
    if not 1 <= scans <= most:
        raise ValueError(f"scans must be in [1, {most}]")
    blocks = ((height + 7) // 8) * ((width + 7) // 8)
    ids = range(1, components + 1)
    out = [b"\xff\xd8", _segment(0xDB, b"\x00" + b"\x01" * 64),
           _segment(0xC2, struct.pack(">BHHB", 8, height, width, components)
                    + b"".join(struct.pack(">BBB", i, 0x11, 0) for i in ids)),
           # DC: one code, '0' for category 0; AC: EOB0..EOB14 coded as r on 4 bits
           _segment(0xC4, b"\x00" + bytes([1] + [0] * 15) + b"\x00"),
           _segment(0xC4, b"\x10" + bytes([0, 0, 0, 15] + [0] * 12) + bytes(range(0, 0xF0, 0x10)))]
    heads = [(tuple(ids), 0, 0, 0, 0)]
    for component in ids:
        for k in range(1, 64):
            heads.append(((component,), k, k, 0, refinements))
            heads += [((component,), k, k, a, a - 1) for a in range(refinements, 0, -1)]
    for comps, ss, se, ah, al in heads[:scans]:
        head = bytes([len(comps)]) + b"".join(bytes([c, 0x00]) for c in comps)
        out.append(_segment(0xDA, head + bytes([ss, se, ah << 4 | al])))
        out.append(_pack_bits("0" * blocks * len(comps) if ss == 0 else _eob_runs(blocks)))
    out.append(b"\xff\xd9")
    return b"".join(out)


def entropy_span(jpeg):
    """``(start, end)``: the entropy-coded data of a baseline JPEG's scan (after the SOS
    segment, before EOI)."""
    pos = 2
    while True:
        marker = jpeg[pos + 1]
        length = struct.unpack_from(">H", jpeg, pos + 2)[0]
        if marker == 0xDA:
            start = pos + 2 + length
            return start, jpeg.rindex(b"\xff\xd9")
        pos += 2 + length


def flip_bit(jpeg, offset, bit):
    data = bytearray(jpeg)
    data[offset] ^= 1 << bit
    return bytes(data)


def zero_run(jpeg, offset, length):
    data = bytearray(jpeg)
    data[offset:offset + length] = bytes(length)
    return bytes(data)
