//! Produce: validate and append each partition's batch on its leader.
//! Followers do not copy data yet, so acks=all is refused for a partition
//! whose ISR holds more than its leader rather than acknowledged as
//! replicated.

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_log::batch::BatchError;
use weir_log::LogError;

use super::RequestContext;
use crate::broker::Broker;
use crate::partition::AppendError;

/// Returns `None` for acks=0: the client expects no response.
pub(super) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    request: ProduceRequest,
) -> Option<crate::net::Outgoing> {
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let invalid_acks = !matches!(request.acks, -1..=1);
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let response = if invalid_acks {
                error(data.index, ResponseError::InvalidRequiredAcks, None)
            } else if request.transactional_id.is_some() {
                error(
                    data.index,
                    ResponseError::TransactionalIdAuthorizationFailed,
                    Some("transactions are not supported yet".into()),
                )
            } else {
                produce_partition(
                    broker,
                    &name,
                    data.index,
                    request.acks,
                    data.records.as_deref(),
                )
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
        return None;
    }
    Some(ctx.respond(&ProduceResponse::default().with_responses(responses)))
}

fn produce_partition(
    broker: &Broker,
    topic: &str,
    index: i32,
    acks: i16,
    records: Option<&[u8]>,
) -> PartitionProduceResponse {
    let partition = match broker.leader_partition(topic, index) {
        Ok(partition) => partition,
        Err(not_served) => {
            let code = ResponseError::try_from_code(not_served.code())
                .unwrap_or(ResponseError::UnknownServerError);
            return error(index, code, None);
        }
    };
    let state = partition.replica_state();
    if acks == -1 && state.isr_size < state.min_insync_replicas {
        return error(
            index,
            ResponseError::NotEnoughReplicas,
            Some(format!(
                "the ISR has {} replica(s), fewer than min.insync.replicas={}",
                state.isr_size, state.min_insync_replicas
            )),
        );
    }
    if acks == -1 && state.isr_size > 1 {
        return error(
            index,
            ResponseError::NotEnoughReplicas,
            Some(
                "acks=all needs replication to followers, which this version does not do; \
                 use acks=1 or a replication factor of 1"
                    .into(),
            ),
        );
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return error(
            index,
            ResponseError::InvalidRecord,
            Some("no records".into()),
        );
    };
    match partition.append(records, state.leader_epoch) {
        Ok(appended) => {
            broker.metrics().records_appended.inc_by(appended.records);
            PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(appended.base_offset as i64)
                .with_log_append_time_ms(appended.log_append_time_ms.unwrap_or(-1))
                .with_log_start_offset(partition.log.log_start_offset() as i64)
        }
        Err(e) => {
            let code = append_error_code(&e);
            if code == ResponseError::KafkaStorageError {
                tracing::error!(topic, partition = index, error = %e, "append failed");
            }
            error(index, code, Some(e.to_string()))
        }
    }
}

fn append_error_code(error: &AppendError) -> ResponseError {
    match error {
        AppendError::BatchCount(_) => ResponseError::InvalidRecord,
        AppendError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        AppendError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
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
