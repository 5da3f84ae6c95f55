//! Kafka record batches, format v2 (magic 2): the 61-byte header, read and
//! validated without touching (or decompressing) the records behind it.
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            (assigned by the log, outside the CRC)
//!      8     4  batchLength           (bytes after this field)
//!     12     4  partitionLeaderEpoch  (assigned by the log, outside the CRC)
//!     16     1  magic = 2
//!     17     4  crc                   (CRC-32C of bytes 21..end)
//!     21     2  attributes
//!     23     4  lastOffsetDelta
//!     27     8  baseTimestamp
//!     35     8  maxTimestamp
//!     43     8  producerId
//!     51     2  producerEpoch
//!     53     4  baseSequence
//!     57     4  recordCount
//!     61     …  records
//! ```

use std::fmt;

/// Size of the fixed batch header.
pub const HEADER_SIZE: usize = 61;
/// Bytes that precede `batchLength`'s coverage: baseOffset and batchLength.
pub const LOG_OVERHEAD: usize = 12;
/// The only record batch format this log stores.
pub const MAGIC: i8 = 2;
/// Kafka's default `max.message.bytes` (1 MiB plus the log overhead).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024 + LOG_OVERHEAD;

const BASE_OFFSET: usize = 0;
const BATCH_LENGTH: usize = 8;
const LEADER_EPOCH: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const RECORD_COUNT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
const DELETE_HORIZON_BIT: i16 = 0x40;

/// Why a batch was refused. Each variant names the position of the batch in
/// the buffer it was read from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error(
        "record batch at byte {position}: magic {magic}, only format v2 (magic 2) is supported"
    )]
    WrongMagic { position: usize, magic: i8 },
    #[error("record batch at byte {position}: CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    CrcMismatch {
        position: usize,
        stored: u32,
        computed: u32,
    },
    #[error("record batch at byte {position}: {needed} bytes needed, {available} available")]
    Truncated {
        position: usize,
        needed: usize,
        available: usize,
    },
    #[error("record batch at byte {position}: batchLength {length} is below the header size")]
    LengthTooSmall { position: usize, length: i32 },
    #[error("record batch at byte {position}: {record_count} records inconsistent with lastOffsetDelta {last_offset_delta}")]
    RecordCountMismatch {
        position: usize,
        record_count: i32,
        last_offset_delta: i32,
    },
    #[error("record batch at byte {position}: {size} bytes exceeds max.message.bytes {max}")]
    TooLarge {
        position: usize,
        size: usize,
        max: usize,
    },
    #[error("record batch at byte {position}: unknown compression codec {codec}")]
    UnknownCompression { position: usize, codec: i16 },
}

/// Compression codec named by a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    fn from_attributes(attributes: i16) -> Option<Self> {
        Some(match attributes & COMPRESSION_MASK {
            0 => Self::None,
            1 => Self::Gzip,
            2 => Self::Snappy,
            3 => Self::Lz4,
            4 => Self::Zstd,
            _ => return None,
        })
    }
}

/// How strictly to check the relation between record count and offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Sent by a producer: every offset in the batch carries a record.
    Client,
    /// Already in a log (replicated or read back): compaction may have left
    /// gaps, so a batch may hold fewer records than offsets.
    Log,
}

/// A view of a validated batch header.
#[derive(Clone, Copy)]
pub struct BatchHeader<'a> {
    bytes: &'a [u8],
}

impl<'a> BatchHeader<'a> {
    /// Reads the header at the front of `buf` without checking the CRC or the
    /// records: enough to walk a log. `position` is only used in errors.
    pub fn parse(buf: &'a [u8], position: usize) -> Result<Self, BatchError> {
        if buf.len() < HEADER_SIZE {
            return Err(BatchError::Truncated {
                position,
                needed: HEADER_SIZE,
                available: buf.len(),
            });
        }
        let header = BatchHeader {
            bytes: &buf[..HEADER_SIZE],
        };
        if header.magic() != MAGIC {
            return Err(BatchError::WrongMagic {
                position,
                magic: header.magic(),
            });
        }
        let length = header.batch_length_field();
        if length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
            return Err(BatchError::LengthTooSmall { position, length });
        }
        Ok(header)
    }

    pub fn base_offset(&self) -> i64 {
        read_i64(self.bytes, BASE_OFFSET)
    }
    fn batch_length_field(&self) -> i32 {
        read_i32(self.bytes, BATCH_LENGTH)
    }
    /// Size of the whole batch in bytes, header included.
    pub fn total_size(&self) -> usize {
        self.batch_length_field() as usize + LOG_OVERHEAD
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        read_i32(self.bytes, LEADER_EPOCH)
    }
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC_OFFSET] as i8
    }
    pub fn crc(&self) -> u32 {
        read_i32(self.bytes, CRC) as u32
    }
    pub fn attributes(&self) -> i16 {
        read_i16(self.bytes, ATTRIBUTES)
    }
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_attributes(self.attributes())
    }
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & TIMESTAMP_TYPE_BIT != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON_BIT != 0
    }
    pub fn last_offset_delta(&self) -> i32 {
        read_i32(self.bytes, LAST_OFFSET_DELTA)
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.last_offset_delta())
    }
    /// One past the last offset of the batch: where the next batch starts.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn base_timestamp(&self) -> i64 {
        read_i64(self.bytes, BASE_TIMESTAMP)
    }
    pub fn max_timestamp(&self) -> i64 {
        read_i64(self.bytes, MAX_TIMESTAMP)
    }
    pub fn producer_id(&self) -> i64 {
        read_i64(self.bytes, PRODUCER_ID)
    }
    pub fn producer_epoch(&self) -> i16 {
        read_i16(self.bytes, PRODUCER_EPOCH)
    }
    pub fn base_sequence(&self) -> i32 {
        read_i32(self.bytes, BASE_SEQUENCE)
    }
    pub fn record_count(&self) -> i32 {
        read_i32(self.bytes, RECORD_COUNT)
    }
}

impl fmt::Debug for BatchHeader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchHeader")
            .field("base_offset", &self.base_offset())
            .field("total_size", &self.total_size())
            .field("partition_leader_epoch", &self.partition_leader_epoch())
            .field("attributes", &self.attributes())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("max_timestamp", &self.max_timestamp())
            .field("record_count", &self.record_count())
            .finish()
    }
}

/// A whole batch (header and records), checked end to end.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    pub header: BatchHeader<'a>,
    /// The whole batch, `header.total_size()` bytes.
    pub bytes: &'a [u8],
}

/// Validates the batch at the front of `buf`: header, length, CRC, record
/// count and size limit. `position` is only used in errors.
pub fn validate(
    buf: &[u8],
    position: usize,
    origin: Origin,
    max_message_bytes: usize,
) -> Result<Batch<'_>, BatchError> {
    let header = BatchHeader::parse(buf, position)?;
    let size = header.total_size();
    if size > buf.len() {
        return Err(BatchError::Truncated {
            position,
            needed: size,
            available: buf.len(),
        });
    }
    if size > max_message_bytes {
        return Err(BatchError::TooLarge {
            position,
            size,
            max: max_message_bytes,
        });
    }
    let bytes = &buf[..size];
    let computed = crc32c::crc32c(&bytes[ATTRIBUTES..]);
    if computed != header.crc() {
        return Err(BatchError::CrcMismatch {
            position,
            stored: header.crc(),
            computed,
        });
    }
    if header.compression().is_none() {
        return Err(BatchError::UnknownCompression {
            position,
            codec: header.attributes() & COMPRESSION_MASK,
        });
    }
    let (count, delta) = (header.record_count(), header.last_offset_delta());
    let consistent = match origin {
        Origin::Client => count >= 1 && i64::from(delta) + 1 == i64::from(count),
        Origin::Log => count >= 0 && delta >= 0 && i64::from(count) <= i64::from(delta) + 1,
    };
    if !consistent {
        return Err(BatchError::RecordCountMismatch {
            position,
            record_count: count,
            last_offset_delta: delta,
        });
    }
    Ok(Batch { header, bytes })
}

/// Iterates over the validated batches of a buffer holding batches back to
/// back, stopping at the first invalid one.
pub fn batches(
    buf: &[u8],
    origin: Origin,
    max_message_bytes: usize,
) -> impl Iterator<Item = Result<Batch<'_>, BatchError>> {
    let mut position = 0;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || position >= buf.len() {
            return None;
        }
        let result = validate(&buf[position..], position, origin, max_message_bytes);
        match &result {
            Ok(batch) => position += batch.bytes.len(),
            Err(_) => failed = true,
        }
        Some(result)
    })
}

/// Writes the offset and leader epoch the log assigns; both lie outside the
/// CRC, so the rest of the batch is stored exactly as it came.
pub fn assign_offset(header: &mut [u8; HEADER_SIZE], base_offset: i64, leader_epoch: i32) {
    header[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    header[LEADER_EPOCH..LEADER_EPOCH + 4].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Marks a batch as stamped with the log append time (`message.timestamp.type
/// = LogAppendTime`): sets the timestamp-type bit and the max timestamp, then
/// recomputes the CRC over the new header and the unchanged `records`.
pub fn set_log_append_time(header: &mut [u8; HEADER_SIZE], records: &[u8], now_ms: i64) {
    let attributes = read_i16(header, ATTRIBUTES) | TIMESTAMP_TYPE_BIT;
    header[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    header[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES..]), records);
    header[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Rewrites the header of a batch the log cleaner filtered: attributes
/// (codec and flags), base and max timestamps and record count, then the
/// batch length and the CRC over the new header and `records` (the new,
/// possibly compressed, record bytes). Base offset, leader epoch,
/// lastOffsetDelta and the producer fields stay as they were.
pub(crate) fn set_compacted(
    header: &mut [u8; HEADER_SIZE],
    records: &[u8],
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    record_count: i32,
) {
    let length = (HEADER_SIZE - LOG_OVERHEAD + records.len()) as i32;
    header[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    header[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    header[BASE_TIMESTAMP..BASE_TIMESTAMP + 8].copy_from_slice(&base_timestamp.to_be_bytes());
    header[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    header[RECORD_COUNT..RECORD_COUNT + 4].copy_from_slice(&record_count.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES..]), records);
    header[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// The attribute bit saying that baseTimestamp holds the delete horizon.
pub(crate) const DELETE_HORIZON: i16 = DELETE_HORIZON_BIT;

fn read_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}
fn read_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}
fn read_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::BatchBuilder;

    #[test]
    fn parses_a_producer_batch() {
        let bytes = BatchBuilder::new(3).timestamp(1_000).build();
        let batch = validate(&bytes, 0, Origin::Client, DEFAULT_MAX_MESSAGE_BYTES).unwrap();
        let h = batch.header;
        assert_eq!(h.record_count(), 3);
        assert_eq!(h.last_offset_delta(), 2);
        assert_eq!(h.base_timestamp(), 1_000);
        assert_eq!(h.max_timestamp(), 1_002);
        assert_eq!(h.compression(), Some(Compression::None));
        assert!(!h.is_transactional() && !h.is_control() && !h.is_log_append_time());
        assert_eq!(h.total_size(), bytes.len());
    }

    #[test]
    fn rejects_wrong_magic() {
        let mut bytes = BatchBuilder::new(1).build();
        bytes[MAGIC_OFFSET] = 1;
        assert!(matches!(
            validate(&bytes, 0, Origin::Client, usize::MAX),
            Err(BatchError::WrongMagic { magic: 1, .. })
        ));
    }

    #[test]
    fn rejects_crc_mismatch_anywhere_in_the_covered_range() {
        let clean = BatchBuilder::new(2).build();
        for at in ATTRIBUTES..clean.len() {
            let mut bytes = clean.clone();
            bytes[at] ^= 0x01;
            let result = validate(&bytes, 0, Origin::Log, usize::MAX);
            assert!(
                matches!(result, Err(BatchError::CrcMismatch { .. })),
                "flip at {at}: {result:?}"
            );
        }
    }

    #[test]
    fn offset_and_epoch_are_outside_the_crc() {
        let bytes = BatchBuilder::new(2).build();
        let mut header: [u8; HEADER_SIZE] = bytes[..HEADER_SIZE].try_into().unwrap();
        assign_offset(&mut header, 1234, 7);
        let mut patched = header.to_vec();
        patched.extend_from_slice(&bytes[HEADER_SIZE..]);
        let batch = validate(&patched, 0, Origin::Client, usize::MAX).unwrap();
        assert_eq!(batch.header.base_offset(), 1234);
        assert_eq!(batch.header.partition_leader_epoch(), 7);
    }

    #[test]
    fn rejects_length_past_the_buffer() {
        let bytes = BatchBuilder::new(2).build();
        let short = &bytes[..bytes.len() - 1];
        assert!(matches!(
            validate(short, 0, Origin::Client, usize::MAX),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            validate(&bytes[..30], 0, Origin::Client, usize::MAX),
            Err(BatchError::Truncated { needed: 61, .. })
        ));
    }

    #[test]
    fn rejects_record_count_inconsistent_with_last_offset_delta() {
        let bytes = BatchBuilder::new(3).record_count_override(2).build();
        assert!(matches!(
            validate(&bytes, 0, Origin::Client, usize::MAX),
            Err(BatchError::RecordCountMismatch {
                record_count: 2,
                last_offset_delta: 2,
                ..
            })
        ));
        // A compacted batch in a log may hold fewer records than offsets...
        assert!(validate(&bytes, 0, Origin::Log, usize::MAX).is_ok());
        // ...but never more.
        let bytes = BatchBuilder::new(3).record_count_override(4).build();
        assert!(validate(&bytes, 0, Origin::Log, usize::MAX).is_err());
    }

    #[test]
    fn rejects_batches_above_max_message_bytes() {
        let bytes = BatchBuilder::new(1).value_size(500).build();
        let size = bytes.len();
        assert!(validate(&bytes, 0, Origin::Client, size).is_ok());
        assert_eq!(
            validate(&bytes, 0, Origin::Client, size - 1).unwrap_err(),
            BatchError::TooLarge {
                position: 0,
                size,
                max: size - 1
            }
        );
    }

    #[test]
    fn log_append_time_rewrites_max_timestamp_and_crc() {
        let bytes = BatchBuilder::new(2).timestamp(5).build();
        let mut header: [u8; HEADER_SIZE] = bytes[..HEADER_SIZE].try_into().unwrap();
        set_log_append_time(&mut header, &bytes[HEADER_SIZE..], 99_999);
        let mut patched = header.to_vec();
        patched.extend_from_slice(&bytes[HEADER_SIZE..]);
        let batch = validate(&patched, 0, Origin::Client, usize::MAX).unwrap();
        assert!(batch.header.is_log_append_time());
        assert_eq!(batch.header.max_timestamp(), 99_999);
    }

    #[test]
    fn batches_iterates_and_stops_at_the_first_bad_one() {
        let mut buf = BatchBuilder::new(1).build();
        buf.extend(BatchBuilder::new(2).build());
        let good_len = buf.len();
        buf.extend(BatchBuilder::new(1).build());
        buf[good_len + 30] ^= 0xff;
        let results: Vec<_> = batches(&buf, Origin::Client, usize::MAX).collect();
        assert_eq!(results.len(), 3);
        assert!(results[0].is_ok() && results[1].is_ok());
        assert!(matches!(
            results[2],
            Err(BatchError::CrcMismatch { position, .. }) if position == good_len
        ));
    }

    #[test]
    fn agrees_with_the_kafka_protocol_encoder() {
        let bytes = BatchBuilder::new(4)
            .compression(kafka_protocol::records::Compression::Lz4)
            .build();
        let batch = validate(&bytes, 0, Origin::Client, usize::MAX).unwrap();
        assert_eq!(batch.header.compression(), Some(Compression::Lz4));
        assert_eq!(batch.header.record_count(), 4);
    }
}
