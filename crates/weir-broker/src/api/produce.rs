//! Produce: validate and append each partition's batch on its leader.
//! acks=0 and acks=1 are answered once the leader has the batch; acks=all
//! once every in-sync replica has it (the high watermark passed it), with
//! NOT_ENOUGH_REPLICAS when the ISR is below `min.insync.replicas` before
//! the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND when it fell below while
//! waiting, and REQUEST_TIMED_OUT when the request's timeout ran out.
//!
//! A request with a transactional id carries transactional batches (the
//! producer's open transaction), and only such a request may:
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional batch without
//! one (as Kafka answers), INVALID_RECORD for a plain batch with one.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_log::batch::{BatchError, BatchHeader};
use weir_log::records::RecordsError;
use weir_log::LogError;

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::partition::{AppendError, Partition};

/// An acks=all append waiting for its followers: where its answer goes,
/// and the offset the high watermark must reach.
struct Pending {
    topic: usize,
    partition: usize,
    replica: Arc<Partition>,
    until: u64,
}

/// Appends every partition's batch; answers at once, or (acks=all) once
/// the followers have the batches. No response at all for acks=0.
pub(super) fn handle(broker: &Broker, ctx: RequestContext, request: ProduceRequest) -> Reply {
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let mut pending = Vec::new();
    let invalid_acks = !matches!(request.acks, -1..=1);
    for (t, topic) in request.topic_data.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for (p, data) in topic.partition_data.into_iter().enumerate() {
            let transactional = request.transactional_id.is_some();
            let response = if invalid_acks {
                error(data.index, ResponseError::InvalidRequiredAcks, None)
            } else if let Some((code, message)) =
                check_transactional(transactional, data.records.as_deref())
            {
                error(data.index, code, Some(message.into()))
            } else {
                let (response, wait) = produce_partition(
                    broker,
                    &name,
                    data.index,
                    request.acks,
                    data.records.as_deref(),
                );
                if let Some((replica, until)) = wait {
                    pending.push(Pending {
                        topic: t,
                        partition: p,
                        replica,
                        until,
                    });
                }
                response
            };
            partitions.push(response);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    if request.acks == 0 {
        return Reply::Now(None);
    }
    if pending.is_empty() {
        return Reply::Now(Some(
            ctx.respond(&ProduceResponse::default().with_responses(responses)),
        ));
    }
    let node_id = broker.node_id();
    let timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
    Reply::Later(Box::pin(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        for wait in pending {
            let outcome = wait.replica.replicated(wait.until, node_id, deadline).await;
            if let Err((code, message)) = outcome {
                let response = &mut responses[wait.topic].partition_responses[wait.partition];
                *response = error(response.index, code, Some(message));
            }
        }
        Some(ctx.respond(&ProduceResponse::default().with_responses(responses)))
    }))
}

/// Appends one partition's batch; with acks=all also returns what to wait
/// for.
fn produce_partition(
    broker: &Broker,
    topic: &str,
    index: i32,
    acks: i16,
    records: Option<&[u8]>,
) -> (PartitionProduceResponse, Option<(Arc<Partition>, u64)>) {
    let partition = match broker.leader_partition(topic, index) {
        Ok(partition) => partition,
        Err(not_served) => {
            let code = ResponseError::try_from_code(not_served.code())
                .unwrap_or(ResponseError::UnknownServerError);
            return (error(index, code, None), None);
        }
    };
    let state = partition.replica_state();
    if acks == -1 && state.isr_size < state.min_insync_replicas {
        let message = format!(
            "the ISR has {} replica(s), fewer than min.insync.replicas={}",
            state.isr_size, state.min_insync_replicas
        );
        return (
            error(index, ResponseError::NotEnoughReplicas, Some(message)),
            None,
        );
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return (
            error(
                index,
                ResponseError::InvalidRecord,
                Some("no records".into()),
            ),
            None,
        );
    };
    match partition.append(records, state.leader_epoch) {
        Ok(appended) => {
            broker.metrics().records_appended.inc_by(appended.records);
            let response = PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(appended.base_offset as i64)
                .with_log_append_time_ms(appended.log_append_time_ms.unwrap_or(-1))
                .with_log_start_offset(partition.log.log_start_offset() as i64);
            // A duplicate's records were appended before; they too must
            // be replicated before acks=all answers.
            let until = appended.last_offset + 1;
            let wait =
                (acks == -1 && partition.high_watermark() < until).then_some((partition, until));
            (response, wait)
        }
        Err(e) => {
            let code = append_error_code(&e);
            if code == ResponseError::KafkaStorageError {
                tracing::error!(topic, partition = index, error = %e, "append failed");
            }
            let mut response = error(index, code, Some(e.to_string()));
            if let AppendError::KeylessRecords { indexes, .. } = &e {
                response.record_errors = indexes
                    .iter()
                    .map(|&batch_index| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(batch_index)
                            .with_batch_index_error_message(Some(StrBytes::from_static_str(
                                "Compacted topic cannot accept message without key.",
                            )))
                    })
                    .collect();
            }
            (response, None)
        }
    }
}

/// Whether the batch's transactional attribute agrees with the request's
/// transactional id; the error otherwise.
fn check_transactional(
    has_transactional_id: bool,
    records: Option<&[u8]>,
) -> Option<(ResponseError, &'static str)> {
    let header = BatchHeader::parse(records?, 0).ok()?;
    match (has_transactional_id, header.is_transactional()) {
        (false, true) => Some((
            ResponseError::TransactionalIdAuthorizationFailed,
            "a transactional batch needs a transactional id in the produce request",
        )),
        (true, false) => Some((
            ResponseError::InvalidRecord,
            "a produce request with a transactional id carries transactional batches only",
        )),
        _ => None,
    }
}

/// The Kafka error for a failed append.
pub(super) fn append_error_code(error: &AppendError) -> ResponseError {
    match error {
        AppendError::BatchCount(_) => ResponseError::InvalidRecord,
        AppendError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        AppendError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        AppendError::ControlBatch | AppendError::TransactionalWithoutProducer => {
            ResponseError::InvalidRecord
        }
        AppendError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        AppendError::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
        AppendError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
        AppendError::KeylessRecords { .. } => ResponseError::InvalidRecord,
        // A producer splits a batch refused as too large (the Java client
        // does); the bound is on the inflated size.
        AppendError::UnreadableRecords(RecordsError::TooLarge { .. }) => {
            ResponseError::MessageTooLarge
        }
        AppendError::UnreadableRecords(_) => ResponseError::CorruptMessage,
        AppendError::Log(LogError::InvalidBatch(batch)) => match batch {
            BatchError::TooLarge { .. } => ResponseError::MessageTooLarge,
            BatchError::WrongMagic { .. } => ResponseError::UnsupportedForMessageFormat,
            BatchError::RecordCountMismatch { .. } => ResponseError::InvalidRecord,
            _ => ResponseError::CorruptMessage,
        },
        AppendError::Log(LogError::EmptyAppend) => ResponseError::InvalidRecord,
        AppendError::Log(_) => ResponseError::KafkaStorageError,
    }
}

fn error(index: i32, error: ResponseError, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error.code())
        .with_base_offset(-1)
        .with_error_message(message.map(StrBytes::from_string))
}
