//! Where a share-partition leader reads and writes its state: the leader of
//! the share-partition's `__share_group_state` partition (Kafka's share
//! coordinator). When that is this broker, through its
//! [`ShareStateStore`](crate::share::state_coordinator::ShareStateStore); otherwise with
//! Kafka's InitializeShareGroupState, ReadShareGroupState and
//! WriteShareGroupState, which the other broker answers once the in-sync
//! replicas of its state partition hold the write.
//!
//! Every call is a future: a local read or write awaits its turn of the
//! state shard, a remote one the other broker's answer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{
    initialize_share_group_state_request as init, read_share_group_state_request as read,
    write_share_group_state_request as write, ApiKey, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use weir_client::{Client, ClientConfig};

use crate::partition::{Partition, ReplicatedWrite};
use crate::share::state_coordinator::{state_partition_for, StateWriteError, SHARE_STATE_TOPIC};
use crate::share::ShareHost;
use crate::share::{PersistedState, RecordState, StateBatch};
use weir_coord::records::share_state::SharePartitionKey;

/// Why state cannot be read or written, as Kafka's error code.
pub(crate) type ShareCode = i16;

/// Not an error a client sees: the state partition is being created or
/// loaded; ask again shortly.
pub(crate) const STATE_LOADING: ShareCode = -1;
const COORDINATOR_NOT_AVAILABLE: ShareCode = 15;

/// How long a call to another broker's share coordinator may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A share-partition's state as read: its state epoch (-1 if it never had
/// state) and the state, `None` if it has none (never had, or deleted).
pub(crate) struct StateRead {
    pub(crate) state_epoch: i32,
    pub(crate) state: Option<PersistedState>,
}

/// The broker holding a share-partition's state.
pub(crate) enum StateHome {
    Local(Arc<Partition>),
    Remote(String),
}

/// Connections to other brokers' share coordinators, one per address.
#[derive(Default)]
pub(crate) struct SharePersister {
    clients: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Client>>>>>,
}

impl SharePersister {
    /// Where `key`'s state lives.
    pub(crate) fn home(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
    ) -> Result<StateHome, ShareCode> {
        let located = host.environment().with_image(|image| {
            let topic = image.topic(SHARE_STATE_TOPIC)?;
            let index = state_partition_for(key, topic.partition_count());
            let leader = topic.partition(index).map_or(-1, |p| p.leader);
            let addr = image
                .broker(leader)
                .filter(|_| !image.is_fenced(leader))
                .map(|b| format!("{}:{}", b.host, b.port));
            Some((index, leader, addr))
        });
        let Some((index, leader, addr)) = located else {
            host.create_share_state_topic();
            return Err(STATE_LOADING);
        };
        if leader == host.node_id() {
            if !host.share_state().leads(index) {
                return Err(STATE_LOADING);
            }
            return host
                .leader_partition(SHARE_STATE_TOPIC, index)
                .map(StateHome::Local)
                .map_err(|_| STATE_LOADING);
        }
        addr.map(StateHome::Remote).ok_or(STATE_LOADING)
    }

    /// `key`'s state.
    pub(crate) async fn read(
        &self,
        host: &dyn ShareHost,
        home: &StateHome,
        key: &SharePartitionKey,
        leader_epoch: i32,
    ) -> Result<StateRead, ShareCode> {
        match home {
            StateHome::Local(partition) => {
                let read = host.share_state().read(partition.index, key).await;
                Ok(
                    match read.map_err(|error| local_error(key, "read", error))? {
                        None => StateRead {
                            state_epoch: -1,
                            state: None,
                        },
                        Some((state_epoch, state)) => StateRead {
                            state_epoch,
                            state: (state.start_offset >= 0).then_some(state),
                        },
                    },
                )
            }
            StateHome::Remote(addr) => {
                let request = ReadShareGroupStateRequest::default()
                    .with_group_id(StrBytes::from_string(key.group.clone()))
                    .with_topics(vec![read::ReadStateData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![read::PartitionData::default()
                            .with_partition(key.partition)
                            .with_leader_epoch(leader_epoch)])]);
                let response: ReadShareGroupStateResponse = self
                    .call(host, addr, ApiKey::ReadShareGroupState, &request)
                    .await?;
                let result = response
                    .results
                    .first()
                    .and_then(|t| t.partitions.first())
                    .ok_or(COORDINATOR_NOT_AVAILABLE)?;
                if result.error_code != 0 {
                    return Err(remote_error(result.error_code));
                }
                if result.start_offset < 0 {
                    return Ok(StateRead {
                        state_epoch: result.state_epoch,
                        state: None,
                    });
                }
                let batches = result
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
                    .collect();
                Ok(StateRead {
                    state_epoch: result.state_epoch,
                    state: Some(PersistedState {
                        start_offset: result.start_offset,
                        batches,
                    }),
                })
            }
        }
    }

    /// Writes `key`'s whole state anew at `state_epoch` (above the one
    /// read): its first state, a reset, or (start offset -1) a deletion.
    /// Returns the write to await (none when another broker wrote it: its
    /// answer says it is replicated).
    pub(crate) async fn initialize(
        &self,
        host: &dyn ShareHost,
        home: &StateHome,
        key: &SharePartitionKey,
        state: PersistedState,
        state_epoch: i32,
        leader_epoch: i32,
    ) -> Result<Option<ReplicatedWrite>, ShareCode> {
        match home {
            StateHome::Local(partition) => host
                .share_state()
                .initialize(
                    partition.index,
                    key,
                    state,
                    state_epoch,
                    leader_epoch,
                    host.now_ms(),
                )
                .await
                .map(|applied| applied.write)
                .map_err(|error| local_error(key, "initialize", error)),
            StateHome::Remote(addr) => {
                let request = InitializeShareGroupStateRequest::default()
                    .with_group_id(StrBytes::from_string(key.group.clone()))
                    .with_topics(vec![init::InitializeStateData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![init::PartitionData::default()
                            .with_partition(key.partition)
                            .with_state_epoch(state_epoch)
                            .with_start_offset(state.start_offset)])]);
                let response: InitializeShareGroupStateResponse = self
                    .call(host, addr, ApiKey::InitializeShareGroupState, &request)
                    .await?;
                written_remotely(
                    response
                        .results
                        .first()
                        .and_then(|t| t.partitions.first())
                        .map(|p| p.error_code),
                )
            }
        }
    }

    /// Writes what changed in `key`'s state, loaded at `state_epoch`.
    pub(crate) async fn update(
        &self,
        host: &dyn ShareHost,
        home: &StateHome,
        key: &SharePartitionKey,
        update: PersistedState,
        state_epoch: i32,
        leader_epoch: i32,
    ) -> Result<Option<ReplicatedWrite>, ShareCode> {
        match home {
            StateHome::Local(partition) => host
                .share_state()
                .update(
                    partition.index,
                    key,
                    update,
                    state_epoch,
                    leader_epoch,
                    host.now_ms(),
                )
                .await
                .map(|applied| applied.write)
                .map_err(|error| local_error(key, "write", error)),
            StateHome::Remote(addr) => {
                let request = WriteShareGroupStateRequest::default()
                    .with_group_id(StrBytes::from_string(key.group.clone()))
                    .with_topics(vec![write::WriteStateData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![write::PartitionData::default()
                            .with_partition(key.partition)
                            .with_state_epoch(state_epoch)
                            .with_leader_epoch(leader_epoch)
                            .with_start_offset(update.start_offset)
                            .with_state_batches(
                                update
                                    .batches
                                    .iter()
                                    .map(|b| {
                                        write::StateBatch::default()
                                            .with_first_offset(b.first_offset)
                                            .with_last_offset(b.last_offset)
                                            .with_delivery_state(b.state.id())
                                            .with_delivery_count(b.delivery_count as i16)
                                    })
                                    .collect(),
                            )])]);
                let response: WriteShareGroupStateResponse = self
                    .call(host, addr, ApiKey::WriteShareGroupState, &request)
                    .await?;
                written_remotely(
                    response
                        .results
                        .first()
                        .and_then(|t| t.partitions.first())
                        .map(|p| p.error_code),
                )
            }
        }
    }

    /// One call to the share coordinator at `addr`.
    async fn call<Q, R>(
        &self,
        host: &dyn ShareHost,
        addr: &str,
        key: ApiKey,
        request: &Q,
    ) -> Result<R, ShareCode>
    where
        Q: kafka_protocol::protocol::Encodable + Sync,
        R: kafka_protocol::protocol::Decodable,
    {
        self.with_client(host, addr, async |client| client.call(key, request).await)
            .await
            .map_err(|error| {
                tracing::debug!(addr, %error, "a share coordinator call failed");
                COORDINATOR_NOT_AVAILABLE
            })
    }

    /// Runs `call` on the connection to the broker at `addr` (made if
    /// needed, and dropped when the call fails), one call at a time.
    pub(crate) async fn with_client<T>(
        &self,
        host: &dyn ShareHost,
        addr: &str,
        call: impl AsyncFnOnce(&mut Client) -> Result<T, weir_client::ClientError>,
    ) -> Result<T, weir_client::ClientError> {
        let slot = self
            .clients
            .lock()
            .entry(addr.to_owned())
            .or_default()
            .clone();
        let security = host.inter_broker_security().clone();
        let mut client = slot.lock().await;
        if client.is_none() {
            let config = ClientConfig {
                client_id: "weir-share-partition-leader".to_owned(),
                connect_timeout: Duration::from_secs(5),
                request_timeout: CALL_TIMEOUT,
            };
            *client = Some(Client::connect_with_security(addr, config, security).await?);
        }
        let answer = call(client.as_mut().expect("connected")).await;
        if answer.is_err() {
            *client = None;
        }
        answer
    }
}

/// A refused local state write as the share-partition leader's error.
fn local_error(key: &SharePartitionKey, what: &str, error: StateWriteError) -> ShareCode {
    match error {
        StateWriteError::Coordinator(_) => {
            tracing::warn!(group = key.group, %error, "cannot {what} share-partition state");
        }
        _ => tracing::debug!(group = key.group, %error, "share-partition state {what} fenced"),
    }
    error.code()
}

/// The outcome of a write another broker answered (its partition's error
/// code, if it answered one): replicated there, so nothing to await.
fn written_remotely(code: Option<i16>) -> Result<Option<ReplicatedWrite>, ShareCode> {
    match code {
        Some(0) => Ok(None),
        Some(code) => Err(remote_error(code)),
        None => Err(COORDINATOR_NOT_AVAILABLE),
    }
}

/// A remote share coordinator's error as this leader's: one that moved or
/// is loading is asked again later.
fn remote_error(code: i16) -> ShareCode {
    match code {
        14 | 16 => STATE_LOADING, // COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR
        code => code,
    }
}
