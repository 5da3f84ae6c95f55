//! Produce: one v2 record batch per call, acknowledged by all in-sync
//! replicas.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::Client;

/// How long the broker may wait for replicas to acknowledge.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// A record to produce: key, value and headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutgoingRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// (key, value) pairs as records without headers.
pub(crate) fn without_headers(records: Vec<(Option<Bytes>, Option<Bytes>)>) -> Vec<OutgoingRecord> {
    records
        .into_iter()
        .map(|(key, value)| OutgoingRecord {
            key,
            value,
            headers: Vec::new(),
        })
        .collect()
}

/// Encodes `records` as a single v2 batch (no producer id, no
/// compression, all stamped `timestamp`).
pub fn encode_batch(
    records: Vec<(Option<Bytes>, Option<Bytes>)>,
    timestamp: i64,
    compression: Compression,
) -> Result<Bytes, ClientError> {
    encode_records(without_headers(records), timestamp, compression)
}

/// [`encode_batch`] for records with headers.
pub fn encode_records(
    records: Vec<OutgoingRecord>,
    timestamp: i64,
    compression: Compression,
) -> Result<Bytes, ClientError> {
    encode_as(records, timestamp, compression, None)
}

/// An idempotent producer's batch: its producer id and epoch, and the
/// sequence number of its first record, by which the leader recognizes a
/// retry of a batch it already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchProducer {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) base_sequence: i32,
}

/// Encodes `records` (at least one) as one v2 batch, written by
/// `producer` (or by no producer id).
pub(crate) fn encode_as(
    records: Vec<OutgoingRecord>,
    timestamp: i64,
    compression: Compression,
    producer: Option<BatchProducer>,
) -> Result<Bytes, ClientError> {
    if records.is_empty() {
        return Err(ClientError::InvalidArgument(
            "a produce request needs at least one record".to_owned(),
        ));
    }
    // The encoder starts a new batch whenever `offset - sequence` changes:
    // offsets 0, 1, 2... with sequences base, base + 1... keep it
    // constant. Without a producer id the base is -1, as it must be.
    let (producer_id, producer_epoch, base_sequence) = producer
        .map_or((NO_PRODUCER_ID, NO_PRODUCER_EPOCH, -1), |p| {
            (p.producer_id, p.producer_epoch, p.base_sequence)
        });
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, record)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The producer starts a new id before its sequences would
            // pass i32::MAX, so they never wrap within a batch.
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp,
            key: record.key,
            value: record.value,
            headers: record
                .headers
                .into_iter()
                .map(|(key, value)| (StrBytes::from_string(key), value))
                .collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .map_err(|e| ClientError::InvalidArgument(format!("cannot encode record batch: {e}")))?;
    Ok(buf.freeze())
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Client {
    /// Appends `records` (key, value) to one partition as a single batch
    /// with acks=all, and returns the offset of the first record.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<(Option<Bytes>, Option<Bytes>)>,
    ) -> Result<i64, ClientError> {
        self.produce_compressed(topic, partition, records, Compression::None)
            .await
    }

    /// [`Client::produce`] with the batch compressed by `compression`.
    pub async fn produce_compressed(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<(Option<Bytes>, Option<Bytes>)>,
        compression: Compression,
    ) -> Result<i64, ClientError> {
        self.produce_records(topic, partition, without_headers(records), compression)
            .await
    }

    /// [`Client::produce_compressed`] for records with headers.
    pub async fn produce_records(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<OutgoingRecord>,
        compression: Compression,
    ) -> Result<i64, ClientError> {
        let batch = encode_records(records, now_ms(), compression)?;
        self.produce_batch(topic, partition, batch).await
    }

    /// Appends an encoded v2 batch to one partition with acks=all, and
    /// returns the offset of its first record. A retry sends the same
    /// bytes, so an idempotent producer's retry is recognized.
    pub(crate) async fn produce_batch(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> Result<i64, ClientError> {
        let version = self.require_version(ApiKey::Produce)?;
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch))])]);
        let response: ProduceResponse = self
            .call_version(ApiKey::Produce, version, &request)
            .await?;
        let result = response
            .responses
            .into_iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partition_responses)
            .find(|p| p.index == partition)
            .ok_or_else(|| self.missing("Produce", &format!("{topic}-{partition}")))?;
        let message = result.error_message.map(|m| m.to_string());
        check(result.error_code, message)
            .map_err(|e| with_subject(e, "partition", &format!("{topic}-{partition}")))?;
        Ok(result.base_offset)
    }
}
