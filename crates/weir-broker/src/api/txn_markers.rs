//! WriteTxnMarkers, from a transaction coordinator to partition leaders:
//! for each marker and each of its partitions, the leader appends the
//! commit or abort marker (`Partition::write_marker_async`, off the runtime's
//! workers) and answers once the
//! marker is on every in-sync replica, as acks=all does, with an error code
//! per partition: NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION) off
//! the leader, NOT_ENOUGH_REPLICAS when the ISR is below
//! `min.insync.replicas`, INVALID_PRODUCER_EPOCH for a marker of a producer
//! epoch older than the partition's (a delayed marker of a transaction that
//! already ended), TRANSACTION_COORDINATOR_FENCED for one from an older
//! coordinator, REQUEST_TIMED_OUT when the followers do not catch up in
//! time. A marker written to a `__consumer_offsets` partition also ends the
//! transaction's offset commits there (`Broker::on_offsets_marker`).
//!
//! Version 1 only: version 0 (the same fields, not flexible) was removed in
//! Kafka 4.0, and the protocol crate no longer decodes it.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;

use weir_meta::AclOperation;

use super::produce::append_error_code;
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::groups::offsets::OFFSETS_TOPIC;
use crate::partition::{Partition, QueuedWrite};

/// How long a marker may wait for the in-sync replicas: less than the
/// coordinator's request timeout, so that it hears why.
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(20);

/// A marker queued on its partition's appender, and where its answer goes.
struct Pending {
    marker: usize,
    topic: usize,
    partition: usize,
    replica: Arc<Partition>,
    producer_id: i64,
    commit: bool,
    written: QueuedWrite,
}

pub(super) fn handle(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: WriteTxnMarkersRequest,
) -> Reply {
    // Only transaction coordinators send markers: they need ClusterAction.
    let denied = !ctx.authorized_on_cluster(broker, AclOperation::ClusterAction);
    if !denied {
        ctx.channel.mark_inter_broker();
    }
    let mut markers = Vec::with_capacity(request.markers.len());
    let mut pending = Vec::new();
    for (m, marker) in request.markers.into_iter().enumerate() {
        let mut topics = Vec::with_capacity(marker.topics.len());
        for (t, topic) in marker.topics.into_iter().enumerate() {
            let name = topic.name.0.to_string();
            let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
            for (p, index) in topic.partition_indexes.into_iter().enumerate() {
                let queued = if denied {
                    Err(ResponseError::ClusterAuthorizationFailed)
                } else {
                    queue(
                        broker,
                        &name,
                        index,
                        marker.producer_id.0,
                        marker.producer_epoch,
                        marker.transaction_result,
                        marker.coordinator_epoch,
                    )
                };
                let code = match queued {
                    Ok((replica, written)) => {
                        pending.push(Pending {
                            marker: m,
                            topic: t,
                            partition: p,
                            replica,
                            producer_id: marker.producer_id.0,
                            commit: marker.transaction_result,
                            written,
                        });
                        0
                    }
                    Err(code) => code.code(),
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics),
        );
    }
    if pending.is_empty() {
        let response = WriteTxnMarkersResponse::default().with_markers(markers);
        return Reply::Now(Some(ctx.respond(&response)));
    }
    let broker = broker.clone();
    Reply::Later(Box::pin(async move {
        let deadline = tokio::time::Instant::now() + REPLICATION_TIMEOUT;
        let mut waits = Vec::with_capacity(pending.len());
        for Pending {
            marker: m,
            topic: t,
            partition: p,
            replica,
            producer_id,
            commit,
            written,
        } in pending
        {
            let (topic, index) = (&replica.topic, replica.index);
            match written.await {
                Ok(appended) => {
                    tracing::debug!(
                        topic,
                        partition = index,
                        producer_id,
                        commit,
                        offset = appended.base_offset,
                        "wrote a transaction marker"
                    );
                    if topic == OFFSETS_TOPIC {
                        broker
                            .on_offsets_marker(index, producer_id, commit, appended.base_offset)
                            .await;
                    }
                    let until = appended.last_offset + 1;
                    if replica.high_watermark() < until {
                        waits.push(((m, t, p), replica, until));
                    }
                }
                Err(error) => {
                    let code = append_error_code(&error);
                    if code == ResponseError::KafkaStorageError {
                        tracing::error!(topic, partition = index, %error, "transaction marker not written");
                    } else {
                        tracing::debug!(topic, partition = index, %error, "transaction marker refused");
                    }
                    markers[m].topics[t].partitions[p].error_code = code.code();
                }
            }
        }
        let node_id = broker.config().startup.node_id;
        for ((m, t, p), replica, until) in waits {
            if let Err((code, message)) = replica.replicated(until, node_id, deadline).await {
                tracing::debug!(
                    topic = %replica.topic,
                    partition = replica.index,
                    %message,
                    "transaction marker not replicated"
                );
                markers[m].topics[t].partitions[p].error_code = code.code();
            }
        }
        let response = WriteTxnMarkersResponse::default().with_markers(markers);
        Some(ctx.respond(&response))
    }))
}

/// Queues one marker on the partition's leader.
fn queue(
    broker: &Broker,
    topic: &str,
    index: i32,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> Result<(Arc<Partition>, QueuedWrite), ResponseError> {
    let partition = broker
        .leader_partition(topic, index)
        .map_err(|not_served| {
            ResponseError::try_from_code(not_served.code())
                .unwrap_or(ResponseError::UnknownServerError)
        })?;
    let state = partition.replica_state();
    let written = partition.write_marker_async(
        producer_id,
        producer_epoch,
        commit,
        coordinator_epoch,
        state.leader_epoch,
    );
    Ok((partition, written))
}
