"""The on-disk frame around one log block: a fixed header with a checksum, then the payload.

Layout (little-endian, 32-byte header):

    offset  size  field
         0     4  magic b"WLOG"
         4     2  format version (1)
         6     2  flags (0; reserved so a later version can add e.g. a payload codec without a new magic)
         8     4  payload length in bytes
        12     8  first position
        20     8  last position
        28     4  CRC32 of bytes 0..27 followed by the payload
        32     n  payload

The checksum covers the header fields too, so a torn or flipped length or position is caught just like a
flipped payload byte. CRC32 from zlib runs at C speed.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass

from broker.log.storage import LogBlock

MAGIC = b"WLOG"
FORMAT_VERSION = 1
# A bound on any single block: keeps a garbage length field from asking for gigabytes during recovery.
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024

_PREFIX = struct.Struct("<4sHHIQQ")
_CRC = struct.Struct("<I")
HEADER_SIZE = _PREFIX.size + _CRC.size
_MAX_POSITION = 2**64 - 1


@dataclass(frozen=True, slots=True)
class FrameHeader:
    """The decoded header of a frame whose checksum has not necessarily been verified yet."""

    payload_length: int
    first_position: int
    last_position: int
    crc: int

    @property
    def frame_size(self) -> int:
        return HEADER_SIZE + self.payload_length


class FrameError(Exception):
    """A frame could not be decoded or verified.

    - `incomplete` is True when the bytes end before the frame does (the typical torn write).
    - `header` is set when the header itself decoded, so its positions can be named in a report.
    """

    def __init__(self, reason: str, *, incomplete: bool = False, header: FrameHeader | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.incomplete = incomplete
        self.header = header


def encode_header(block: LogBlock) -> bytes:
    """Return the 32-byte header for `block`; the caller writes it followed by the payload."""
    payload = block.payload
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"block payload of {len(payload)} bytes exceeds the limit of {MAX_PAYLOAD_BYTES} bytes")
    if block.last_position > _MAX_POSITION:
        raise ValueError(f"block last_position {block.last_position} does not fit in 64 bits")
    prefix = _PREFIX.pack(MAGIC, FORMAT_VERSION, 0, len(payload), block.first_position, block.last_position)
    return prefix + _CRC.pack(zlib.crc32(payload, zlib.crc32(prefix)))


def decode_header(data: bytes | mmap.mmap, offset: int) -> FrameHeader:
    """Decode and sanity-check the header at `offset`; the payload checksum is checked by `verify_frame`."""
    available = len(data) - offset
    if available < HEADER_SIZE:
        raise FrameError(f"header cut short ({available} of {HEADER_SIZE} bytes present)", incomplete=True)
    magic, version, flags, length, first, last = _PREFIX.unpack_from(data, offset)
    if magic != MAGIC:
        raise FrameError(f"bad frame magic {bytes(magic)!r}")
    (crc,) = _CRC.unpack_from(data, offset + _PREFIX.size)
    header = FrameHeader(payload_length=length, first_position=first, last_position=last, crc=crc)
    if version != FORMAT_VERSION or flags != 0:
        raise FrameError(f"unsupported frame format version {version} flags {flags:#x}", header=header)
    if length > MAX_PAYLOAD_BYTES or first < 1 or last < first:
        raise FrameError(f"malformed header (payload length {length}, positions {first}..{last})", header=header)
    if available < header.frame_size:
        raise FrameError(
            f"payload cut short ({available - HEADER_SIZE} of {length} bytes present)",
            incomplete=True,
            header=header,
        )
    return header


def verify_frame(data: bytes | mmap.mmap, offset: int) -> FrameHeader:
    """Decode the frame at `offset` and verify its checksum; raise FrameError when anything is off."""
    header = decode_header(data, offset)
    payload_start = offset + HEADER_SIZE
    with memoryview(data) as view:
        actual = zlib.crc32(
            view[payload_start : payload_start + header.payload_length],
            zlib.crc32(view[offset : payload_start - _CRC.size]),
        )
    if actual != header.crc:
        raise FrameError(f"checksum mismatch (stored {header.crc:#010x}, computed {actual:#010x})", header=header)
    return header


def payload_of(data: bytes | mmap.mmap, offset: int, header: FrameHeader) -> bytes:
    """Copy the payload of an already verified frame out of `data`."""
    start = offset + HEADER_SIZE
    return bytes(data[start : start + header.payload_length])


def valid_frame_after(data: bytes | mmap.mmap, start: int) -> int | None:
    """Return the offset of the first complete, checksum-valid frame at or after `start`, if any.

    Recovery uses this to tell a torn tail (nothing valid follows the bad frame) from damage in the middle of
    the log (valid frames follow it), without trusting the damaged frame's own length field.
    """
    candidate = data.find(MAGIC, start)
    while candidate != -1:
        try:
            verify_frame(data, candidate)
        except FrameError:
            candidate = data.find(MAGIC, candidate + 1)
        else:
            return candidate
    return None
