"""Encoding of record batches into log block payloads.

A block payload is one byte of format tag followed by a msgpack array ``[header, records...]``, optionally
compressed with zstandard when that saves space. The header is the highest command position the stream processor had
processed when the block was written (replay uses it to know which commands still wait), or ``[processed_position,
{exporter id: acknowledged position}]`` when the leader also reports its exporters' progress, so that replicas (and a
future leader) know how far the log may be compacted.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack
import zstandard

from broker.protocol.enums import RecordType, RejectionType, ValueType
from broker.protocol.record import Record, RequestMetadata

_PLAIN = 0
_ZSTD = 1
_COMPRESS_ABOVE = 1024

# zstandard (de)compressor objects are not thread-safe: each thread gets its own pair.
_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    c = getattr(_local, "compressor", None)
    if c is None:
        c = _local.compressor = zstandard.ZstdCompressor(level=1)
    return c


def _decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "decompressor", None)
    if d is None:
        d = _local.decompressor = zstandard.ZstdDecompressor()
    return d


# Decoding maps enum codes back through these lookups (faster than calling the enum on every record).
_RECORD_TYPES = {int(m): m for m in RecordType}
_VALUE_TYPES = {int(m): m for m in ValueType}
_REJECTION_TYPES = {int(m): m for m in RejectionType}


class CodecError(ValueError):
    """A block payload could not be decoded: the data is not what the log's checksum promised."""


def record_to_list(r: Record) -> list[Any]:
    """A record as a flat list, the compact form used in blocks and on the command API."""
    req = r.request
    out = [
        r.position,
        r.key,
        r.record_type,  # the enums are ints: msgpack writes them as such
        r.value_type,
        r.intent,
        r.timestamp,
        r.source_position,
        r.value,
        r.rejection_type,
        r.rejection_reason,
        req.stream_id if req else -1,
        req.request_id if req else -1,
        r.partition_id,
    ]
    if r.authorization is not None:  # only client commands of an authenticated caller carry one
        out.append(r.authorization)
    return out


def encode_block(
    processed_position: int, records: list[Record], exporter_positions: dict[str, int] | None = None
) -> bytes:
    """Encode a batch of records (already carrying their positions) into a block payload."""
    header: Any = [processed_position, exporter_positions] if exporter_positions else processed_position
    body = msgpack.packb([header, *(record_to_list(r) for r in records)], use_bin_type=True)
    if len(body) > _COMPRESS_ABOVE:
        compressed = _compressor().compress(body)
        if len(compressed) < len(body):
            return bytes((_ZSTD,)) + compressed
    return bytes((_PLAIN,)) + body


def decode_block(payload: bytes) -> tuple[int, list[Record]]:
    """Decode a block payload into ``(processed_position, records)``."""
    processed, _exporters, records = decode_block_full(payload)
    return processed, records


def decode_block_full(payload: bytes) -> tuple[int, dict[str, int] | None, list[Record]]:
    """Decode a block payload into ``(processed_position, exporter positions or None, records)``."""
    if not payload:
        raise CodecError("empty block payload")
    tag = payload[0]
    try:
        if tag == _PLAIN:
            body = payload[1:]
        elif tag == _ZSTD:
            body = _decompressor().decompress(payload[1:])
        else:
            raise CodecError(f"unknown block format tag {tag}")
        items = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (zstandard.ZstdError, msgpack.UnpackException, ValueError) as e:
        raise CodecError(f"undecodable block payload: {e}") from e
    header = items[0]
    if isinstance(header, list):
        processed_position, exporters = header[0], header[1]
    else:
        processed_position, exporters = header, None
    return processed_position, exporters, [record_from_list(it) for it in items[1:]]


def record_from_list(it: list[Any]) -> Record:
    stream_id, request_id = it[10], it[11]
    return Record(
        position=it[0],
        key=it[1],
        record_type=_RECORD_TYPES[it[2]],
        value_type=_VALUE_TYPES[it[3]],
        intent=it[4],
        timestamp=it[5],
        source_position=it[6],
        value=it[7],
        rejection_type=_REJECTION_TYPES[it[8]],
        rejection_reason=it[9],
        request=RequestMetadata(stream_id, request_id) if request_id >= 0 else None,
        partition_id=it[12],
        authorization=it[13] if len(it) > 13 else None,
    )
