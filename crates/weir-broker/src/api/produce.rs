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

use weir_meta::{AclOperation, ResourceType};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::client_quotas::QuotaKind;
use crate::partition::{AppendError, AppendOrigin, FlushDue, Partition, RequiredAcks, Written};

/// An append still to be answered: its fsync (`flush.messages`) has to
/// run, or (acks=all) its followers have to copy it.
struct Pending {
    topic: usize,
    partition: usize,
    wait: Wait,
}

/// What one partition's append waits for.
struct Wait {
    replica: Arc<Partition>,
    flush: Option<FlushDue>,
    /// acks=all: the offset the high watermark must reach.
    until: Option<u64>,
}

/// Appends every partition's batch; answers at once, or once the appends
/// are synced (`flush.messages`) and (acks=all) the followers have them.
/// No response at all for acks=0.
pub(super) fn handle(broker: &Broker, ctx: RequestContext, request: ProduceRequest) -> Reply {
    // Kafka counts the whole request against the producer's byte rate.
    let throttle = ctx.record_quota(broker, QuotaKind::Produce, ctx.request_size as f64);
    ctx.channel.throttle(throttle);
    let throttle_time_ms = i32::try_from(throttle).unwrap_or(i32::MAX);
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let mut pending = Vec::new();
    let invalid_acks = !matches!(request.acks, -1..=1);
    // A transactional producer must be allowed to write for its id.
    let transactional_id_denied = request.transactional_id.as_ref().is_some_and(|id| {
        !ctx.authorized(
            broker,
            AclOperation::Write,
            ResourceType::TransactionalId,
            id,
        )
    });
    for (t, topic) in request.topic_data.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let topic_denied = !transactional_id_denied
            && !ctx.authorized(broker, AclOperation::Write, ResourceType::Topic, &name);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for (p, data) in topic.partition_data.into_iter().enumerate() {
            let transactional = request.transactional_id.is_some();
            let response = if invalid_acks {
                error(data.index, ResponseError::InvalidRequiredAcks, None)
            } else if transactional_id_denied {
                error(
                    data.index,
                    ResponseError::TransactionalIdAuthorizationFailed,
                    None,
                )
            } else if topic_denied {
                error(data.index, ResponseError::TopicAuthorizationFailed, None)
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
                if let Some(wait) = wait {
                    pending.push(Pending {
                        topic: t,
                        partition: p,
                        wait,
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
    let acks = request.acks;
    if pending.is_empty() {
        return Reply::Now((acks != 0).then(|| {
            ctx.respond(
                &ProduceResponse::default()
                    .with_responses(responses)
                    .with_throttle_time_ms(throttle_time_ms),
            )
        }));
    }
    let node_id = broker.node_id();
    let timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
    Reply::Later(Box::pin(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        for (index, failure) in flush(&mut pending).await {
            let Pending {
                topic, partition, ..
            } = pending[index];
            let response = &mut responses[topic].partition_responses[partition];
            *response = error(response.index, failure.0, Some(failure.1));
            pending[index].wait.until = None;
        }
        if acks == 0 {
            return None;
        }
        for pending in &pending {
            let Some(until) = pending.wait.until else {
                continue;
            };
            let outcome = pending
                .wait
                .replica
                .replicated(until, node_id, deadline)
                .await;
            if let Err((code, message)) = outcome {
                let response = &mut responses[pending.topic].partition_responses[pending.partition];
                *response = error(response.index, code, Some(message));
            }
        }
        Some(
            ctx.respond(
                &ProduceResponse::default()
                    .with_responses(responses)
                    .with_throttle_time_ms(throttle_time_ms),
            ),
        )
    }))
}

/// Runs the fsyncs the appends wait for, in one hop to the blocking pool;
/// returns the failed ones, by index into `pending`.
async fn flush(pending: &mut [Pending]) -> Vec<(usize, (ResponseError, String))> {
    let due: Vec<(usize, Arc<Partition>, FlushDue)> = pending
        .iter_mut()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.wait.replica.clone(), p.wait.flush.take()?)))
        .collect();
    if due.is_empty() {
        return Vec::new();
    }
    let indexes: Vec<usize> = due.iter().map(|(i, ..)| *i).collect();
    let flushed = tokio::task::spawn_blocking(move || {
        due.into_iter()
            .filter_map(|(i, partition, due)| {
                let error = partition.flush_appended(due).err()?;
                tracing::error!(topic = %partition.topic, partition = partition.index, %error, "flush failed");
                Some((i, (append_error_code(&error), error.to_string())))
            })
            .collect()
    })
    .await;
    flushed.unwrap_or_else(|panicked| {
        let message = format!("the flush failed: {panicked}");
        indexes
            .into_iter()
            .map(|i| (i, (ResponseError::KafkaStorageError, message.clone())))
            .collect()
    })
}

/// Appends one partition's batch; returns what the answer must wait for,
/// if anything.
fn produce_partition(
    broker: &Broker,
    topic: &str,
    index: i32,
    acks: i16,
    records: Option<&[u8]>,
) -> (PartitionProduceResponse, Option<Wait>) {
    let partition = match broker.leader_partition(topic, index) {
        Ok(partition) => partition,
        Err(not_served) => {
            let code = ResponseError::try_from_code(not_served.code())
                .unwrap_or(ResponseError::UnknownServerError);
            return (error(index, code, None), None);
        }
    };
    let leader_epoch = partition.replica_state().leader_epoch;
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
    let required = if acks == -1 {
        RequiredAcks::All
    } else {
        RequiredAcks::Leader
    };
    let append =
        || partition.append_unflushed(records, leader_epoch, AppendOrigin::Client, required);
    let appended = if partition.inflates_on_append(records) {
        crate::blocking::without_holding_up_the_worker(append)
    } else {
        append()
    };
    match appended {
        Ok(written) => {
            let (appended, flush) = match written {
                Written::Appended(appended) => (appended, None),
                Written::FlushDue(due) => (due.appended(), Some(due)),
            };
            broker.metrics().records_appended.inc_by(appended.records);
            let response = PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(appended.base_offset as i64)
                .with_log_append_time_ms(appended.log_append_time_ms.unwrap_or(-1))
                .with_log_start_offset(partition.log().log_start_offset() as i64);
            // A duplicate's records were appended before; they too must
            // be replicated before acks=all answers.
            let until = appended.last_offset + 1;
            let until = (acks == -1 && (flush.is_some() || partition.high_watermark() < until))
                .then_some(until);
            let wait = (flush.is_some() || until.is_some()).then_some(Wait {
                replica: partition,
                flush,
                until,
            });
            (response, wait)
        }
        Err(e) => {
            let code = append_error_code(&e);
            if code == ResponseError::KafkaStorageError {
                tracing::error!(topic, partition = index, error = %e, "append failed");
            }
            let mut response = error(index, code, Some(e.to_string()));
            if let AppendError::InvalidRecords { records, .. } = &e {
                response.record_errors = records
                    .iter()
                    .map(|(batch_index, message)| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(*batch_index)
                            .with_batch_index_error_message(Some(StrBytes::from_string(
                                message.clone(),
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
        AppendError::NotLeader { .. } => ResponseError::NotLeaderOrFollower,
        AppendError::InvalidRecords {
            timestamps: true, ..
        } => ResponseError::InvalidTimestamp,
        AppendError::InvalidRecords { .. } => ResponseError::InvalidRecord,
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
