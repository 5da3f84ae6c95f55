//! The transaction coordinator: the I/O side of `weir_coord::txn`.
//!
//! A transactional id lives on partition `hash(id) % N` of
//! `__transaction_state`; the leader of that partition coordinates it.
//! Every state change is written there, and replicated to the in-sync
//! replicas, before the client hears of it; a new leader rebuilds the
//! states from the log and finishes the transactions left half-ended.
//!
//! Each partition led here is a shard of the coordinator runtime, holding
//! its transactional ids. Requests for one id are taken one at a time, in
//! turn on its shard: while a state is being written (its record not yet
//! below the high watermark), others get CONCURRENT_TRANSACTIONS. Ending a
//! transaction writes PrepareCommit/PrepareAbort, answers the producer, then
//! writes the markers to every partition of the transaction
//! (WriteTxnMarkers to each leader) and finally CompleteCommit/CompleteAbort.
//!
//! A request delayed in the network must never act on a later transaction
//! of the same producer (clients without KIP-890 cannot tell one
//! transaction's EndTxn from the next's). Clients send transactional
//! requests over one connection to the coordinator and open a new one after
//! any failure, so a request arriving over a connection older than one the
//! producer has already used since its InitProducerId is such a zombie: it
//! is refused.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_client::{Client, ClientConfig, SecurityConfig};
use weir_log::LogError;

use crate::coordinator::batches::{self, Item};
use crate::coordinator::{
    CoordinatorError, CoordinatorRuntime, Environment, Outcome, Shard, ShardContext,
};
use crate::partition::Partition;
use weir_coord::records;
use weir_coord::txn::{self, TxnError, TxnMetadata, TxnStatus};

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// How long a write to `__transaction_state` may wait for the replicas.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Between two rounds of markers for partitions whose leaders failed.
const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Why a transaction coordinator request fails.
#[derive(Debug, thiserror::Error)]
pub enum TxnRequestError {
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    #[error(transparent)]
    Txn(#[from] TxnError),
}

impl TxnRequestError {
    /// Kafka's error; clients before KIP-588 (`fenced_known` false) know a
    /// fenced producer only as INVALID_PRODUCER_EPOCH.
    pub fn response_error(&self, fenced_known: bool) -> ResponseError {
        match self {
            Self::Coordinator(error) => error.response_error(),
            Self::Txn(error) => match error {
                TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
                TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
                TxnError::ProducerFenced if fenced_known => ResponseError::ProducerFenced,
                TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch,
                TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
                TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
            },
        }
    }
}

/// One transactional id as the coordinator holds it.
#[derive(Debug)]
struct Entry {
    meta: TxnMetadata,
    /// The offset just past its latest state record: until the high
    /// watermark passes it, the state is being written and other requests
    /// wait their turn.
    written_until: u64,
    /// The markers of a Prepare state are being written.
    completing: bool,
    /// The newest connection the producer has sent requests over since
    /// its epoch began; older connections carry only zombies.
    newest_connection: u64,
}

impl Entry {
    fn writing(&self, high_watermark: u64) -> bool {
        self.written_until > high_watermark
    }
}

/// The transactional ids of one `__transaction_state` partition: the
/// shard the coordinator runtime hosts for it.
#[derive(Debug, Default)]
pub struct TxnShard {
    txns: HashMap<String, Entry>,
}

impl Shard for TxnShard {
    fn replay(&mut self, item: Item) {
        let Item::Record { key, value, at, .. } = item else {
            return;
        };
        let id = match records::txn::decode_key(&key) {
            Ok(id) => id,
            Err(error) => {
                tracing::warn!(%error, "skipping an unreadable transaction record");
                return;
            }
        };
        let meta = value.and_then(|v| match records::txn::decode_value(&id, &v) {
            Ok(meta) => Some(meta),
            Err(error) => {
                tracing::warn!(id, %error, "skipping an unreadable transaction state");
                None
            }
        });
        match meta {
            Some(meta) => {
                let entry = self.txns.entry(id).or_insert_with(|| Entry {
                    meta: meta.clone(),
                    written_until: 0,
                    completing: false,
                    newest_connection: 0,
                });
                entry.meta = meta;
                entry.written_until = at + 1;
            }
            None => {
                self.txns.remove(&id);
            }
        }
    }

    fn size(&self) -> usize {
        self.txns.len()
    }
}

/// A transaction as DescribeTransactions and ListTransactions show it.
#[derive(Debug, Clone)]
pub struct TxnView {
    pub meta: TxnMetadata,
    pub coordinator_partition: i32,
}

pub struct TxnCoordinator {
    env: Environment,
    /// How this node connects to other brokers (markers, AddPartitionsToTxn).
    inter_broker_security: SecurityConfig,
    /// The `__transaction_state` partitions led here, one shard each.
    runtime: CoordinatorRuntime<TxnShard>,
    /// Connections to the coordinators of other brokers, for the leaders
    /// of partitions here.
    connections: super::add_from_leader::CoordinatorConnections,
}

/// Where a request must go: the partition of `__transaction_state`.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    weir_coord::records::offsets::partition_for(transactional_id, partitions)
}

/// The record of `transactional_id`'s state (`None`: its tombstone).
fn state_entry(
    transactional_id: &str,
    meta: Option<&TxnMetadata>,
    flexible: bool,
) -> batches::Entry {
    batches::Entry {
        key: records::txn::encode_key(transactional_id),
        value: meta.map(|meta| records::txn::encode_value(meta, flexible)),
    }
}

/// Whether values are written in v1: from transaction.version 1 on, as
/// Kafka does.
fn flexible_values(env: &Environment) -> bool {
    env.with_image(|image| {
        crate::config::features::level_of(crate::config::features::TRANSACTION_VERSION, image) >= 1
    })
}

impl TxnCoordinator {
    pub fn new(env: Environment, inter_broker_security: SecurityConfig) -> Self {
        Self {
            runtime: CoordinatorRuntime::new(TRANSACTION_STATE_TOPIC, env.node_id())
                .with_write_timeout(WRITE_TIMEOUT),
            connections: Default::default(),
            env,
            inter_broker_security,
        }
    }

    pub(super) fn environment(&self) -> &Environment {
        &self.env
    }

    pub(super) fn inter_broker_security(&self) -> &SecurityConfig {
        &self.inter_broker_security
    }

    /// This node leads `partition` of `__transaction_state`: its
    /// transactions are read from the log. Transactions left in a Prepare
    /// state are finished by the next [`upkeep`](Self::upkeep).
    pub fn take_over(&self, partition: Arc<Partition>) -> Result<usize, LogError> {
        self.runtime.load(partition)
    }

    pub(super) fn connections(&self) -> &super::add_from_leader::CoordinatorConnections {
        &self.connections
    }

    /// Another node leads `partition` now.
    pub fn hand_over(&self, partition: i32) {
        self.runtime.unload(partition);
    }

    /// Checks that this node coordinates `transactional_id`; returns its
    /// partition of `__transaction_state`.
    fn coordinated_partition(&self, transactional_id: &str) -> Result<i32, CoordinatorError> {
        let count = self
            .env
            .with_image(|image| {
                image
                    .topic(TRANSACTION_STATE_TOPIC)
                    .map(|t| t.partition_count())
            })
            .ok_or(CoordinatorError::NotCoordinator)?;
        let index = partition_for(transactional_id, count);
        if self.runtime.hosts(index) {
            return Ok(index);
        }
        let leader = self.env.with_image(|image| {
            image
                .topic(TRANSACTION_STATE_TOPIC)
                .and_then(|t| t.partition(index))
                .map(|p| p.leader)
        });
        if leader == Some(self.env.node_id()) {
            // Led here, but not loaded yet.
            Err(CoordinatorError::LoadInProgress)
        } else {
            Err(CoordinatorError::NotCoordinator)
        }
    }

    /// Takes a request for `transactional_id` in turn: checks that this
    /// node coordinates it and that no state of it is being written, then
    /// runs `decide` over its state. A request of the current producer
    /// (`connection` set: all but InitProducerId, which starts a producer)
    /// is refused if it comes over a connection older than one that
    /// producer moved on from. When `decide` returns a state, it is written
    /// and the answer waits for the in-sync replicas; meanwhile other
    /// requests for the id get CONCURRENT_TRANSACTIONS.
    ///
    /// The turn is taken when this is called, so call it from the handler
    /// itself: requests keep the order their connection sent them in.
    pub fn coordinate<T: Send + 'static>(
        &self,
        transactional_id: &str,
        connection: Option<u64>,
        decide: impl FnOnce(Option<&TxnMetadata>) -> Result<(T, Option<TxnMetadata>), TxnError>
            + Send
            + 'static,
    ) -> impl Future<Output = Result<T, TxnRequestError>> + Send + 'static {
        let partition = self.coordinated_partition(transactional_id);
        let flexible = flexible_values(&self.env);
        let id = transactional_id.to_owned();
        let written = partition.map(|index| {
            self.runtime.write(
                index,
                self.env.now_ms(),
                move |shard: &mut TxnShard, context| {
                    take_turn(shard, context, &id, connection, flexible, decide)
                },
            )
        });
        async move { written?.await }
    }

    /// Writes the markers of a Prepare state, then its Complete state.
    /// Stops (for the next coordinator to finish) if this node no longer
    /// coordinates the id.
    pub async fn complete(self: &Arc<Self>, transactional_id: &str) {
        let Ok(index) = self.coordinated_partition(transactional_id) else {
            return;
        };
        let id = transactional_id.to_owned();
        let started = self.runtime.write(
            index,
            self.env.now_ms(),
            move |shard: &mut TxnShard, context| {
                let high_watermark = context.partition.high_watermark();
                let Some(entry) = shard.txns.get_mut(&id) else {
                    return Ok::<_, TxnRequestError>(Outcome::answer(None));
                };
                if entry.completing
                    || entry.writing(high_watermark)
                    || !entry.meta.status.is_preparing()
                {
                    return Ok(Outcome::answer(None));
                }
                entry.completing = true;
                Ok(Outcome::answer(Some((
                    entry.meta.clone(),
                    context.leader_epoch,
                ))))
            },
        );
        let Ok(Some((meta, coordinator_epoch))) = started.await else {
            return;
        };
        let commit = meta.status == TxnStatus::PrepareCommit;
        let mut remaining = meta.partitions.clone();
        while !remaining.is_empty() {
            if !self.runtime.hosts(index) {
                return;
            }
            remaining = write_markers(
                &self.env,
                &self.inter_broker_security,
                &meta,
                commit,
                coordinator_epoch,
                remaining,
            )
            .await;
            if !remaining.is_empty() {
                tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
            }
        }
        let next = txn::complete(&meta, self.env.now_ms());
        let flexible = flexible_values(&self.env);
        let id = transactional_id.to_owned();
        let ended = self
            .runtime
            .write(index, self.env.now_ms(), move |shard: &mut TxnShard, _| {
                let Some(entry) = shard.txns.get_mut(&id) else {
                    return Ok::<_, TxnRequestError>(Outcome::answer(()));
                };
                entry.completing = false;
                if entry.meta != meta {
                    return Ok(Outcome::answer(()));
                }
                Ok(Outcome::write(
                    vec![state_entry(&id, Some(&next), flexible)],
                    (),
                ))
            });
        if let Err(error) = ended.await {
            tracing::warn!(transactional_id, %error, "cannot write the end of a transaction; retrying later");
        }
    }

    /// Finishes transactions left in a Prepare state, aborts those past
    /// their timeout, and forgets ids idle for `expiration_ms`: one write
    /// per `__transaction_state` partition led here.
    pub async fn upkeep(self: &Arc<Self>, expiration_ms: i64) {
        let flexible = flexible_values(&self.env);
        let now = self.env.now_ms();
        let mut to_complete = Vec::new();
        for index in self.runtime.hosted() {
            let swept = self
                .runtime
                .write(index, now, move |shard: &mut TxnShard, context| {
                    let high_watermark = context.partition.high_watermark();
                    let mut preparing = Vec::new();
                    let mut records = Vec::new();
                    for (id, entry) in &shard.txns {
                        if entry.writing(high_watermark) || entry.completing {
                            continue;
                        }
                        if entry.meta.status.is_preparing() {
                            preparing.push(id.clone());
                        } else if let Some(next) = txn::timed_out(&entry.meta, now) {
                            tracing::info!(
                                transactional_id = id,
                                "aborting a transaction past its timeout"
                            );
                            records.push(state_entry(id, Some(&next), flexible));
                            preparing.push(id.clone());
                        } else if txn::expired(&entry.meta, now, expiration_ms) {
                            tracing::info!(transactional_id = id, "transactional id expired");
                            records.push(state_entry(id, None, flexible));
                        }
                    }
                    Ok::<_, TxnRequestError>(Outcome::write(records, preparing))
                });
            match swept.await {
                Ok(preparing) => to_complete.extend(preparing),
                Err(error) => tracing::warn!(
                    partition = index,
                    %error,
                    "cannot time out or expire transactions"
                ),
            }
        }
        for id in to_complete {
            let coordinator = self.clone();
            tokio::spawn(async move { coordinator.complete(&id).await });
        }
    }

    /// AddPartitionsToTxn from the leaders of `partitions` (v4 and up, or
    /// a call from this node): with `verify_only`, checks that the open
    /// transaction holds them (KIP-890 part 1); otherwise adds them for
    /// the producer, which runs transactions v2 (Produce v12,
    /// TxnOffsetCommit v5).
    pub fn add_for_leader(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: Vec<(String, i32)>,
        verify_only: bool,
    ) -> impl Future<Output = Result<(), TxnRequestError>> + Send + 'static {
        let now = self.env.now_ms();
        self.coordinate(transactional_id, None, move |current| {
            let current = current.ok_or(TxnError::InvalidProducerIdMapping)?;
            if verify_only {
                txn::verify_partitions(current, producer.0, producer.1, &partitions)?;
                return Ok(((), None));
            }
            let next = txn::add_partitions(
                current,
                producer.0,
                producer.1,
                &partitions,
                txn::TRANSACTIONS_V2,
                now,
            )?;
            Ok(((), next))
        })
    }

    /// How many transactions coordinated here are open (not idle), and
    /// the start of the oldest.
    pub async fn open_transactions(&self) -> (usize, Option<i64>) {
        let mut count = 0;
        let mut oldest: Option<i64> = None;
        for view in self.list().await {
            if view.meta.status.is_idle() {
                continue;
            }
            count += 1;
            if view.meta.start_ms >= 0 {
                oldest = Some(oldest.map_or(view.meta.start_ms, |o| o.min(view.meta.start_ms)));
            }
        }
        (count, oldest)
    }

    /// The transactions coordinated here, by id.
    pub async fn list(&self) -> Vec<TxnView> {
        let mut views = Vec::new();
        for index in self.runtime.hosted() {
            let read = self.runtime.read(index, move |shard: &TxnShard| {
                Ok::<_, CoordinatorError>(
                    shard
                        .txns
                        .values()
                        .filter(|e| e.meta.status != TxnStatus::Dead)
                        .map(|entry| TxnView {
                            meta: entry.meta.clone(),
                            coordinator_partition: index,
                        })
                        .collect::<Vec<_>>(),
                )
            });
            // A partition handed over meanwhile lists nothing here.
            views.extend(read.await.unwrap_or_default());
        }
        views.sort_by(|a, b| a.meta.transactional_id.cmp(&b.meta.transactional_id));
        views
    }

    /// One transactional id coordinated here.
    pub fn describe(
        &self,
        transactional_id: &str,
    ) -> impl Future<Output = Result<Option<TxnMetadata>, TxnRequestError>> + Send + 'static {
        let id = transactional_id.to_owned();
        let read = self.coordinated_partition(transactional_id).map(|index| {
            self.runtime.read(index, move |shard: &TxnShard| {
                Ok::<_, TxnRequestError>(
                    shard
                        .txns
                        .get(&id)
                        .map(|e| e.meta.clone())
                        .filter(|m| m.status != TxnStatus::Dead),
                )
            })
        });
        async move { read?.await }
    }
}

/// A request's turn on its transactional id, in its shard: see
/// [`TxnCoordinator::coordinate`].
fn take_turn<T>(
    shard: &mut TxnShard,
    context: &ShardContext<'_>,
    transactional_id: &str,
    connection: Option<u64>,
    flexible: bool,
    decide: impl FnOnce(Option<&TxnMetadata>) -> Result<(T, Option<TxnMetadata>), TxnError>,
) -> Result<Outcome<T>, TxnRequestError> {
    let high_watermark = context.partition.high_watermark();
    let entry = shard.txns.get_mut(transactional_id);
    if entry.as_ref().is_some_and(|e| e.writing(high_watermark)) {
        return Err(TxnError::ConcurrentTransactions.into());
    }
    // A fenced or unknown producer hears so first.
    let (answer, next) = decide(entry.as_ref().map(|e| &e.meta))?;
    // A new id has no entry until its first state is replayed.
    if let Some(entry) = entry {
        if let Some(connection) = connection {
            if connection < entry.newest_connection {
                tracing::info!(
                    transactional_id,
                    connection,
                    newest = entry.newest_connection,
                    "refusing a request delayed on an old connection"
                );
                return Err(TxnError::InvalidTxnState.into());
            }
        }
        // A new producer epoch starts counting connections afresh.
        if next.as_ref().is_some_and(|next| {
            (next.producer_id, next.producer_epoch)
                != (entry.meta.producer_id, entry.meta.producer_epoch)
        }) {
            entry.newest_connection = 0;
        }
        entry.newest_connection = entry.newest_connection.max(connection.unwrap_or(0));
    }
    Ok(match next {
        Some(next) => Outcome::write(
            vec![state_entry(transactional_id, Some(&next), flexible)],
            answer,
        ),
        None => Outcome::answer(answer),
    })
}

/// Sends the transaction's markers to the leaders of `partitions`; returns
/// those still to be written (leader unknown or unreachable, or an error
/// worth retrying). Partitions of deleted topics need no marker.
async fn write_markers(
    env: &Environment,
    security: &SecurityConfig,
    meta: &TxnMetadata,
    commit: bool,
    coordinator_epoch: i32,
    partitions: BTreeSet<(String, i32)>,
) -> BTreeSet<(String, i32)> {
    let mut by_leader: BTreeMap<String, BTreeSet<(String, i32)>> = BTreeMap::new();
    let mut remaining = BTreeSet::new();
    env.with_image(|image| {
        for (topic, index) in partitions {
            let Some(info) = image.topic(&topic) else {
                continue; // deleted: nothing to mark
            };
            let leader = info
                .partition(index)
                .map(|p| p.leader)
                .and_then(|id| image.broker(id).filter(|_| !image.is_fenced(id)));
            match leader {
                Some(leader) => {
                    let addr = format!("{}:{}", leader.host, leader.port);
                    by_leader.entry(addr).or_default().insert((topic, index));
                }
                None => {
                    remaining.insert((topic, index));
                }
            }
        }
    });
    for (addr, partitions) in by_leader {
        match send_markers(
            &addr,
            security.clone(),
            meta,
            commit,
            coordinator_epoch,
            &partitions,
        )
        .await
        {
            Ok(failed) => remaining.extend(failed),
            Err(error) => {
                tracing::debug!(addr, %error, "cannot send transaction markers");
                remaining.extend(partitions);
            }
        }
    }
    remaining
}

/// One WriteTxnMarkers request; returns the partitions that failed.
async fn send_markers(
    addr: &str,
    security: weir_client::SecurityConfig,
    meta: &TxnMetadata,
    commit: bool,
    coordinator_epoch: i32,
    partitions: &BTreeSet<(String, i32)>,
) -> Result<Vec<(String, i32)>, weir_client::ClientError> {
    let config = ClientConfig {
        client_id: "weir-txn-coordinator".to_owned(),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(30),
    };
    let mut client = Client::connect_with_security(addr, config, security).await?;
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (topic, index) in partitions {
        match topics.last_mut() {
            Some(last) if last.name.0.as_str() == topic => last.partition_indexes.push(*index),
            _ => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![*index]),
            ),
        }
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(meta.producer_id))
            .with_producer_epoch(meta.producer_epoch)
            .with_transaction_result(commit)
            .with_topics(topics)
            .with_coordinator_epoch(coordinator_epoch)]);
    let response: WriteTxnMarkersResponse = client.call(ApiKey::WriteTxnMarkers, &request).await?;
    let mut failed = Vec::new();
    for marker in response.markers {
        for topic in marker.topics {
            for partition in topic.partitions {
                // Every error is retried: a leader may not know of the
                // partition yet, and a deleted topic is dropped from the
                // next round.
                let code = partition.error_code;
                if code == 0 {
                    continue;
                }
                tracing::debug!(
                    topic = %topic.name.0,
                    partition = partition.partition_index,
                    code,
                    "a transaction marker failed; retrying"
                );
                failed.push((topic.name.0.to_string(), partition.partition_index));
            }
        }
    }
    Ok(failed)
}
