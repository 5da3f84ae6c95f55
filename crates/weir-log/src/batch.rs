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

/// A producer's batch checked once, end to end (header, length, CRC,
/// compression, record count), at the edge where it arrived: the log
/// appends it without checking it again, but for its size limit, which is
/// the topic's. Holds the batch's bytes only.
#[derive(Debug, Clone)]
pub struct CheckedBatch {
    bytes: bytes::Bytes,
}

impl CheckedBatch {
    /// Checks the batch at the front of `bytes` as [`validate`] does for
    /// a client's batch, without a size limit; bytes after it are not
    /// part of it.
    pub fn check(bytes: &bytes::Bytes) -> Result<Self, BatchError> {
        let size = validate(bytes, 0, Origin::Client, usize::MAX)?
            .header
            .total_size();
        Ok(Self {
            bytes: bytes.slice(..size),
        })
    }

    /// The batch as checked.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            header: BatchHeader {
                bytes: &self.bytes[..HEADER_SIZE],
            },
            bytes: &self.bytes,
        }
    }

    pub fn header(&self) -> BatchHeader<'_> {
        self.batch().header
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never: a batch has at least its header.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
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

/// The complete batches at the start of `records`: a broker may cut the
/// last one short at a fetch's size limit.
pub fn whole_batches(records: &[u8]) -> &[u8] {
    let mut end = 0;
    while let Ok(header) = BatchHeader::parse(&records[end..], 0) {
        let size = header.total_size();
        if size == 0 || end + size > records.len() {
            break;
        }
        end += size;
    }
    &records[..end]
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

/// Attributes of a transaction marker batch: transactional and control.
pub const CONTROL_ATTRIBUTES: i16 = TRANSACTIONAL_BIT | CONTROL_BIT;

/// What a control record says, from the `type` in its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    /// Ends a transaction whose records must be skipped by `read_committed`
    /// consumers (type 0).
    Abort,
    /// Ends a transaction whose records are visible (type 1).
    Commit,
    /// Any other control record (Kafka uses them for KRaft bookkeeping).
    Other(i16),
}

impl ControlType {
    fn from_code(code: i16) -> Self {
        match code {
            0 => Self::Abort,
            1 => Self::Commit,
            other => Self::Other(other),
        }
    }

    /// The `type` field of the control record key.
    pub fn code(self) -> i16 {
        match self {
            Self::Abort => 0,
            Self::Commit => 1,
            Self::Other(code) => code,
        }
    }
}

/// Size of a transaction marker batch: the header and one 17-byte record.
pub const MARKER_BATCH_SIZE: usize = HEADER_SIZE + 17;

/// Builds the control batch a partition leader appends to end a
/// transaction, exactly as Kafka writes it: attributes transactional and
/// control, no compression, the producer's id and epoch, base sequence -1,
/// one record at offset delta 0 whose key is `[version 0: i16, type: i16]`
/// (0 abort, 1 commit) and whose value is `[version 0: i16,
/// coordinator_epoch: i32]`. Base offset and leader epoch are 0 and -1
/// until the log assigns them.
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Vec<u8> {
    let control = if commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    let mut record = Vec::with_capacity(17);
    // length (zigzag varint of the 16 bytes that follow), attributes,
    // timestampDelta 0, offsetDelta 0, key length 4, key, value length 6,
    // value, no headers.
    record.extend_from_slice(&[32, 0, 0, 0, 8]);
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&control.code().to_be_bytes());
    record.push(12);
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&coordinator_epoch.to_be_bytes());
    record.push(0);
    debug_assert_eq!(record.len(), MARKER_BATCH_SIZE - HEADER_SIZE);

    let mut batch = vec![0u8; HEADER_SIZE];
    let length = (MARKER_BATCH_SIZE - LOG_OVERHEAD) as i32;
    batch[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    batch[LEADER_EPOCH..LEADER_EPOCH + 4].copy_from_slice(&(-1i32).to_be_bytes());
    batch[MAGIC_OFFSET] = MAGIC as u8;
    batch[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&CONTROL_ATTRIBUTES.to_be_bytes());
    // lastOffsetDelta 0.
    batch[BASE_TIMESTAMP..BASE_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    batch[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    batch[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH..PRODUCER_EPOCH + 2].copy_from_slice(&producer_epoch.to_be_bytes());
    batch[BASE_SEQUENCE..BASE_SEQUENCE + 4].copy_from_slice(&(-1i32).to_be_bytes());
    batch[RECORD_COUNT..RECORD_COUNT + 4].copy_from_slice(&1i32.to_be_bytes());
    batch.extend_from_slice(&record);
    let crc = crc32c::crc32c(&batch[ATTRIBUTES..]);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// The type of the first control record of a control batch (`batch` is
/// the whole batch, header included). `None` when the batch is not a
/// control batch, holds no record (the cleaner emptied it), is compressed
/// (Kafka never compresses markers), or its record cannot be read.
pub fn control_type(batch: &[u8]) -> Option<ControlType> {
    let (key, _) = control_record(batch)?;
    (key.len() >= 4).then(|| ControlType::from_code(read_i16(key, 2)))
}

/// The coordinator epoch in the value of a transaction marker's record
/// (`None` when `batch` is not a readable commit or abort marker).
pub fn marker_coordinator_epoch(batch: &[u8]) -> Option<i32> {
    let (key, value) = control_record(batch)?;
    if key.len() < 4
        || !matches!(
            ControlType::from_code(read_i16(key, 2)),
            ControlType::Abort | ControlType::Commit
        )
    {
        return None;
    }
    let value = value.filter(|v| v.len() >= 6)?;
    Some(read_i32(value, 2))
}

/// The key and value of the first record of an uncompressed control batch.
fn control_record(batch: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let header = BatchHeader::parse(batch, 0).ok()?;
    if !header.is_control()
        || header.record_count() < 1
        || header.compression() != Some(Compression::None)
    {
        return None;
    }
    let records = batch.get(HEADER_SIZE..header.total_size())?;
    let mut at = 0;
    let length = read_zigzag(records, &mut at)?;
    let end = at.checked_add(usize::try_from(length).ok()?)?;
    let record = records.get(at..end)?;
    let mut at = 1; // attributes
    read_zigzag(record, &mut at)?; // timestampDelta
    read_zigzag(record, &mut at)?; // offsetDelta
    let key_length = usize::try_from(read_zigzag(record, &mut at)?).ok()?;
    let key = record.get(at..at.checked_add(key_length)?)?;
    at += key_length;
    let value = match read_zigzag(record, &mut at)? {
        -1 => None,
        n => Some(record.get(at..at.checked_add(usize::try_from(n).ok()?)?)?),
    };
    Some((key, value))
}

/// A zigzag-encoded varint or varlong, as Kafka records use them.
fn read_zigzag(buf: &[u8], at: &mut usize) -> Option<i64> {
    let mut value: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *buf.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    None
}

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

    /// A commit marker of producer 4711, epoch 3, coordinator epoch 9, at
    /// timestamp 1 700 000 000 000, byte for byte as Kafka's
    /// `MemoryRecords.withEndTransactionMarker` writes it.
    const GOLDEN_COMMIT_MARKER: [u8; 78] = [
        0, 0, 0, 0, 0, 0, 0, 0, // baseOffset
        0, 0, 0, 66, // batchLength
        0xff, 0xff, 0xff, 0xff, // partitionLeaderEpoch
        2,    // magic
        0xa8, 0xda, 0x87, 0x31, // crc
        0, 0x30, // attributes: transactional | control
        0, 0, 0, 0, // lastOffsetDelta
        0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // baseTimestamp
        0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // maxTimestamp
        0, 0, 0, 0, 0, 0, 0x12, 0x67, // producerId
        0, 3, // producerEpoch
        0xff, 0xff, 0xff, 0xff, // baseSequence
        0, 0, 0, 1,  // recordCount
        32, // record length 16
        0,  // attributes
        0,  // timestampDelta
        0,  // offsetDelta
        8,  // key length 4
        0, 0, 0, 1,  // key: version 0, type 1 (commit)
        12, // value length 6
        0, 0, 0, 0, 0, 9, // value: version 0, coordinator epoch 9
        0, // headers
    ];

    #[test]
    fn marker_batches_match_the_golden_bytes() {
        let mut bytes = marker_batch(4711, 3, true, 9, 1_700_000_000_000);
        let crc = crc32c::crc32c(&bytes[ATTRIBUTES..]);
        assert_eq!(
            &bytes[CRC..CRC + 4],
            &crc.to_be_bytes(),
            "the CRC covers attributes to the end"
        );
        assert_eq!(bytes, GOLDEN_COMMIT_MARKER);
        let batch = validate(&bytes, 0, Origin::Client, DEFAULT_MAX_MESSAGE_BYTES).unwrap();
        let h = batch.header;
        assert!(h.is_control() && h.is_transactional());
        assert_eq!((h.producer_id(), h.producer_epoch()), (4711, 3));
        assert_eq!((h.base_sequence(), h.record_count()), (-1, 1));
        assert_eq!(control_type(&bytes), Some(ControlType::Commit));
        assert_eq!(marker_coordinator_epoch(&bytes), Some(9));

        // The abort marker differs in the key's type, and so in the CRC.
        let abort = marker_batch(4711, 3, false, 9, 1_700_000_000_000);
        assert_eq!(control_type(&abort), Some(ControlType::Abort));
        let differing: Vec<usize> = (0..abort.len()).filter(|&i| abort[i] != bytes[i]).collect();
        assert_eq!(
            differing.iter().filter(|&&i| i >= HEADER_SIZE).count(),
            1,
            "{differing:?}"
        );

        // The reference decoder reads the same record.
        bytes[..8].copy_from_slice(&42i64.to_be_bytes());
        let mut buf = bytes::Bytes::from(bytes);
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).unwrap();
        let record = &set.records[0];
        assert!(record.control && record.transactional);
        assert_eq!(record.offset, 42);
        assert_eq!((record.producer_id, record.producer_epoch), (4711, 3));
        assert_eq!(record.key.as_deref(), Some(&[0, 0, 0, 1][..]));
        assert_eq!(record.value.as_deref(), Some(&[0, 0, 0, 0, 0, 9][..]));
    }

    #[test]
    fn control_type_refuses_what_is_not_a_marker() {
        assert_eq!(control_type(&BatchBuilder::new(1).build()), None);
        assert_eq!(
            marker_coordinator_epoch(&BatchBuilder::new(1).build()),
            None
        );
        let marker = marker_batch(1, 0, false, 0, 0);
        assert_eq!(control_type(&marker[..70]), None);
        let mut empty = marker.clone();
        empty[RECORD_COUNT..RECORD_COUNT + 4].copy_from_slice(&0i32.to_be_bytes());
        assert_eq!(control_type(&empty), None);
        let mut other = marker;
        other[HEADER_SIZE + 8] = 5;
        assert_eq!(control_type(&other), Some(ControlType::Other(5)));
        assert_eq!(marker_coordinator_epoch(&other), None);
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
