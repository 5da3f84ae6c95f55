//! The record batches of an internal topic: what a coordinator writes
//! (uncompressed batches of keyed records, transactional for a producer's
//! offset commits) and what it reads back when it loads a partition (every
//! keyed record and every transaction marker, in log order).

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use weir_log::batch::BatchHeader;
use weir_log::LogError;

use crate::partition::Partition;

/// The producer a transactional offset commit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub id: i64,
    pub epoch: i16,
}

/// One keyed record of an internal topic, ready to append (`value: None`
/// is a tombstone).
pub struct Entry {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// What loading reads from an internal topic's log, in log order.
pub enum Item {
    /// A record at offset `at`; `transaction` is the producer id when the
    /// record is part of a transactional batch.
    Record {
        key: Bytes,
        value: Option<Bytes>,
        at: u64,
        transaction: Option<i64>,
    },
    /// A transaction marker of `producer_id`, at offset `at`.
    Marker {
        producer_id: i64,
        commit: bool,
        at: u64,
    },
}

/// One uncompressed batch of `entries`: without producer, or a
/// transactional batch of `producer` with base sequence 0, as Kafka's
/// coordinators write theirs.
pub(crate) fn encode_batch(
    entries: &[Entry],
    now_ms: i64,
    producer: Option<TxnProducer>,
) -> BytesMut {
    let records: Vec<Record> = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.map_or(-1, |p| p.id),
            producer_epoch: producer.map_or(-1, |p| p.epoch),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Only the base sequence is encoded: -1 without producer.
            sequence: if producer.is_some() {
                i as i32
            } else {
                i as i32 - 1
            },
            timestamp: now_ms,
            key: Some(entry.key.clone()),
            value: entry.value.clone(),
            headers: Default::default(),
        })
        .collect();
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("uncompressed records encode");
    batch
}

/// Every keyed record and every transaction marker of `partition`, in log
/// order, to its log end.
pub(crate) fn for_each_item(
    partition: &Partition,
    mut f: impl FnMut(Item),
) -> Result<(), LogError> {
    let end = partition.log().log_end_offset();
    let mut offset = partition.log().log_start_offset();
    while offset < end {
        let slice = partition.log().read(offset, 1 << 20, end)?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice.to_bytes().map_err(|source| LogError::Io {
            path: slice.path().map(|p| p.to_owned()).unwrap_or_default(),
            source,
        })?;
        let mut position = 0;
        while let Ok(header) = BatchHeader::parse(&bytes[position..], position) {
            let size = header.total_size();
            offset = header.next_offset() as u64;
            let control = header.is_control();
            let transaction = (header.is_transactional() && header.producer_id() >= 0)
                .then(|| header.producer_id());
            let mut batch = bytes.slice(position..(position + size).min(bytes.len()));
            match RecordBatchDecoder::decode(&mut batch) {
                Ok(set) if control => {
                    let marker = set.records.first().and_then(|r| r.key.as_deref());
                    // The control record key: version i16, type i16 (0 abort,
                    // 1 commit); other types are no transaction's end.
                    if let (Some(key), Some(producer_id)) = (marker, transaction) {
                        if key.len() >= 4 && matches!(key[2..4], [0, 0] | [0, 1]) {
                            f(Item::Marker {
                                producer_id,
                                commit: key[3] == 1,
                                at: header.base_offset() as u64,
                            });
                        }
                    }
                }
                Ok(set) => {
                    for record in set.records {
                        if let Some(key) = record.key {
                            f(Item::Record {
                                key,
                                value: record.value,
                                at: record.offset as u64,
                                transaction,
                            });
                        }
                    }
                }
                Err(error) => tracing::warn!(
                    topic = %partition.topic,
                    partition = partition.index,
                    %error,
                    "skipping an undecodable batch"
                ),
            }
            position += size;
            if position >= bytes.len() {
                break;
            }
        }
    }
    Ok(())
}
