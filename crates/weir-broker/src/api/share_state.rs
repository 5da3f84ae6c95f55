//! InitializeShareGroupState, ReadShareGroupState and WriteShareGroupState:
//! what a share-partition leader asks of the broker leading its
//! share-partition's `__share_group_state` partition (Kafka's share
//! coordinator). Brokers only: they need ClusterAction. A write is answered
//! once the in-sync replicas hold it; reads and writes run in turn on the
//! state partition's shard of the coordinator runtime.

use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::{
    initialize_share_group_state_response as init, read_share_group_state_response as read,
    write_share_group_state_response as write, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, ResourceType};

use super::RequestContext;
use crate::broker::Broker;
use crate::coordinator::Applied;
use crate::coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::partition::Partition;
use crate::share::state_coordinator::{state_partition_for, StateWritten, SHARE_STATE_TOPIC};
use crate::share::{PersistedState, RecordState, StateBatch};
use weir_coord::records::share_state::SharePartitionKey;

fn key(group: &str, topic_id: Uuid, partition: i32) -> SharePartitionKey {
    SharePartitionKey {
        group: group.to_owned(),
        topic_id,
        partition,
    }
}

/// The state partition of `key`, which this broker must lead.
fn state_partition(broker: &Broker, key: &SharePartitionKey) -> Result<Arc<Partition>, i16> {
    let count = broker
        .with_image(|image| image.topic(SHARE_STATE_TOPIC).map(|t| t.partition_count()))
        .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    let index = state_partition_for(key, count);
    let partition = broker
        .leader_partition(SHARE_STATE_TOPIC, index)
        .map_err(|_| ResponseError::NotCoordinator.code())?;
    if !broker.share_state().leads(index) {
        return Err(ResponseError::CoordinatorLoadInProgress.code());
    }
    Ok(partition)
}

fn cluster_action(broker: &Broker, ctx: &RequestContext) -> bool {
    ctx.authorized(
        broker,
        AclOperation::ClusterAction,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    )
}

pub(super) fn read(
    broker: &Broker,
    ctx: &RequestContext,
    request: ReadShareGroupStateRequest,
) -> impl Future<Output = ReadShareGroupStateResponse> + Send + 'static {
    let allowed = cluster_action(broker, ctx);
    let group = request.group_id.to_string();
    let reads: Vec<_> = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions: Vec<_> = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let key = key(&group, topic.topic_id, p.partition);
                    let read = if !allowed {
                        Err(ResponseError::ClusterAuthorizationFailed.code())
                    } else {
                        state_partition(broker, &key)
                            .map(|partition| broker.share_state().read(partition.index, &key))
                    };
                    (p.partition, read)
                })
                .collect();
            (topic.topic_id, partitions)
        })
        .collect();
    async move {
        let mut results = Vec::with_capacity(reads.len());
        for (topic_id, partitions) in reads {
            let mut answers = Vec::with_capacity(partitions.len());
            for (partition, read) in partitions {
                let answer = read::PartitionResult::default().with_partition(partition);
                let read = match read {
                    Ok(read) => read.await.map_err(|error| error.code()),
                    Err(code) => Err(code),
                };
                answers.push(match read {
                    Err(code) => answer.with_error_code(code),
                    // Kafka's answer for a share-partition without state.
                    Ok(None) => answer.with_state_epoch(-1).with_start_offset(-1),
                    Ok(Some((state_epoch, state))) => answer
                        .with_state_epoch(state_epoch)
                        .with_start_offset(state.start_offset)
                        .with_state_batches(
                            state
                                .batches
                                .iter()
                                .map(|b| {
                                    read::StateBatch::default()
                                        .with_first_offset(b.first_offset)
                                        .with_last_offset(b.last_offset)
                                        .with_delivery_state(b.state.id())
                                        .with_delivery_count(b.delivery_count as i16)
                                })
                                .collect(),
                        ),
                });
            }
            results.push(
                read::ReadStateResult::default()
                    .with_topic_id(topic_id)
                    .with_partitions(answers),
            );
        }
        ReadShareGroupStateResponse::default().with_results(results)
    }
}

/// Answers each partition once its write (if any) is replicated: its
/// error code, by topic in the order asked.
async fn settle(
    node_id: i32,
    writes: Vec<(Uuid, i32, Result<StateWritten, i16>)>,
) -> Vec<(Uuid, Vec<(i32, i16)>)> {
    let mut topics: Vec<(Uuid, Vec<(i32, i16)>)> = Vec::new();
    for (topic_id, partition, written) in writes {
        let code = match written {
            Ok(written) => match written.await {
                Ok(Applied {
                    write: Some(write), ..
                }) => match write.replicated(node_id, COORDINATOR_WRITE_TIMEOUT).await {
                    Ok(()) => 0,
                    Err(error) => error.code(),
                },
                Ok(Applied { write: None, .. }) => 0,
                Err(error) => error.code(),
            },
            Err(code) => code,
        };
        match topics.last_mut() {
            Some((last, codes)) if *last == topic_id => codes.push((partition, code)),
            _ => topics.push((topic_id, vec![(partition, code)])),
        }
    }
    topics
}

pub(super) fn write_state(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: WriteShareGroupStateRequest,
) -> impl Future<Output = WriteShareGroupStateResponse> + Send + 'static {
    let allowed = cluster_action(broker, ctx);
    let group = request.group_id.to_string();
    let mut writes = Vec::new();
    for topic in request.topics {
        for p in topic.partitions {
            let key = key(&group, topic.topic_id, p.partition);
            let written = if !allowed {
                Err(ResponseError::ClusterAuthorizationFailed.code())
            } else {
                let update = PersistedState {
                    start_offset: p.start_offset,
                    batches: p
                        .state_batches
                        .iter()
                        .filter_map(|b| {
                            Some(StateBatch {
                                first_offset: b.first_offset,
                                last_offset: b.last_offset,
                                state: RecordState::from_id(b.delivery_state)?,
                                delivery_count: b.delivery_count.max(0) as u16,
                            })
                        })
                        .collect(),
                };
                state_partition(broker, &key).map(|partition| {
                    broker.share_state().update(
                        partition.index,
                        &key,
                        update,
                        p.state_epoch,
                        p.leader_epoch,
                        broker.now_ms(),
                    )
                })
            };
            writes.push((topic.topic_id, p.partition, written));
        }
    }
    let node_id = broker.node_id();
    async move {
        let results = settle(node_id, writes)
            .await
            .into_iter()
            .map(|(topic_id, codes)| {
                let partitions = codes.into_iter().map(|(partition, code)| {
                    write::PartitionResult::default()
                        .with_partition(partition)
                        .with_error_code(code)
                });
                write::WriteStateResult::default()
                    .with_topic_id(topic_id)
                    .with_partitions(partitions.collect())
            });
        WriteShareGroupStateResponse::default().with_results(results.collect())
    }
}

pub(super) fn initialize(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: InitializeShareGroupStateRequest,
) -> impl Future<Output = InitializeShareGroupStateResponse> + Send + 'static {
    let allowed = cluster_action(broker, ctx);
    let group = request.group_id.to_string();
    let mut writes = Vec::new();
    for topic in request.topics {
        for p in topic.partitions {
            let key = key(&group, topic.topic_id, p.partition);
            let written = if !allowed {
                Err(ResponseError::ClusterAuthorizationFailed.code())
            } else {
                let state = PersistedState {
                    start_offset: p.start_offset,
                    batches: Vec::new(),
                };
                state_partition(broker, &key).map(|partition| {
                    broker.share_state().initialize(
                        partition.index,
                        &key,
                        state,
                        p.state_epoch,
                        -1,
                        broker.now_ms(),
                    )
                })
            };
            writes.push((topic.topic_id, p.partition, written));
        }
    }
    let node_id = broker.node_id();
    async move {
        let results = settle(node_id, writes)
            .await
            .into_iter()
            .map(|(topic_id, codes)| {
                let partitions = codes.into_iter().map(|(partition, code)| {
                    init::PartitionResult::default()
                        .with_partition(partition)
                        .with_error_code(code)
                });
                init::InitializeStateResult::default()
                    .with_topic_id(topic_id)
                    .with_partitions(partitions.collect())
            });
        InitializeShareGroupStateResponse::default().with_results(results.collect())
    }
}
