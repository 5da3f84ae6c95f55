//! The records of a format-v2 batch: inflating them within a bound,
//! parsing them, and encoding them again. Only the log cleaner and the
//! check of batches bound for compacted topics look inside a batch; every
//! other path stores and serves batches as they came.

use std::borrow::Cow;
use std::io::Read;

use bytes::BytesMut;
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};

use crate::batch::{Batch, Compression, HEADER_SIZE};

/// The most a batch's records may inflate to. A batch is at most
/// `max.message.bytes` compressed, but a few kilobytes of zstd can claim
/// gigabytes; this bounds the memory a batch costs the cleaner and the
/// produce check, far above what producers' batches inflate to.
pub const MAX_INFLATED_BATCH_BYTES: usize = 64 << 20;

/// Why a batch's records cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    #[error("the records inflate beyond {limit} bytes")]
    TooLarge { limit: usize },
    #[error("cannot decompress {codec:?}: {reason}")]
    Decompress { codec: Compression, reason: String },
    #[error("malformed records: {0}")]
    Malformed(String),
}

/// The records section of `batch`, inflated if the batch is compressed,
/// refusing to inflate beyond `limit` bytes.
pub fn inflate(batch: Batch<'_>, limit: usize) -> Result<Cow<'_, [u8]>, RecordsError> {
    let codec = batch.header.compression().expect("validated batch");
    let data = &batch.bytes[HEADER_SIZE..];
    let failed = |reason: String| RecordsError::Decompress { codec, reason };
    let plain = match codec {
        Compression::None => return Ok(Cow::Borrowed(data)),
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(data), limit),
        Compression::Zstd => {
            let decoder =
                zstd::stream::read::Decoder::new(data).map_err(|e| failed(e.to_string()))?;
            read_bounded(decoder, limit)
        }
        Compression::Lz4 => {
            let decoder = lz4::Decoder::new(data).map_err(|e| failed(e.to_string()))?;
            read_bounded(decoder, limit)
        }
        Compression::Snappy => inflate_snappy(data, limit),
    };
    match plain {
        Ok(Some(plain)) => Ok(Cow::Owned(plain)),
        Ok(None) => Err(RecordsError::TooLarge { limit }),
        Err(reason) => Err(failed(reason)),
    }
}

/// Reads `reader` to its end; `None` once it yields more than `limit` bytes.
fn read_bounded(reader: impl Read, limit: usize) -> Result<Option<Vec<u8>>, String> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    Ok((out.len() <= limit).then_some(out))
}

/// Kafka's snappy: the Java client's xerial framing (a magic header, then
/// length-prefixed blocks), or one raw block from other clients. Each
/// block states its inflated length, checked before anything is allocated.
fn inflate_snappy(data: &[u8], limit: usize) -> Result<Option<Vec<u8>>, String> {
    const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
    let mut blocks = Vec::new();
    match data.strip_prefix(XERIAL_MAGIC.as_slice()) {
        None => blocks.push(data),
        Some(mut framed) => {
            while !framed.is_empty() {
                let (length, tail) = framed
                    .split_first_chunk::<4>()
                    .ok_or("truncated snappy block length")?;
                let length = u32::from_be_bytes(*length) as usize;
                if length > tail.len() {
                    return Err("truncated snappy block".into());
                }
                blocks.push(&tail[..length]);
                framed = &tail[length..];
            }
        }
    }
    let mut out = Vec::new();
    let mut decoder = snap::raw::Decoder::new();
    for block in blocks {
        let length = snap::raw::decompress_len(block).map_err(|e| e.to_string())?;
        if out.len().saturating_add(length) > limit {
            return Ok(None);
        }
        let start = out.len();
        out.resize(start + length, 0);
        decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| e.to_string())?;
    }
    Ok(Some(out))
}

/// The index within `batch` of each record without a key: what a
/// compacted topic refuses (Kafka's "Compacted topic cannot accept message
/// without key"). Inflates at most [`MAX_INFLATED_BATCH_BYTES`].
pub fn keyless_records(batch: Batch<'_>) -> Result<Vec<i32>, RecordsError> {
    let plain = inflate(batch, MAX_INFLATED_BATCH_BYTES)?;
    let records =
        parse_records(&plain, batch.header.record_count()).map_err(RecordsError::Malformed)?;
    Ok((0..)
        .zip(&records)
        .filter(|(_, record)| record.key.is_none())
        .map(|(index, _)| index)
        .collect())
}

/// A record whose timestamp falls outside the range a topic accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    /// The record's index within its batch.
    pub index: i32,
    /// Its offset as the producer numbered it (the batch's base offset
    /// plus its delta).
    pub offset: i64,
    pub timestamp: i64,
}

/// Each record of `batch` whose timestamp is outside `earliest..=latest`
/// (records without a timestamp, -1, are not checked). Inflates at most
/// [`MAX_INFLATED_BATCH_BYTES`].
pub fn timestamps_out_of_range(
    batch: Batch<'_>,
    earliest: i64,
    latest: i64,
) -> Result<Vec<OutOfRange>, RecordsError> {
    let plain = inflate(batch, MAX_INFLATED_BATCH_BYTES)?;
    let records =
        parse_records(&plain, batch.header.record_count()).map_err(RecordsError::Malformed)?;
    let base = batch.header.base_timestamp();
    Ok((0..)
        .zip(&records)
        .filter_map(|(index, record)| {
            let timestamp = base.wrapping_add(record.timestamp_delta);
            let outside = timestamp != -1 && !(earliest..=latest).contains(&timestamp);
            outside.then(|| OutOfRange {
                index,
                offset: batch.header.base_offset() + i64::from(record.offset_delta),
                timestamp,
            })
        })
        .collect())
}

/// A record's offset and the value of one of its headers, if it has it.
pub type OffsetHeader = (i64, Option<Vec<u8>>);

/// The offset of each record of `batch`, with the value of its header
/// named `header` if it has one (the first such header). Inflates at most
/// [`MAX_INFLATED_BATCH_BYTES`].
pub fn offsets_with_header(
    batch: Batch<'_>,
    header: &str,
) -> Result<Vec<OffsetHeader>, RecordsError> {
    let plain = inflate(batch, MAX_INFLATED_BATCH_BYTES)?;
    let base = batch.header.base_offset();
    let count = batch.header.record_count();
    // Offsets without gaps (not compacted) and no byte run spelling the
    // header's name: no record needs parsing.
    if i64::from(count) == i64::from(batch.header.last_offset_delta()) + 1
        && memchr::memmem::find(&plain, header.as_bytes()).is_none()
    {
        return Ok((base..base + i64::from(count)).map(|o| (o, None)).collect());
    }
    let records = parse_records(&plain, count).map_err(RecordsError::Malformed)?;
    records
        .iter()
        .map(|record| {
            let value =
                header_value(record.rest, header.as_bytes()).map_err(RecordsError::Malformed)?;
            Ok((base + i64::from(record.offset_delta), value))
        })
        .collect()
}

/// The value of the first header named `name` in a record's key, value and
/// headers section.
fn header_value(rest: &[u8], name: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut at = 0;
    read_bytes(rest, &mut at)?; // key
    read_bytes(rest, &mut at)?; // value
    let count = read_varint(rest, &mut at)?;
    for _ in 0..count.max(0) {
        let key = read_bytes(rest, &mut at)?.ok_or("a header without a name")?;
        let value = read_bytes(rest, &mut at)?;
        if key == name {
            return Ok(value.map(<[u8]>::to_vec));
        }
    }
    Ok(None)
}

/// One record of a batch, borrowed from the uncompressed record bytes.
pub(crate) struct RecordView<'a> {
    /// The whole record, its length prefix included.
    pub(crate) raw: &'a [u8],
    pub(crate) attributes: u8,
    pub(crate) timestamp_delta: i64,
    pub(crate) offset_delta: i32,
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) value_is_null: bool,
    /// From the key length to the end of the record (key, value, headers).
    pub(crate) rest: &'a [u8],
}

/// Splits uncompressed record bytes into `count` records.
pub(crate) fn parse_records(buf: &[u8], count: i32) -> Result<Vec<RecordView<'_>>, String> {
    let mut records = Vec::with_capacity((count.max(0) as usize).min(buf.len()));
    let mut at = 0;
    for i in 0..count.max(0) {
        let start = at;
        let length = read_varint(buf, &mut at)?;
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| at.checked_add(l))
            .filter(|&end| end <= buf.len())
            .ok_or_else(|| format!("record {i}: length {length} runs past the records"))?;
        let body = &buf[..end];
        let attributes = *body.get(at).ok_or("record without attributes")?;
        at += 1;
        let timestamp_delta = read_varlong(body, &mut at)?;
        let offset_delta = read_varint(body, &mut at)?;
        if offset_delta < 0 {
            return Err(format!("record {i}: negative offset delta {offset_delta}"));
        }
        let rest_start = at;
        let key = read_bytes(body, &mut at)?;
        let value = read_bytes(body, &mut at)?;
        records.push(RecordView {
            raw: &buf[start..end],
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value_is_null: value.is_none(),
            rest: &buf[rest_start..end],
        });
        at = end;
    }
    Ok(records)
}

/// Encodes `record` again with a new timestamp delta.
pub(crate) fn encode_record(out: &mut Vec<u8>, record: &RecordView<'_>, timestamp_delta: i64) {
    let mut head = Vec::with_capacity(16);
    head.push(record.attributes);
    write_varlong(&mut head, timestamp_delta);
    write_varint(&mut head, record.offset_delta);
    write_varint(out, (head.len() + record.rest.len()) as i32);
    out.extend_from_slice(&head);
    out.extend_from_slice(record.rest);
}

fn read_unsigned(buf: &[u8], at: &mut usize, max_bytes: usize) -> Result<u64, String> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let byte = *buf.get(*at).ok_or("truncated varint")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint too long".into())
}

fn read_varint(buf: &[u8], at: &mut usize) -> Result<i32, String> {
    let u = read_unsigned(buf, at, 5)? as u32;
    Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
}

fn read_varlong(buf: &[u8], at: &mut usize) -> Result<i64, String> {
    let u = read_unsigned(buf, at, 10)?;
    Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
}

/// A length-prefixed byte string; a negative length is null.
fn read_bytes<'a>(buf: &'a [u8], at: &mut usize) -> Result<Option<&'a [u8]>, String> {
    let length = read_varint(buf, at)?;
    if length < 0 {
        return Ok(None);
    }
    let end = at
        .checked_add(length as usize)
        .filter(|&end| end <= buf.len())
        .ok_or_else(|| format!("field of {length} bytes runs past its record"))?;
    let bytes = &buf[*at..end];
    *at = end;
    Ok(Some(bytes))
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

pub(crate) fn compress(codec: Compression, plain: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = BytesMut::new();
    let put = |buf: &mut BytesMut| {
        buf.extend_from_slice(plain);
        Ok(())
    };
    let result = match codec {
        Compression::None => return Ok(plain.to_vec()),
        Compression::Gzip => Gzip::compress(&mut out, put),
        Compression::Snappy => Snappy::compress(&mut out, put),
        Compression::Lz4 => Lz4::compress(&mut out, put),
        Compression::Zstd => Zstd::compress(&mut out, put),
    };
    result
        .map(|()| out.to_vec())
        .map_err(|e| format!("cannot compress {codec:?}: {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{self, Origin};
    use crate::testing::KeyedBatch;

    #[test]
    fn varints_round_trip() {
        for value in [0, 1, -1, 63, -64, 64, 300, -300, i32::MAX, i32::MIN] {
            let mut buf = Vec::new();
            write_varint(&mut buf, value);
            let mut at = 0;
            assert_eq!(read_varint(&buf, &mut at).unwrap(), value);
            assert_eq!(at, buf.len());
        }
        for value in [0, -1, 1 << 40, -(1 << 40), i64::MAX, i64::MIN] {
            let mut buf = Vec::new();
            write_varlong(&mut buf, value);
            let mut at = 0;
            assert_eq!(read_varlong(&buf, &mut at).unwrap(), value);
        }
        assert!(read_varint(&[0x80, 0x80], &mut 0).is_err());
    }

    #[test]
    fn records_parse_and_reencode() {
        let bytes = KeyedBatch::new()
            .record(Some(b"a"), Some(b"1"))
            .record(None, Some(b"2"))
            .record(Some(b"c"), None)
            .build();
        let batch = batch::validate(&bytes, 0, Origin::Client, usize::MAX).unwrap();
        let records = parse_records(&bytes[HEADER_SIZE..], batch.header.record_count()).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].key, Some(&b"a"[..]));
        assert!(records[1].key.is_none() && !records[1].value_is_null);
        assert!(records[2].value_is_null);
        let mut again = Vec::new();
        for r in &records {
            encode_record(&mut again, r, r.timestamp_delta);
        }
        assert_eq!(again, &bytes[HEADER_SIZE..]);
    }

    fn wire(codec: Compression) -> kafka_protocol::records::Compression {
        use kafka_protocol::records::Compression as Wire;
        match codec {
            Compression::None => Wire::None,
            Compression::Gzip => Wire::Gzip,
            Compression::Snappy => Wire::Snappy,
            Compression::Lz4 => Wire::Lz4,
            Compression::Zstd => Wire::Zstd,
        }
    }

    /// A batch of `records` records of `size` zero bytes each, compressed.
    fn zeros(codec: Compression, records: usize, size: usize) -> Vec<u8> {
        let value = vec![0u8; size];
        let mut batch = KeyedBatch::new().compression(wire(codec));
        for i in 0..records {
            batch = batch.record(Some(format!("k{i}").as_bytes()), Some(&value));
        }
        batch.build()
    }

    #[test]
    fn every_codec_inflates_within_the_bound_and_refuses_beyond_it() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = zeros(codec, 4, 64 << 10);
            let batch = batch::validate(&bytes, 0, Origin::Client, usize::MAX).unwrap();
            let plain = inflate(batch, 1 << 20).unwrap();
            let records = parse_records(&plain, 4).unwrap();
            assert_eq!(records.len(), 4, "{codec:?}");
            assert_eq!(records[3].key, Some(&b"k3"[..]));
            if codec != Compression::None {
                assert_eq!(
                    inflate(batch, 200 << 10),
                    Err(RecordsError::TooLarge { limit: 200 << 10 }),
                    "{codec:?}"
                );
            }
        }
    }

    #[test]
    fn a_decompression_bomb_costs_no_more_than_the_bound() {
        // 256 MiB of zeros in a few kilobytes of zstd.
        let bytes = zeros(Compression::Zstd, 256, 1 << 20);
        assert!(bytes.len() < 256 << 10, "{} bytes", bytes.len());
        let batch = batch::validate(&bytes, 0, Origin::Client, usize::MAX).unwrap();
        assert_eq!(
            keyless_records(batch),
            Err(RecordsError::TooLarge {
                limit: MAX_INFLATED_BATCH_BYTES
            })
        );
    }

    #[test]
    fn keyless_records_are_named_by_their_index() {
        for codec in [Compression::None, Compression::Zstd] {
            let bytes = KeyedBatch::new()
                .compression(wire(codec))
                .record(Some(b"a"), Some(b"1"))
                .record(None, Some(b"2"))
                .record(Some(b"c"), None)
                .record(None, None)
                .build();
            let batch = batch::validate(&bytes, 0, Origin::Client, usize::MAX).unwrap();
            assert_eq!(keyless_records(batch), Ok(vec![1, 3]));
        }
    }

    #[test]
    fn each_record_is_listed_with_the_header_asked_for() {
        for codec in [Compression::None, Compression::Lz4] {
            let bytes = KeyedBatch::new()
                .compression(wire(codec))
                .record(Some(b"a"), Some(b"1"))
                .header("trace", b"t1")
                .header("weir-deliver-at", b"1700000005000")
                .record(None, Some(b"2"))
                .record(Some(b"c"), None)
                .header("weir-deliver-at", b"1700000009000")
                .build();
            let batch = batch::validate(&bytes, 0, Origin::Client, usize::MAX).unwrap();
            assert_eq!(
                offsets_with_header(batch, "weir-deliver-at"),
                Ok(vec![
                    (0, Some(b"1700000005000".to_vec())),
                    (1, None),
                    (2, Some(b"1700000009000".to_vec())),
                ])
            );
        }
    }

    #[test]
    fn records_without_the_header_are_listed_with_none() {
        for codec in [Compression::None, Compression::Lz4] {
            let bytes = KeyedBatch::new()
                .compression(wire(codec))
                .record(Some(b"a"), Some(b"1"))
                .header("trace", b"t1")
                .record(None, Some(b"weir-deliver-at"))
                .record(Some(b"c"), None)
                .build();
            let batch = batch::validate(&bytes, 0, Origin::Client, usize::MAX).unwrap();
            assert_eq!(
                offsets_with_header(batch, "weir-deliver-at"),
                Ok(vec![(0, None), (1, None), (2, None)])
            );
            assert_eq!(
                offsets_with_header(batch, "absent"),
                Ok(vec![(0, None), (1, None), (2, None)])
            );
        }
    }

    #[test]
    fn corrupt_compressed_records_are_an_error() {
        let mut bytes = zeros(Compression::Gzip, 2, 1024);
        let end = bytes.len();
        bytes[end - 20..].fill(0xff);
        let batch = batch::BatchHeader::parse(&bytes, 0).unwrap();
        let batch = Batch {
            header: batch,
            bytes: &bytes,
        };
        assert!(matches!(
            inflate(batch, 1 << 20),
            Err(RecordsError::Decompress {
                codec: Compression::Gzip,
                ..
            })
        ));
    }
}
