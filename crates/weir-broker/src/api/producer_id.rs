//! InitProducerId for idempotent producers: a fresh producer id at epoch 0.
//! Transactional producers are answered by the transaction coordinator
//! (`txn.rs`).

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use weir_meta::{AclOperation, ResourceType};

use super::RequestContext;
use crate::broker::Broker;

pub(super) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    _request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    // An idempotent producer needs IdempotentWrite on the cluster, or
    // Write on some topic (Kafka 3.0+).
    if !ctx.may_on_some(AclOperation::Write, ResourceType::Topic)
        && !ctx.authorized_on_cluster(broker, AclOperation::IdempotentWrite)
    {
        return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    match broker.producer_id() {
        Some(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        None => response.with_error_code(ResponseError::CoordinatorLoadInProgress.code()),
    }
}
