//! Browsing a topic's records for the console:
//! `GET /v1/topics/{topic}/messages` reads the latest N records, or N from
//! an offset or a time, of one partition or of all, from the replicas this
//! broker leads, up to the high watermark (what a consumer could read).
//! Keys, values and header values travel as base64, so the page can show
//! them as text, JSON or hex; a value larger than `max_value_bytes` is cut
//! there, with its whole size given. File reads run off the runtime's
//! workers.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use weir_meta::{AclOperation, ResourceType};

use super::{allowed, Principal};
use crate::broker::Broker;
use crate::partition::Partition;

/// Records returned at most, whatever is asked.
const MAX_LIMIT: usize = 500;
/// Bytes read from a log at a time.
const READ_BYTES: usize = 1 << 20;
/// The keys and values one answer carries at most, over all its records:
/// a value is cut at this over the limit asked for.
const ANSWER_BYTES: usize = 32 << 20;
/// A value (or key) is cut at this many bytes unless asked otherwise.
const DEFAULT_MAX_VALUE_BYTES: usize = 64 << 10;

#[derive(Debug, Deserialize)]
pub(crate) struct MessagesQuery {
    /// One partition; all without it.
    partition: Option<i32>,
    /// `latest` (the default), `offset` or `time`.
    #[serde(default)]
    from: From,
    /// The offset to start at, with `from=offset`.
    offset: Option<u64>,
    /// Milliseconds since the epoch, with `from=time`: the first record
    /// at or after it.
    time: Option<i64>,
    limit: Option<usize>,
    max_value_bytes: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum From {
    #[default]
    Latest,
    Offset,
    Time,
}

#[derive(Debug, Serialize)]
pub(crate) struct Messages {
    pub(crate) records: Vec<MessageView>,
    /// Partitions not read here, and why.
    pub(crate) skipped: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct MessageView {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) timestamp: i64,
    pub(crate) key: Option<String>,
    pub(crate) key_size: Option<usize>,
    pub(crate) value: Option<String>,
    pub(crate) value_size: Option<usize>,
    /// The value or key was cut at `max_value_bytes`.
    pub(crate) truncated: bool,
    pub(crate) headers: Vec<HeaderView>,
}

#[derive(Debug, Serialize)]
pub(crate) struct HeaderView {
    pub(crate) key: String,
    pub(crate) value: Option<String>,
}

pub(crate) async fn messages(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    Path(topic): Path<String>,
    Query(query): Query<MessagesQuery>,
) -> Response {
    // As Fetch: reading records needs Read on the topic.
    if !allowed(
        &broker,
        &principal,
        AclOperation::Read,
        ResourceType::Topic,
        &topic,
    ) {
        return (
            StatusCode::FORBIDDEN,
            format!("reading {topic} needs Read on it\n"),
        )
            .into_response();
    }
    let Some(count) = broker.with_image(|image| image.topic(&topic).map(|t| t.partition_count()))
    else {
        return (StatusCode::NOT_FOUND, "no such topic\n").into_response();
    };
    let partitions: Vec<i32> = match query.partition {
        Some(p) if (0..count).contains(&p) => vec![p],
        Some(p) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("topic {topic} has no partition {p}\n"),
            )
                .into_response()
        }
        None => (0..count).collect(),
    };
    let start = match (query.from, query.offset, query.time) {
        (From::Latest, _, _) => Start::Latest,
        (From::Offset, Some(offset), _) => Start::Offset(offset),
        (From::Time, _, Some(time)) => Start::Time(time),
        (From::Offset, None, _) => {
            return (StatusCode::BAD_REQUEST, "from=offset needs offset=N\n").into_response()
        }
        (From::Time, _, None) => {
            return (StatusCode::BAD_REQUEST, "from=time needs time=MS\n").into_response()
        }
    };
    let limit = query.limit.unwrap_or(50).clamp(1, MAX_LIMIT);
    let max_value_bytes = query
        .max_value_bytes
        .unwrap_or(DEFAULT_MAX_VALUE_BYTES)
        .min(ANSWER_BYTES / limit / 2);
    let read = tokio::task::spawn_blocking(move || {
        read_messages(&broker, &topic, &partitions, start, limit, max_value_bytes)
    })
    .await;
    match read {
        Ok(messages) => Json(messages).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the read failed\n").into_response(),
    }
}

#[derive(Debug, Clone, Copy)]
enum Start {
    Latest,
    Offset(u64),
    Time(i64),
}

fn read_messages(
    broker: &Broker,
    topic: &str,
    partitions: &[i32],
    start: Start,
    limit: usize,
    max_value_bytes: usize,
) -> Messages {
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for &index in partitions {
        let partition = match broker.leader_partition(topic, index) {
            Ok(partition) => partition,
            Err(_) => {
                let leader = broker.with_image(|image| {
                    image
                        .topic(topic)
                        .and_then(|t| t.partition(index))
                        .map_or(-1, |p| p.leader)
                });
                skipped.push(format!(
                    "partition {index} is led by broker {leader}: its console shows it"
                ));
                continue;
            }
        };
        match read_partition(&partition, start, limit) {
            Ok(read) => records.extend(read.into_iter().map(|r| view(index, r, max_value_bytes))),
            Err(error) => skipped.push(format!("partition {index}: {error}")),
        }
        // Only the first `limit` in the answer's order can be in it: what
        // is held stays bounded however many partitions are read.
        order(&mut records, start);
        records.truncate(limit);
    }
    Messages { records, skipped }
}

/// Sorts records in the answer's order.
fn order(records: &mut [MessageView], start: Start) {
    match start {
        // The newest `limit` over all partitions, newest first.
        Start::Latest => {
            records.sort_by_key(|r| std::cmp::Reverse((r.timestamp, r.offset)));
        }
        // In time order from the start, as a consumer would meet them.
        Start::Offset(_) | Start::Time(_) => {
            records.sort_by_key(|r| (r.timestamp, r.partition, r.offset));
        }
    }
}

/// Up to `limit` records of one partition from `start`, below its high
/// watermark.
fn read_partition(
    partition: &Partition,
    start: Start,
    limit: usize,
) -> Result<Vec<weir_client::ConsumedRecord>, String> {
    let log = partition.log();
    let log_start = log.log_start_offset();
    let end = partition.high_watermark();
    let from = match start {
        Start::Latest => end.saturating_sub(limit as u64).max(log_start),
        Start::Offset(offset) => offset.clamp(log_start, end),
        Start::Time(time) => match log.offset_for_timestamp(time).map_err(|e| e.to_string())? {
            Some(found) => found.offset.max(log_start),
            None => end,
        },
    };
    let mut records = Vec::new();
    let mut at = from;
    while at < end && records.len() < limit {
        let slice = log.read(at, READ_BYTES, end).map_err(|e| e.to_string())?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice.to_bytes().map_err(|e| e.to_string())?;
        let decoded = weir_client::decode_records(bytes, at as i64)?;
        let Some(next) = decoded.next_offset.filter(|next| *next as u64 > at) else {
            break;
        };
        records.extend(
            decoded
                .records
                .into_iter()
                .filter(|r| (r.offset as u64) < end),
        );
        at = next as u64;
    }
    records.truncate(limit);
    Ok(records)
}

fn view(partition: i32, record: weir_client::ConsumedRecord, max_bytes: usize) -> MessageView {
    let mut truncated = false;
    let mut encode = |bytes: &Option<Bytes>| {
        bytes.as_ref().map(|b| {
            truncated |= b.len() > max_bytes;
            base64::engine::general_purpose::STANDARD.encode(&b[..b.len().min(max_bytes)])
        })
    };
    let key = encode(&record.key);
    let value = encode(&record.value);
    MessageView {
        partition,
        offset: record.offset,
        timestamp: record.timestamp,
        key,
        key_size: record.key.as_ref().map(Bytes::len),
        value,
        value_size: record.value.as_ref().map(Bytes::len),
        truncated,
        headers: record
            .headers
            .into_iter()
            .map(|(key, value)| HeaderView {
                key,
                value: value.map(|v| base64::engine::general_purpose::STANDARD.encode(&v)),
            })
            .collect(),
    }
}
