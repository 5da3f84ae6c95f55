//! ListOffsets: earliest, latest, the first offset at or after a
//! timestamp, the record with the largest timestamp (v7+), and KIP-405's
//! earliest local (v8+) and KIP-1005's latest tiered (v9+) offsets.
//!
//! In tiered storage, earliest is the remote log start, earliest local the
//! local log's start and latest tiered the last offset copied to the
//! remote tier. Without it the local log starts at the log start (earliest
//! local is earliest), and nothing is tiered (latest tiered is offset -1,
//! timestamp -1, leader epoch -1, and no error), as in Kafka. A lookup by
//! timestamp searches the remote tier first, below the local log, as
//! Kafka's; v10's `timeout_ms` has nothing to bound (a remote lookup is
//! bounded by the request's own time).
//!
//! As in Kafka, what a client may be told ends at the last offset it could
//! fetch: the high watermark, or for isolation level `read_committed` the
//! last stable offset. Latest is that offset; a record found by timestamp
//! (or as the one with the largest timestamp) at or past it is no answer
//! (offset and timestamp -1), not an earlier record. Earliest is the log
//! start, whatever the isolation level.

use std::collections::HashSet;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;
use weir_log::TimestampOffset;
use weir_meta::{AclOperation, ResourceType};

use super::RequestContext;
use crate::broker::Broker;
use crate::partition::Partition;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// The first version that knows a special (negative) timestamp, as
/// Kafka's `ReplicaManager` checks it; `None` for one no version knows.
fn first_version_for(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        _ => None,
    }
}

/// The request's isolation level `read_committed` (0 is `read_uncommitted`).
const READ_COMMITTED: i8 = 1;

pub(super) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    // As Kafka: a partition asked for twice is answered once, with
    // INVALID_REQUEST.
    let mut seen = HashSet::new();
    let duplicates: HashSet<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .filter(|key| !seen.insert(key.clone()))
        .collect();
    let mut answered = HashSet::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        // As Kafka: a topic the principal may not describe has each of
        // its partitions answered TOPIC_AUTHORIZATION_FAILED, repeats
        // included.
        if !ctx.authorized(broker, AclOperation::Describe, ResourceType::Topic, &name) {
            let partitions = topic.partitions.iter().map(|p| {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_timestamp(-1)
                    .with_offset(-1)
            });
            topics.push(
                ListOffsetsTopicResponse::default()
                    .with_name(topic.name)
                    .with_partitions(partitions.collect()),
            );
            continue;
        }
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            if !answered.insert((name.clone(), p.partition_index)) {
                continue;
            }
            let response = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1);
            let response = if duplicates.contains(&(name.clone(), p.partition_index)) {
                response.with_error_code(ResponseError::InvalidRequest.code())
            } else {
                let asked = Asked {
                    partition: p.partition_index,
                    timestamp: p.timestamp,
                    read_committed: request.isolation_level == READ_COMMITTED,
                };
                look_up(broker, ctx.version, &name, asked, response).await
            };
            partitions.push(response);
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// One partition's question.
struct Asked {
    partition: i32,
    timestamp: i64,
    read_committed: bool,
}

/// `response` with the offset `asked` for, at request version `version`.
async fn look_up(
    broker: &Broker,
    version: i16,
    name: &str,
    asked: Asked,
    response: ListOffsetsPartitionResponse,
) -> ListOffsetsPartitionResponse {
    if asked.timestamp < 0 && first_version_for(asked.timestamp).is_none_or(|first| version < first)
    {
        return response.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let partition = match broker.leader_partition(name, asked.partition) {
        Ok(partition) => partition,
        Err(not_served) => return response.with_error_code(not_served.code()),
    };
    let high_watermark = partition.high_watermark();
    let last_fetchable = if asked.read_committed {
        partition.last_stable_offset_at(high_watermark)
    } else {
        high_watermark
    };
    // Only what a fetch could return.
    let fetchable = |found: Option<TimestampOffset>| {
        found
            .filter(|f| f.offset < last_fetchable)
            .map(|f| (f.timestamp, f.offset as i64))
    };
    let found = match asked.timestamp {
        LATEST => Ok(Some((-1, last_fetchable as i64))),
        EARLIEST => Ok(Some((-1, partition.log_start_offset() as i64))),
        EARLIEST_LOCAL => Ok(Some((-1, partition.log().log_start_offset() as i64))),
        LATEST_TIERED => match broker
            .image()
            .remote_log(partition.topic_id, partition.index)
            .and_then(|remote| remote.highest_copied_offset())
        {
            Some(offset) => Ok(Some((-1, offset as i64))),
            // Nothing is tiered: Kafka's answer, leader epoch -1 included.
            None => return response.with_leader_epoch(-1),
        },
        MAX_TIMESTAMP => partition.max_timestamp_offset().await.map(fetchable),
        ts => match remote_offset_for_timestamp(broker, &partition, ts).await {
            Ok(Some(found)) => Ok(fetchable(Some(found))),
            Ok(None) => partition.offset_for_timestamp(ts).await.map(fetchable),
            Err(code) => return response.with_error_code(code),
        },
    };
    match found {
        Ok(Some((timestamp, offset))) => {
            let response = response.with_timestamp(timestamp).with_offset(offset);
            // The field exists from v4 on.
            if version >= 4 {
                response.with_leader_epoch(partition.replica_state().leader_epoch)
            } else {
                response
            }
        }
        Ok(None) => response,
        Err(error) => {
            tracing::error!(topic = %name, partition = asked.partition, %error, "offset lookup failed");
            response.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}

/// The first record at or after `timestamp` in the remote tier of a tiered
/// partition, below its local log (Kafka searches the remote tier first);
/// `None` to search the local log. A store that fails answers
/// KAFKA_STORAGE_ERROR, which clients retry.
async fn remote_offset_for_timestamp(
    broker: &Broker,
    partition: &Partition,
    timestamp: i64,
) -> Result<Option<TimestampOffset>, i16> {
    let Some(remote_start) = partition.remote().log_start() else {
        return Ok(None);
    };
    let local_start = partition.log().log_start_offset();
    let (Some(reader), image) = (broker.remote_reader(), broker.image()) else {
        return Ok(None);
    };
    let Some(remote) = image.remote_log(partition.topic_id, partition.index) else {
        return Ok(None);
    };
    let at = crate::remote::RemoteFetch {
        topic: &partition.topic,
        topic_id: partition.topic_id,
        partition: partition.index,
        offset: remote_start,
        max_bytes: 0,
        upper_bound: local_start,
        read_committed: false,
    };
    let candidates = remote.finished().filter(|s| {
        s.max_timestamp_ms >= timestamp
            && s.end_offset >= remote_start
            && s.base_offset < local_start
    });
    for segment in candidates {
        match reader.offset_for_timestamp(at, segment, timestamp).await {
            Ok(Some(found)) if found.offset < local_start => return Ok(Some(found)),
            Ok(_) => {}
            Err(error) => {
                broker.metrics().remote.error("fetch");
                tracing::warn!(topic = %partition.topic, partition = partition.index, timestamp, %error, "remote offset lookup failed");
                return Err(ResponseError::KafkaStorageError.code());
            }
        }
    }
    Ok(None)
}
