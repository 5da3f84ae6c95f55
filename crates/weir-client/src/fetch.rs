//! Fetch: read record batches from one or more partitions and decode
//! them into records.

use std::time::Duration;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::Client;

/// One record as a consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// Its headers, in order: (key, value).
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Where to read from, in a [`Client::fetch_many`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTarget {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// At most this many bytes from this partition (at least one whole
    /// batch is always returned if there is one).
    pub max_bytes: i32,
}

/// What a fetch returned for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    pub topic: String,
    pub partition: i32,
    /// Records at or after the requested offset, in order; control
    /// records left out.
    pub records: Vec<ConsumedRecord>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Where the next fetch should start: after the last batch returned,
    /// or the requested offset if there was none.
    pub next_offset: i64,
}

/// Decoded records of a fetch, and the offset after the last complete
/// batch.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub records: Vec<ConsumedRecord>,
    pub next_offset: Option<i64>,
}

/// Fixed offsets in a v2 batch header.
const LOG_OVERHEAD: usize = 12; // base offset (8) + batch length (4)
const MAGIC_AT: usize = 16;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const CONTROL_FLAG: i16 = 1 << 5;

/// Decodes the batches in `data`: records below `from` are skipped (a
/// fetch starts at the batch holding `from`), control batches are
/// skipped, and a truncated batch at the end (a broker may cut the last
/// one at `max_bytes`) is ignored.
pub fn decode_records(mut data: Bytes, from: i64) -> Result<Decoded, String> {
    let mut decoded = Decoded::default();
    while data.len() >= LOG_OVERHEAD {
        let base_offset = (&data[..8]).get_i64();
        let length = (&data[8..12]).get_i32();
        let Ok(length) = usize::try_from(length) else {
            return Err(format!(
                "batch at offset {base_offset} has negative length {length}"
            ));
        };
        let total = LOG_OVERHEAD + length;
        if data.len() < total {
            break;
        }
        if total <= LAST_OFFSET_DELTA_AT + 4 {
            return Err(format!(
                "batch at offset {base_offset} is too short ({length} bytes)"
            ));
        }
        let magic = data[MAGIC_AT] as i8;
        if magic != 2 {
            return Err(format!(
                "batch at offset {base_offset} has magic {magic}; only v2 batches are supported"
            ));
        }
        let attributes = (&data[ATTRIBUTES_AT..ATTRIBUTES_AT + 2]).get_i16();
        let last_offset_delta = (&data[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]).get_i32();
        let mut batch = data.split_to(total);
        decoded.next_offset = Some(base_offset + i64::from(last_offset_delta) + 1);
        if attributes & CONTROL_FLAG != 0 {
            continue;
        }
        let set = RecordBatchDecoder::decode(&mut batch)
            .map_err(|e| format!("batch at offset {base_offset}: {e}"))?;
        decoded.records.extend(
            set.records
                .into_iter()
                .filter(|r| r.offset >= from && !r.control)
                .map(|r| ConsumedRecord {
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r
                        .headers
                        .into_iter()
                        .map(|(key, value)| (key.to_string(), value))
                        .collect(),
                }),
        );
    }
    Ok(decoded)
}

impl Client {
    /// Records of one partition from `offset` on, waiting up to
    /// `max_wait_ms` for at least one if there are none yet.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<Vec<ConsumedRecord>, ClientError> {
        let target = FetchTarget {
            topic: topic.to_owned(),
            partition,
            offset,
            max_bytes,
        };
        let mut fetched = self.fetch_many(&[target], max_bytes, max_wait_ms).await?;
        Ok(fetched.pop().map(|p| p.records).unwrap_or_default())
    }

    /// One Fetch request over several partitions: answered as soon as any
    /// has data, or after `max_wait_ms`. Results come in the order of
    /// `targets`. A partition error (e.g. OFFSET_OUT_OF_RANGE) fails the
    /// call.
    pub async fn fetch_many(
        &mut self,
        targets: &[FetchTarget],
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let version = self.require_version(ApiKey::Fetch)?;
        let mut topics: Vec<FetchTopic> = Vec::new();
        for target in targets {
            let partition = FetchPartition::default()
                .with_partition(target.partition)
                .with_fetch_offset(target.offset)
                .with_partition_max_bytes(target.max_bytes);
            match topics
                .iter_mut()
                .find(|t| t.topic.0.as_str() == target.topic)
            {
                Some(topic) => topic.partitions.push(partition),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(target.topic.clone())))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let request = FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(max_wait_ms.max(0))
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_isolation_level(0)
            .with_topics(topics);
        let timeout =
            self.config().request_timeout + Duration::from_millis(max_wait_ms.max(0) as u64);
        let response: FetchResponse = self
            .call_within(ApiKey::Fetch, version, &request, timeout)
            .await?;
        check(response.error_code, None)?;
        let mut results = Vec::with_capacity(targets.len());
        for target in targets {
            let subject = format!("{}-{}", target.topic, target.partition);
            let data = response
                .responses
                .iter()
                .filter(|t| t.topic.0.as_str() == target.topic)
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == target.partition)
                .ok_or_else(|| self.missing("Fetch", &subject))?;
            check(data.error_code, None).map_err(|e| {
                with_subject(
                    e,
                    "partition",
                    &format!("{subject} at offset {}", target.offset),
                )
            })?;
            let records = data.records.clone().unwrap_or_default();
            let decoded =
                decode_records(records, target.offset).map_err(|reason| ClientError::Protocol {
                    addr: self.addr().to_owned(),
                    reason: format!("fetch from {subject}: {reason}"),
                })?;
            results.push(FetchedPartition {
                topic: target.topic.clone(),
                partition: target.partition,
                records: decoded.records,
                high_watermark: data.high_watermark,
                log_start_offset: data.log_start_offset,
                next_offset: decoded
                    .next_offset
                    .map_or(target.offset, |next| next.max(target.offset)),
            });
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::produce::encode_batch;
    use bytes::BytesMut;
    use kafka_protocol::records::Compression;

    fn batch(base_offset: i64, values: &[&str]) -> BytesMut {
        let records = values
            .iter()
            .map(|v| {
                (
                    Some(Bytes::from(format!("k{v}"))),
                    Some(Bytes::from(v.to_string())),
                )
            })
            .collect();
        let mut bytes =
            BytesMut::from(&encode_batch(records, 1_000, Compression::None).unwrap()[..]);
        bytes[..8].copy_from_slice(&base_offset.to_be_bytes());
        bytes
    }

    fn values(decoded: &Decoded) -> Vec<(i64, String)> {
        decoded
            .records
            .iter()
            .map(|r| {
                let value = String::from_utf8(r.value.as_ref().unwrap().to_vec()).unwrap();
                (r.offset, value)
            })
            .collect()
    }

    #[test]
    fn one_batch_per_produce_and_offsets_in_order() {
        let encoded = encode_batch(
            (0..5).map(|i| (None, Some(Bytes::from(vec![i])))).collect(),
            7,
            Compression::None,
        )
        .unwrap();
        let infos = RecordBatchDecoder::decode_batch_info(&mut encoded.clone()).unwrap();
        assert_eq!(infos.len(), 1, "the encoder must not split the batch");
        assert_eq!(infos[0].record_count, 5);
        assert_eq!(infos[0].base_sequence, -1);
        assert_eq!(infos[0].producer_id, -1);
        let decoded = decode_records(encoded, 0).unwrap();
        let offsets: Vec<i64> = decoded.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
        assert!(decoded
            .records
            .iter()
            .all(|r| r.timestamp == 7 && r.key.is_none()));
        assert_eq!(decoded.next_offset, Some(5));
    }

    #[test]
    fn skips_records_below_the_requested_offset() {
        let mut data = batch(10, &["a", "b", "c"]);
        data.extend_from_slice(&batch(13, &["d", "e"]));
        let decoded = decode_records(data.freeze(), 12).unwrap();
        assert_eq!(
            values(&decoded),
            vec![(12, "c".into()), (13, "d".into()), (14, "e".into())]
        );
        assert_eq!(decoded.records[0].key.as_deref(), Some(&b"kc"[..]));
        assert_eq!(decoded.next_offset, Some(15));
    }

    #[test]
    fn ignores_a_truncated_last_batch() {
        let mut data = batch(0, &["a", "b"]);
        let second = batch(2, &["c"]);
        data.extend_from_slice(&second[..second.len() - 3]);
        let decoded = decode_records(data.freeze(), 0).unwrap();
        assert_eq!(values(&decoded), vec![(0, "a".into()), (1, "b".into())]);
        assert_eq!(decoded.next_offset, Some(2));
    }

    #[test]
    fn skips_control_batches_but_moves_past_them() {
        let mut control = batch(3, &["marker"]);
        // Set the control bit; the CRC covers the attributes, so fix it.
        control[ATTRIBUTES_AT + 1] |= CONTROL_FLAG as u8;
        let crc = crc32c_of(&control[21..]);
        control[17..21].copy_from_slice(&crc.to_be_bytes());
        let mut data = batch(0, &["a", "b", "c"]);
        data.extend_from_slice(&control);
        data.extend_from_slice(&batch(4, &["d"]));
        let decoded = decode_records(data.freeze(), 0).unwrap();
        assert_eq!(
            values(&decoded),
            vec![
                (0, "a".into()),
                (1, "b".into()),
                (2, "c".into()),
                (4, "d".into())
            ]
        );
        assert_eq!(decoded.next_offset, Some(5));
    }

    #[test]
    fn a_corrupt_batch_is_an_error() {
        let mut data = batch(0, &["a"]);
        let last = data.len() - 1;
        data[last] ^= 0xff;
        assert!(decode_records(data.freeze(), 0).is_err());
    }

    #[test]
    fn compressed_batches_decode() {
        for compression in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let encoded = encode_batch(
                vec![(Some(Bytes::from("k")), Some(Bytes::from("v".repeat(100))))],
                1,
                compression,
            )
            .unwrap();
            let decoded = decode_records(encoded, 0).unwrap();
            assert_eq!(decoded.records.len(), 1, "{compression:?}");
            assert_eq!(decoded.records[0].value.as_ref().unwrap().len(), 100);
        }
    }

    /// CRC-32C (Castagnoli), bitwise: enough for a test.
    fn crc32c_of(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in data {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0x82f6_3b78
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
