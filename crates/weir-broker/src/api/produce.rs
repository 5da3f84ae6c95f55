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

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;
use weir_log::batch::{BatchError, BatchHeader, CheckedBatch};
use weir_log::records::RecordsError;
use weir_log::LogError;

use weir_meta::{AclOperation, ResourceType};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::partition::{
    check_single_batch, AppendError, AppendOrigin, Partition, QueuedWrite, RequiredAcks,
};
use crate::quotas::client::QuotaKind;
use crate::txn::add_from_leader::add_to_transaction;

/// An append queued on its partition's appender, still to be answered.
struct Pending {
    topic: usize,
    partition: usize,
    replica: Arc<Partition>,
    appended: QueuedWrite,
}

/// One topic of the request, its name looked up when the request names
/// it by id (v13).
struct TopicData {
    /// None: an id no topic has.
    name: Option<String>,
    response_name: TopicName,
    topic_id: Uuid,
    partitions: Vec<PartitionData>,
}

/// One partition's data, its batch checked once, here at the edge: the
/// appender and the log take it as checked.
struct PartitionData {
    index: i32,
    /// `None`: the request carried no records for it.
    batch: Option<Result<CheckedBatch, AppendError>>,
}

impl PartitionData {
    fn of(data: PartitionProduceData) -> Self {
        Self {
            index: data.index,
            batch: data
                .records
                .filter(|records| !records.is_empty())
                .map(|records| check_single_batch(&records)),
        }
    }

    /// The header of its batch, if it passed the checks.
    fn header(&self) -> Option<BatchHeader<'_>> {
        match &self.batch {
            Some(Ok(batch)) => Some(batch.header()),
            _ => None,
        }
    }
}

/// Appends every partition's batch; answers at once, or once the appends
/// are synced (`flush.messages`) and (acks=all) the followers have them.
/// No response at all for acks=0.
///
/// From v12 a transactional producer (transactions v2) leaves adding a
/// partition to its transaction to the partition's leader: a batch for a
/// partition where the producer has no transaction open waits for the
/// coordinator to add it, and the connection's later transactional
/// batches append after it.
pub(super) fn handle(broker: &Arc<Broker>, ctx: RequestContext, request: ProduceRequest) -> Reply {
    // Kafka counts the whole request against the producer's byte rate.
    let throttle = ctx.record_quota(broker, QuotaKind::Produce, ctx.request_size as f64);
    ctx.channel.throttle(throttle);
    let throttle_time_ms = i32::try_from(throttle).unwrap_or(i32::MAX);
    let topics: Vec<TopicData> = broker.with_image(|image| {
        request
            .topic_data
            .into_iter()
            .map(|topic| {
                let (name, response_name) = if ctx.version >= 13 {
                    let name = image.topic_by_id(topic.topic_id).map(|t| t.name.clone());
                    let response_name = name.as_ref().map_or_else(TopicName::default, |n| {
                        TopicName(StrBytes::from_string(n.clone()))
                    });
                    (name, response_name)
                } else {
                    (Some(topic.name.0.to_string()), topic.name)
                };
                TopicData {
                    name,
                    response_name,
                    topic_id: topic.topic_id,
                    partitions: topic
                        .partition_data
                        .into_iter()
                        .map(PartitionData::of)
                        .collect(),
                }
            })
            .collect()
    });
    let request = Request {
        transactional_id: request.transactional_id.map(|id| id.0.to_string()),
        acks: request.acks,
        timeout: Duration::from_millis(request.timeout_ms.max(0) as u64),
        throttle_time_ms,
        topics,
    };
    let adds_partitions = ctx.version >= 12 && request.transactional_id.is_some();
    if !adds_partitions
        || (!ctx.channel.earlier_append_waits() && to_add(broker, &ctx, &request).is_empty())
    {
        let (responses, pending) = append_all(broker, &ctx, &request, &HashMap::new());
        return respond_when_done(broker.clone(), ctx, request, responses, pending);
    }
    let (earlier, appended) = ctx.channel.queue_append();
    let broker = broker.clone();
    Reply::Later(Box::pin(async move {
        if let Some(earlier) = earlier {
            let _ = earlier.await;
        }
        let mut refused = HashMap::new();
        let transactional_id = request.transactional_id.as_deref().unwrap_or_default();
        for (producer, partitions) in to_add(&broker, &ctx, &request) {
            let added =
                add_to_transaction(broker.txns(), transactional_id, producer, &partitions).await;
            if let Err(error) = added {
                let refusal = refusal(error);
                refused.extend(partitions.into_iter().map(|p| (p, refusal.clone())));
            }
        }
        let (responses, pending) = append_all(&broker, &ctx, &request, &refused);
        // Queued: the connection's next transactional batches may go.
        drop(appended);
        answer(&broker, &ctx, &request, responses, pending).await
    }))
}

/// A produce request, its topics resolved.
struct Request {
    transactional_id: Option<String>,
    acks: i16,
    timeout: Duration,
    throttle_time_ms: i32,
    topics: Vec<TopicData>,
}

/// The partitions led here whose producer has no transaction open on
/// them, by producer (id, epoch): only those the client may write to for
/// its transactional id.
fn to_add(
    broker: &Broker,
    ctx: &RequestContext,
    request: &Request,
) -> HashMap<(i64, i16), Vec<(String, i32)>> {
    let mut to_add: HashMap<(i64, i16), Vec<(String, i32)>> = HashMap::new();
    let allowed = request.transactional_id.as_ref().is_some_and(|id| {
        ctx.authorized(
            broker,
            AclOperation::Write,
            ResourceType::TransactionalId,
            id,
        )
    });
    if !allowed {
        return to_add;
    }
    for topic in &request.topics {
        let Some(name) = &topic.name else { continue };
        if !ctx.authorized(broker, AclOperation::Write, ResourceType::Topic, name) {
            continue;
        }
        for data in &topic.partitions {
            let Some(header) = data.header().filter(|header| header.is_transactional()) else {
                continue;
            };
            let producer = (header.producer_id(), header.producer_epoch());
            let Ok(partition) = broker.leader_partition(name, data.index) else {
                continue;
            };
            // A mirror's partition takes no producer's batch, nor, then, a
            // transaction marker: it is refused below.
            if partition.mirror().is_some() {
                continue;
            }
            if !partition.in_transaction(producer.0, producer.1) {
                to_add
                    .entry(producer)
                    .or_default()
                    .push((name.clone(), data.index));
            }
        }
    }
    to_add
}

/// What a producer is told when its partition could not join its
/// transaction, as Kafka tells it: a retriable NOT_ENOUGH_REPLICAS when
/// the coordinator is busy or away (it does not send the producer looking
/// for new metadata), INVALID_PRODUCER_EPOCH when it is fenced.
fn refusal(error: ResponseError) -> (ResponseError, String) {
    let code = match error {
        ResponseError::ConcurrentTransactions
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator => ResponseError::NotEnoughReplicas,
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        other => other,
    };
    let message =
        format!("Unable to add the partition to the transaction. Underlying error: {error:?}");
    (code, message)
}

/// Queues the batches on their partitions' appenders, but for the
/// partitions in `refused`: the answers so far, and the appends to wait for.
fn append_all(
    broker: &Broker,
    ctx: &RequestContext,
    request: &Request,
    refused: &HashMap<(String, i32), (ResponseError, String)>,
) -> (Vec<TopicProduceResponse>, Vec<Pending>) {
    let mut responses = Vec::with_capacity(request.topics.len());
    let mut pending = Vec::new();
    let invalid_acks = !matches!(request.acks, -1..=1);
    let transactional = request.transactional_id.is_some();
    let internal_allowed = ctx.client_id == super::ADMIN_CLIENT_ID;
    // A transactional producer must be allowed to write for its id.
    let transactional_id_denied = request.transactional_id.as_ref().is_some_and(|id| {
        !ctx.authorized(
            broker,
            AclOperation::Write,
            ResourceType::TransactionalId,
            id,
        )
    });
    for (t, topic) in request.topics.iter().enumerate() {
        let topic_denied = !transactional_id_denied
            && topic.name.as_ref().is_some_and(|name| {
                !ctx.authorized(broker, AclOperation::Write, ResourceType::Topic, name)
            });
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for (p, data) in topic.partitions.iter().enumerate() {
            let response = if invalid_acks {
                error(data.index, ResponseError::InvalidRequiredAcks, None)
            } else if topic.name.is_none() {
                error(data.index, ResponseError::UnknownTopicId, None)
            } else if transactional_id_denied {
                error(
                    data.index,
                    ResponseError::TransactionalIdAuthorizationFailed,
                    None,
                )
            } else if topic_denied {
                error(data.index, ResponseError::TopicAuthorizationFailed, None)
            } else if let Some((code, message)) = check_transactional(transactional, data.header())
            {
                error(data.index, code, Some(message.into()))
            } else if let Some(name) = topic
                .name
                .as_deref()
                .filter(|name| super::is_internal_topic(name) && !internal_allowed)
            {
                // As Kafka: only its own tools write to an internal topic.
                error(
                    data.index,
                    ResponseError::InvalidTopicException,
                    Some(format!("Cannot append to internal topic {name}")),
                )
            } else if let Some((code, message)) = topic
                .name
                .as_ref()
                .filter(|_| !refused.is_empty())
                .and_then(|name| refused.get(&(name.clone(), data.index)))
            {
                error(data.index, *code, Some(message.clone()))
            } else {
                match queue_partition(
                    broker,
                    topic.name.as_deref().unwrap_or_default(),
                    data.index,
                    request.acks,
                    data.batch.as_ref(),
                ) {
                    Ok((replica, appended)) => {
                        pending.push(Pending {
                            topic: t,
                            partition: p,
                            replica,
                            appended,
                        });
                        PartitionProduceResponse::default().with_index(data.index)
                    }
                    Err((code, message)) => error(data.index, code, message),
                }
            };
            partitions.push(response);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.response_name.clone())
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    (responses, pending)
}

/// Answers once the appends in `pending` are in the log (and synced, under
/// `flush.messages`) and, under acks=all, replicated.
fn respond_when_done(
    broker: Arc<Broker>,
    ctx: RequestContext,
    request: Request,
    responses: Vec<TopicProduceResponse>,
    pending: Vec<Pending>,
) -> Reply {
    if pending.is_empty() && request.acks != 0 {
        return Reply::Now(Some(
            ctx.respond(
                &ProduceResponse::default()
                    .with_responses(responses)
                    .with_throttle_time_ms(request.throttle_time_ms),
            ),
        ));
    }
    Reply::Later(Box::pin(async move {
        answer(&broker, &ctx, &request, responses, pending).await
    }))
}

async fn answer(
    broker: &Broker,
    ctx: &RequestContext,
    request: &Request,
    mut responses: Vec<TopicProduceResponse>,
    pending: Vec<Pending>,
) -> Option<super::Outgoing> {
    let deadline = tokio::time::Instant::now() + request.timeout;
    let mut waits = Vec::with_capacity(pending.len());
    for Pending {
        topic,
        partition,
        replica,
        appended,
    } in pending
    {
        let response = &mut responses[topic].partition_responses[partition];
        match appended.await {
            Ok(appended) => {
                broker.metrics().records_appended.inc_by(appended.records);
                if !appended.duplicate {
                    let series = || {
                        broker
                            .metrics()
                            .producer_bytes_in
                            .get_or_create(&crate::metrics::PartitionLabels {
                                topic: replica.topic.clone(),
                                partition: replica.index.to_string(),
                            })
                            .clone()
                    };
                    replica.count_producer_bytes(series, appended.bytes);
                }
                response.base_offset = appended.base_offset as i64;
                response.log_append_time_ms = appended.log_append_time_ms.unwrap_or(-1);
                response.log_start_offset = replica.log().log_start_offset() as i64;
                // A duplicate's records were appended before; they too
                // must be replicated before acks=all answers.
                let until = appended.last_offset + 1;
                if request.acks == -1 && replica.high_watermark() < until {
                    waits.push((topic, partition, replica, until));
                }
            }
            Err(e) => *response = refused_append(&replica.topic, response.index, &e),
        }
    }
    if request.acks == 0 {
        return None;
    }
    let node_id = broker.node_id();
    for (topic, partition, replica, until) in waits {
        let outcome = replica.replicated(until, node_id, deadline).await;
        if let Err((code, message)) = outcome {
            let response = &mut responses[topic].partition_responses[partition];
            *response = error(response.index, code, Some(message));
        }
    }
    Some(
        ctx.respond(
            &ProduceResponse::default()
                .with_responses(responses)
                .with_throttle_time_ms(request.throttle_time_ms),
        ),
    )
}

/// Queues one partition's batch on its leader's appender; the error to
/// answer with instead when it cannot be appended here.
fn queue_partition(
    broker: &Broker,
    topic: &str,
    index: i32,
    acks: i16,
    batch: Option<&Result<CheckedBatch, AppendError>>,
) -> Result<(Arc<Partition>, QueuedWrite), (ResponseError, Option<String>)> {
    let partition = broker
        .leader_partition(topic, index)
        .map_err(|not_served| {
            let code = ResponseError::try_from_code(not_served.code())
                .unwrap_or(ResponseError::UnknownServerError);
            (code, None)
        })?;
    if let Some(mirror) = partition.mirror() {
        // Kafka has no error of its own for this yet (KIP-1279 proposes
        // READ_ONLY_TOPIC); INVALID_REQUEST is not retried, and the message
        // says why.
        return Err((
            ResponseError::InvalidRequest,
            Some(format!(
                "topic {topic} is a read-only mirror topic fed by mirror {mirror}; it takes writes after `weir mirror failover {mirror}`"
            )),
        ));
    }
    let leader_epoch = partition.replica_state().leader_epoch;
    let batch = match batch {
        None => return Err((ResponseError::InvalidRecord, Some("no records".into()))),
        Some(Err(refused)) => return Err((append_error_code(refused), Some(refused.to_string()))),
        Some(Ok(batch)) => batch,
    };
    let required = if acks == -1 {
        RequiredAcks::All
    } else {
        RequiredAcks::Leader
    };
    let appended = partition.append(batch.clone(), leader_epoch, AppendOrigin::Client, required);
    Ok((partition, appended))
}

/// The answer for a batch its partition refused.
fn refused_append(topic: &str, index: i32, e: &AppendError) -> PartitionProduceResponse {
    let code = append_error_code(e);
    if code == ResponseError::KafkaStorageError {
        tracing::error!(topic, partition = index, error = %e, "append failed");
    }
    let mut response = error(index, code, Some(e.to_string()));
    if let AppendError::InvalidRecords { records, .. } = e {
        response.record_errors = records
            .iter()
            .map(|(batch_index, message)| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(*batch_index)
                    .with_batch_index_error_message(Some(StrBytes::from_string(message.clone())))
            })
            .collect();
    }
    response
}

/// Whether the batch's transactional attribute agrees with the request's
/// transactional id; the error otherwise.
fn check_transactional(
    has_transactional_id: bool,
    header: Option<BatchHeader<'_>>,
) -> Option<(ResponseError, &'static str)> {
    match (has_transactional_id, header?.is_transactional()) {
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
        AppendError::Log(_) | AppendError::FlushFailed(_) => ResponseError::KafkaStorageError,
        // The broker is stopping: the client finds the new leader.
        AppendError::Abandoned | AppendError::MovedSinceFetch { .. } => {
            ResponseError::NotLeaderOrFollower
        }
    }
}

fn error(index: i32, error: ResponseError, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error.code())
        .with_base_offset(-1)
        .with_error_message(message.map(StrBytes::from_string))
}
