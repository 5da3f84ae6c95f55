//! Fetch: whole batches as stored, up to the high watermark, with a
//! long-poll woken by appends when fewer than `min_bytes` are available.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use tokio::sync::watch;
use tokio::time::Instant;
use weir_log::LogError;

use super::RequestContext;
use crate::broker::Broker;
use crate::partition::Partition;

struct Target {
    index: i32,
    fetch_offset: i64,
    max_bytes: usize,
    partition: Option<Arc<Partition>>,
}

pub(super) async fn handle(
    broker: &Broker,
    _ctx: &RequestContext,
    request: FetchRequest,
) -> FetchResponse {
    let topics: Vec<(kafka_protocol::messages::TopicName, Vec<Target>)> = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let targets = topic
                .partitions
                .into_iter()
                .map(|p| Target {
                    index: p.partition,
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes.max(0) as usize,
                    partition: broker.partition(&name, p.partition),
                })
                .collect();
            (topic.topic, targets)
        })
        .collect();
    let mut watchers: Vec<watch::Receiver<u64>> = topics
        .iter()
        .flat_map(|(_, targets)| targets.iter())
        .filter_map(|t| t.partition.as_ref().map(|p| p.subscribe()))
        .collect();
    let max_bytes = usize::try_from(request.max_bytes).unwrap_or(usize::MAX);
    let min_bytes = request.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    loop {
        for watcher in &mut watchers {
            watcher.borrow_and_update();
        }
        let (responses, bytes, has_error) = read_all(&topics, max_bytes);
        let timed_out = Instant::now() >= deadline;
        if bytes >= min_bytes.max(1) || has_error || timed_out || watchers.is_empty() {
            return FetchResponse::default()
                .with_session_id(0)
                .with_responses(responses);
        }
        let any_append =
            futures::future::select_all(watchers.iter_mut().map(|w| Box::pin(w.changed())));
        // On timeout, loop once more to answer with whatever is there.
        let _ = tokio::time::timeout_at(deadline, any_append).await;
    }
}

fn read_all(
    topics: &[(kafka_protocol::messages::TopicName, Vec<Target>)],
    max_bytes: usize,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut total = 0usize;
    let mut has_error = false;
    let mut responses = Vec::with_capacity(topics.len());
    for (name, targets) in topics {
        let mut partitions = Vec::with_capacity(targets.len());
        for target in targets {
            let data = read_partition(target, max_bytes.saturating_sub(total), total > 0);
            has_error |= data.error_code != 0;
            total += data.records.as_ref().map_or(0, Bytes::len);
            partitions.push(data);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(name.clone())
                .with_partitions(partitions),
        );
    }
    (responses, total, has_error)
}

/// Reads one partition within `budget` bytes. Only the first partition
/// with data may exceed the budget (to make progress past a large batch).
fn read_partition(target: &Target, budget: usize, have_data: bool) -> PartitionData {
    let data = PartitionData::default().with_partition_index(target.index);
    let Some(partition) = &target.partition else {
        return data.with_error_code(ResponseError::UnknownTopicOrPartition.code());
    };
    let high_watermark = partition.high_watermark();
    let log_start = partition.log.log_start_offset();
    let data = data
        .with_high_watermark(high_watermark as i64)
        .with_last_stable_offset(high_watermark as i64)
        .with_log_start_offset(log_start as i64);
    let Ok(offset) = u64::try_from(target.fetch_offset) else {
        return data.with_error_code(ResponseError::OffsetOutOfRange.code());
    };
    let limit = target.max_bytes.min(budget);
    if limit == 0 && have_data {
        return data.with_records(Some(Bytes::new()));
    }
    let read = partition
        .log
        .read(offset, limit.max(1), high_watermark)
        .and_then(|slice| {
            if have_data && slice.len() as usize > limit {
                return Ok(Bytes::new());
            }
            slice.to_bytes().map_err(|source| LogError::Io {
                path: slice.path().map(|p| p.to_owned()).unwrap_or_default(),
                source,
            })
        });
    match read {
        Ok(records) => data.with_records(Some(records)),
        Err(LogError::OffsetOutOfRange { .. }) => {
            data.with_error_code(ResponseError::OffsetOutOfRange.code())
        }
        Err(error) => {
            tracing::error!(topic = %partition.topic, partition = target.index, %error, "fetch failed");
            data.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}
