//! Helpers that build real Kafka record batches (through the kafka-protocol
//! encoder) for tests and benchmarks.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Builds one batch of `count` records as a producer would send it.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    count: usize,
    timestamp: i64,
    value_size: usize,
    compression: Compression,
    record_count_override: Option<i32>,
    key_prefix: Option<String>,
    /// Producer id, epoch and base sequence of an idempotent producer.
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
}

impl BatchBuilder {
    pub fn new(count: usize) -> Self {
        assert!(count > 0, "a batch holds at least one record");
        Self {
            count,
            timestamp: 1_700_000_000_000,
            value_size: 16,
            compression: Compression::None,
            record_count_override: None,
            key_prefix: None,
            producer: None,
            transactional: false,
        }
    }

    /// Timestamp of the first record; record `i` gets `timestamp + i`.
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = timestamp;
        self
    }

    pub fn value_size(mut self, value_size: usize) -> Self {
        self.value_size = value_size;
        self
    }

    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Gives every record a key `"{prefix}{i}"`.
    pub fn keys(mut self, prefix: &str) -> Self {
        self.key_prefix = Some(prefix.to_owned());
        self
    }

    /// Marks the batch as written by an idempotent producer, its first record
    /// carrying `base_sequence`.
    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer = Some((id, epoch, base_sequence));
        self
    }

    /// Sets the transactional attribute (part of a transaction; needs a
    /// producer).
    pub fn transactional(mut self) -> Self {
        self.transactional = true;
        self
    }

    /// Writes a different record count into the header (CRC kept valid), to
    /// build inconsistent batches.
    pub fn record_count_override(mut self, count: i32) -> Self {
        self.record_count_override = Some(count);
        self
    }

    /// Builds a batch whose total size is as close to `target` bytes as one
    /// record value allows.
    pub fn sized(count: usize, target: usize) -> Self {
        let per_record_overhead = 12;
        let payload = target.saturating_sub(61 + count * per_record_overhead);
        Self::new(count).value_size((payload / count).max(1))
    }

    pub fn build(&self) -> Vec<u8> {
        // Only the base sequence is encoded; without a producer it is -1.
        let (producer_id, producer_epoch, base_sequence) = self.producer.unwrap_or((-1, -1, -1));
        let records: Vec<Record> = (0..self.count)
            .map(|i| Record {
                transactional: self.transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: base_sequence + i as i32,
                timestamp: self.timestamp + i as i64,
                key: self
                    .key_prefix
                    .as_ref()
                    .map(|p| Bytes::from(format!("{p}{i}"))),
                value: Some(Bytes::from(vec![(i % 251) as u8; self.value_size])),
                headers: IndexMap::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: self.compression,
            },
        )
        .expect("encode batch");
        let mut bytes = buf.to_vec();
        if let Some(count) = self.record_count_override {
            bytes[57..61].copy_from_slice(&count.to_be_bytes());
            let crc = crc32c::crc32c(&bytes[21..]);
            bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        bytes
    }
}

/// Builds one batch of records with chosen keys and values (`None` value:
/// a tombstone), as a producer would send it.
#[derive(Debug, Clone)]
pub struct KeyedBatch {
    records: Vec<(Option<Bytes>, Option<Bytes>)>,
    /// Each record's headers, by record.
    headers: Vec<Vec<(String, Bytes)>>,
    timestamp: i64,
    compression: Compression,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
}

impl Default for KeyedBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyedBatch {
    pub fn new() -> Self {
        Self {
            records: Vec::new(),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000,
            compression: Compression::None,
            producer: None,
            transactional: false,
        }
    }

    /// Sets the transactional attribute (part of a transaction; needs a
    /// producer).
    pub fn transactional(mut self) -> Self {
        self.transactional = true;
        self
    }

    /// Adds a record; `key` or `value` `None` is null.
    pub fn record(mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Self {
        self.records.push((
            key.map(Bytes::copy_from_slice),
            value.map(Bytes::copy_from_slice),
        ));
        self.headers.push(Vec::new());
        self
    }

    /// Adds a header to the last record added.
    pub fn header(mut self, name: &str, value: &[u8]) -> Self {
        self.headers
            .last_mut()
            .expect("a record to add the header to")
            .push((name.to_owned(), Bytes::copy_from_slice(value)));
        self
    }

    /// Timestamp of the first record; record `i` gets `timestamp + i`.
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = timestamp;
        self
    }

    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Marks the batch as written by an idempotent producer.
    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer = Some((id, epoch, base_sequence));
        self
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn build(&self) -> Vec<u8> {
        assert!(
            !self.records.is_empty(),
            "a batch holds at least one record"
        );
        let (producer_id, producer_epoch, base_sequence) = self.producer.unwrap_or((-1, -1, -1));
        let records: Vec<Record> = self
            .records
            .iter()
            .enumerate()
            .map(|(i, (key, value))| Record {
                transactional: self.transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: base_sequence + i as i32,
                timestamp: self.timestamp + i as i64,
                key: key.clone(),
                value: value.clone(),
                headers: self.headers[i]
                    .iter()
                    .map(|(name, value)| (StrBytes::from_string(name.clone()), Some(value.clone())))
                    .collect(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: self.compression,
            },
        )
        .expect("encode batch");
        buf.to_vec()
    }
}
