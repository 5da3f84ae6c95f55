//! The transaction coordinator: the I/O side of `weir_coord::txn`.
//!
//! A transactional id lives on partition `hash(id) % N` of
//! `__transaction_state`; the leader of that partition coordinates it.
//! Every state change is written there, and replicated to the in-sync
//! replicas, before the client hears of it; a new leader rebuilds the
//! states from the log and finishes the transactions left half-ended.
//!
//! Requests for one transactional id are taken one at a time: while a
//! state is being written, others get CONCURRENT_TRANSACTIONS. Ending a
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
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use weir_client::{Client, ClientConfig};
use weir_log::batch::BatchHeader;
use weir_log::LogError;

use crate::broker::Broker;
use crate::partition::Partition;
use weir_coord::records;
use weir_coord::txn::{self, TxnError, TxnMetadata, TxnStatus};

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// How long a write to `__transaction_state` may wait for the replicas.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Between two rounds of markers for partitions whose leaders failed.
const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Why a coordinator request fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorError {
    #[error("this broker does not coordinate the transactional id")]
    NotCoordinator,
    #[error("the transaction states are still being loaded")]
    LoadInProgress,
    #[error("the coordinator cannot reach its log: {0}")]
    NotAvailable(String),
    #[error(transparent)]
    Txn(#[from] TxnError),
}

impl CoordinatorError {
    /// Kafka's error; clients before KIP-588 (`fenced_known` false) know a
    /// fenced producer only as INVALID_PRODUCER_EPOCH.
    pub fn response_error(&self, fenced_known: bool) -> ResponseError {
        match self {
            CoordinatorError::NotCoordinator => ResponseError::NotCoordinator,
            CoordinatorError::LoadInProgress => ResponseError::CoordinatorLoadInProgress,
            CoordinatorError::NotAvailable(_) => ResponseError::CoordinatorNotAvailable,
            CoordinatorError::Txn(error) => match error {
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
    /// The partition of `__transaction_state` holding it.
    partition: i32,
    /// A state is being written: other requests wait their turn.
    writing: bool,
    /// The markers of a Prepare state are being written.
    completing: bool,
    /// The newest connection the producer has sent requests over since
    /// its epoch began; older connections carry only zombies.
    newest_connection: u64,
}

/// A transaction as DescribeTransactions and ListTransactions show it.
#[derive(Debug, Clone)]
pub struct TxnView {
    pub meta: TxnMetadata,
    pub coordinator_partition: i32,
}

#[derive(Default)]
pub struct TxnCoordinator {
    /// `__transaction_state` partitions led here, with the leader epoch
    /// they were loaded at (the coordinator epoch written in markers).
    loaded: Mutex<BTreeMap<i32, i32>>,
    txns: Mutex<HashMap<String, Entry>>,
    /// Connections to the coordinators of other brokers, for the leaders
    /// of partitions here.
    connections: super::add_from_leader::CoordinatorConnections,
}

/// Where a request must go: the partition of `__transaction_state`.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    weir_coord::records::offsets::partition_for(transactional_id, partitions)
}

impl TxnCoordinator {
    /// This node leads `partition` of `__transaction_state` at `leader_epoch`:
    /// its transactions are read from the log. Transactions left in a
    /// Prepare state are finished by the next [`upkeep`](Self::upkeep).
    pub fn take_over(&self, partition: &Partition, leader_epoch: i32) -> Result<usize, LogError> {
        let mut states: HashMap<String, Option<TxnMetadata>> = HashMap::new();
        crate::coordinator::batches::for_each_record(partition, |key, value| {
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
            states.insert(id, meta);
        })?;
        let index = partition.index;
        let mut txns = self.txns.lock();
        txns.retain(|_, entry| entry.partition != index);
        let mut count = 0;
        for (id, meta) in states {
            if let Some(meta) = meta {
                count += 1;
                txns.insert(
                    id,
                    Entry {
                        meta,
                        partition: index,
                        writing: false,
                        completing: false,
                        newest_connection: 0,
                    },
                );
            }
        }
        self.loaded.lock().insert(index, leader_epoch);
        Ok(count)
    }

    pub(super) fn connections(&self) -> &super::add_from_leader::CoordinatorConnections {
        &self.connections
    }

    /// Another node leads `partition` now.
    pub fn hand_over(&self, partition: i32) {
        self.loaded.lock().remove(&partition);
        self.txns
            .lock()
            .retain(|_, entry| entry.partition != partition);
    }

    /// Checks that this node coordinates `transactional_id`; returns its
    /// partition of `__transaction_state`.
    fn coordinated_partition(
        &self,
        broker: &Broker,
        transactional_id: &str,
    ) -> Result<i32, CoordinatorError> {
        let count = broker
            .with_image(|image| {
                image
                    .topic(TRANSACTION_STATE_TOPIC)
                    .map(|t| t.partition_count())
            })
            .ok_or(CoordinatorError::NotCoordinator)?;
        let index = partition_for(transactional_id, count);
        if self.loaded.lock().contains_key(&index) {
            return Ok(index);
        }
        match broker.leader_partition(TRANSACTION_STATE_TOPIC, index) {
            // Led here, but not loaded yet.
            Ok(_) => Err(CoordinatorError::LoadInProgress),
            Err(_) => Err(CoordinatorError::NotCoordinator),
        }
    }

    /// Takes a request for `transactional_id` in turn: checks that this node
    /// coordinates it and that no other request for it is being written,
    /// then runs `decide` over its state. A request of the current producer
    /// (`connection` set: all but InitProducerId, which starts a producer)
    /// is refused if it comes over a connection older than one that
    /// producer moved on from. When `decide` returns a state to write, the
    /// id is held until [`write`](Self::write) is done with it.
    pub fn begin<T>(
        &self,
        broker: &Broker,
        transactional_id: &str,
        connection: Option<u64>,
        decide: impl FnOnce(Option<&TxnMetadata>) -> Result<(T, Option<TxnMetadata>), TxnError>,
    ) -> Result<(T, Option<Pending>), CoordinatorError> {
        let partition = self.coordinated_partition(broker, transactional_id)?;
        let mut txns = self.txns.lock();
        let entry = txns.get(transactional_id);
        if entry.is_some_and(|e| e.writing) {
            return Err(TxnError::ConcurrentTransactions.into());
        }
        // A fenced or unknown producer hears so first.
        let (answer, next) = decide(entry.map(|e| &e.meta))?;
        if let (Some(entry), Some(connection)) = (entry, connection) {
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
        let epoch_before = entry.map(|e| (e.meta.producer_id, e.meta.producer_epoch));
        let entry = txns
            .entry(transactional_id.to_owned())
            .or_insert_with(|| Entry {
                meta: TxnMetadata {
                    producer_epoch: -1,
                    status: TxnStatus::Dead,
                    ..TxnMetadata::new(transactional_id, -1, 0, 0)
                },
                partition,
                writing: false,
                completing: false,
                newest_connection: 0,
            });
        let connection = connection.unwrap_or(0);
        let Some(next) = next else {
            entry.newest_connection = entry.newest_connection.max(connection);
            return Ok((answer, None));
        };
        // A new producer epoch starts counting connections afresh.
        if epoch_before != Some((next.producer_id, next.producer_epoch)) {
            entry.newest_connection = 0;
        }
        entry.newest_connection = entry.newest_connection.max(connection);
        entry.writing = true;
        Ok((answer, Some(Pending { partition, next })))
    }

    /// Writes a state taken by [`begin`](Self::begin) to the log and waits
    /// for the in-sync replicas; then it is the id's state.
    pub async fn write(&self, broker: &Broker, pending: Pending) -> Result<(), CoordinatorError> {
        let id = pending.next.transactional_id.clone();
        let outcome = append_state(broker, pending.partition, &id, Some(&pending.next)).await;
        let mut txns = self.txns.lock();
        match txns.get_mut(&id) {
            Some(entry) => {
                entry.writing = false;
                match &outcome {
                    Ok(()) => entry.meta = pending.next,
                    // Never written: a placeholder for a new id goes away.
                    Err(_) if entry.meta.status == TxnStatus::Dead => {
                        txns.remove(&id);
                    }
                    Err(_) => {}
                }
            }
            None => tracing::debug!(id, "coordination moved away during a write"),
        }
        outcome
    }

    /// Writes the markers of a Prepare state, then its Complete state.
    /// Stops (for the next coordinator to finish) if this node no longer
    /// coordinates the id.
    pub async fn complete(self: &Arc<Self>, broker: &Arc<Broker>, transactional_id: &str) {
        let Some((meta, partition, coordinator_epoch)) = self.start_completing(transactional_id)
        else {
            return;
        };
        let commit = meta.status == TxnStatus::PrepareCommit;
        let mut remaining = meta.partitions.clone();
        while !remaining.is_empty() {
            if !self.loaded.lock().contains_key(&partition) {
                self.stop_completing(transactional_id);
                return;
            }
            remaining = write_markers(broker, &meta, commit, coordinator_epoch, remaining).await;
            if !remaining.is_empty() {
                tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
            }
        }
        let next = txn::complete(&meta, broker.now_ms());
        let write = {
            let mut txns = self.txns.lock();
            match txns.get_mut(transactional_id) {
                Some(entry) if entry.meta == meta => {
                    entry.writing = true;
                    Some(Pending { partition, next })
                }
                _ => None,
            }
        };
        if let Some(pending) = write {
            if let Err(error) = self.write(broker, pending).await {
                tracing::warn!(transactional_id, %error, "cannot write the end of a transaction; retrying later");
            }
        }
        self.stop_completing(transactional_id);
    }

    fn start_completing(&self, transactional_id: &str) -> Option<(TxnMetadata, i32, i32)> {
        let mut txns = self.txns.lock();
        let entry = txns.get_mut(transactional_id)?;
        if entry.completing || entry.writing || !entry.meta.status.is_preparing() {
            return None;
        }
        let coordinator_epoch = *self.loaded.lock().get(&entry.partition)?;
        entry.completing = true;
        Some((entry.meta.clone(), entry.partition, coordinator_epoch))
    }

    fn stop_completing(&self, transactional_id: &str) {
        if let Some(entry) = self.txns.lock().get_mut(transactional_id) {
            entry.completing = false;
        }
    }

    /// Finishes transactions left in a Prepare state, aborts those past
    /// their timeout, and forgets ids idle for `expiration_ms`.
    pub async fn upkeep(self: &Arc<Self>, broker: &Arc<Broker>, expiration_ms: i64) {
        let now = broker.now_ms();
        let mut timed_out = Vec::new();
        let mut to_complete = Vec::new();
        let mut to_expire = Vec::new();
        {
            let mut txns = self.txns.lock();
            for (id, entry) in txns.iter_mut() {
                if entry.writing || entry.completing {
                    continue;
                }
                if entry.meta.status.is_preparing() {
                    to_complete.push(id.clone());
                } else if let Some(next) = txn::timed_out(&entry.meta, now) {
                    entry.writing = true;
                    timed_out.push(Pending {
                        partition: entry.partition,
                        next,
                    });
                } else if txn::expired(&entry.meta, now, expiration_ms) {
                    entry.writing = true;
                    to_expire.push((id.clone(), entry.partition));
                }
            }
        }
        for pending in timed_out {
            let id = pending.next.transactional_id.clone();
            tracing::info!(
                transactional_id = id,
                "aborting a transaction past its timeout"
            );
            match self.write(broker, pending).await {
                Ok(()) => to_complete.push(id),
                Err(error) => {
                    tracing::warn!(transactional_id = id, %error, "cannot abort a timed-out transaction")
                }
            }
        }
        for id in to_complete {
            let coordinator = self.clone();
            let broker = broker.clone();
            tokio::spawn(async move { coordinator.complete(&broker, &id).await });
        }
        for (id, partition) in to_expire {
            let outcome = append_state(broker, partition, &id, None).await;
            let mut txns = self.txns.lock();
            match outcome {
                Ok(()) => {
                    tracing::info!(transactional_id = id, "transactional id expired");
                    txns.remove(&id);
                }
                Err(error) => {
                    tracing::warn!(transactional_id = id, %error, "cannot expire a transactional id");
                    if let Some(entry) = txns.get_mut(&id) {
                        entry.writing = false;
                    }
                }
            }
        }
    }

    /// AddPartitionsToTxn from the leaders of `partitions` (v4 and up, or
    /// a call from this node): with `verify_only`, checks that the open
    /// transaction holds them (KIP-890 part 1); otherwise adds them for
    /// the producer, which runs transactions v2 (Produce v12,
    /// TxnOffsetCommit v5).
    pub async fn add_for_leader(
        &self,
        broker: &Broker,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
        verify_only: bool,
    ) -> Result<(), CoordinatorError> {
        let now = broker.now_ms();
        let ((), pending) = self.begin(broker, transactional_id, None, |current| {
            let current = current.ok_or(TxnError::InvalidProducerIdMapping)?;
            if verify_only {
                txn::verify_partitions(current, producer.0, producer.1, partitions)?;
                return Ok(((), None));
            }
            let next = txn::add_partitions(
                current,
                producer.0,
                producer.1,
                partitions,
                txn::TRANSACTIONS_V2,
                now,
            )?;
            Ok(((), next))
        })?;
        match pending {
            Some(pending) => self.write(broker, pending).await,
            None => Ok(()),
        }
    }

    /// How many transactions coordinated here are open (not idle), and
    /// the start of the oldest.
    pub fn open_transactions(&self) -> (usize, Option<i64>) {
        let txns = self.txns.lock();
        let open = txns
            .values()
            .filter(|e| !e.meta.status.is_idle() && e.meta.status != TxnStatus::Dead);
        let count = open.clone().count();
        let oldest = open
            .filter(|e| e.meta.start_ms >= 0)
            .map(|e| e.meta.start_ms)
            .min();
        (count, oldest)
    }

    /// The transactions coordinated here, by id.
    pub fn list(&self) -> Vec<TxnView> {
        let mut views: Vec<TxnView> = self
            .txns
            .lock()
            .values()
            .filter(|e| e.meta.status != TxnStatus::Dead)
            .map(|entry| TxnView {
                meta: entry.meta.clone(),
                coordinator_partition: entry.partition,
            })
            .collect();
        views.sort_by(|a, b| a.meta.transactional_id.cmp(&b.meta.transactional_id));
        views
    }

    /// One transactional id coordinated here.
    pub fn describe(
        &self,
        broker: &Broker,
        transactional_id: &str,
    ) -> Result<Option<TxnMetadata>, CoordinatorError> {
        self.coordinated_partition(broker, transactional_id)?;
        Ok(self
            .txns
            .lock()
            .get(transactional_id)
            .map(|e| e.meta.clone())
            .filter(|m| m.status != TxnStatus::Dead))
    }
}

/// A state to write, taken by [`TxnCoordinator::begin`].
#[derive(Debug)]
pub struct Pending {
    partition: i32,
    next: TxnMetadata,
}

impl Pending {
    pub fn state(&self) -> &TxnMetadata {
        &self.next
    }
}

/// Appends a transaction's state (or, for None, its tombstone) to its
/// partition of `__transaction_state` and waits for the in-sync replicas.
async fn append_state(
    broker: &Broker,
    index: i32,
    transactional_id: &str,
    meta: Option<&TxnMetadata>,
) -> Result<(), CoordinatorError> {
    let partition = broker
        .leader_partition(TRANSACTION_STATE_TOPIC, index)
        .map_err(|_| CoordinatorError::NotCoordinator)?;
    // Kafka writes values in v1 from transaction.version 1 on.
    let flexible = broker.with_image(|image| {
        crate::broker::features::level_of(crate::broker::features::TRANSACTION_VERSION, image) >= 1
    });
    let batch = encode_batch(
        records::txn::encode_key(transactional_id),
        meta.map(|meta| records::txn::encode_value(meta, flexible)),
        broker.now_ms(),
    );
    let state = partition.replica_state();
    let appended = partition
        .append_in_place(&batch, state.leader_epoch)
        .map_err(|error| CoordinatorError::NotAvailable(error.to_string()))?;
    let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT;
    partition
        .replicated(
            appended.last_offset + 1,
            broker.config().startup.node_id,
            deadline,
        )
        .await
        .map_err(|(code, message)| match code {
            ResponseError::NotLeaderOrFollower => CoordinatorError::NotCoordinator,
            _ => CoordinatorError::NotAvailable(message),
        })
}

/// One uncompressed batch holding one record, without producer.
fn encode_batch(key: Bytes, value: Option<Bytes>, timestamp: i64) -> BytesMut {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(key),
        value,
        headers: Default::default(),
    };
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("__transaction_state records encode");
    debug_assert!(BatchHeader::parse(&batch, 0).is_ok());
    batch
}

/// Sends the transaction's markers to the leaders of `partitions`; returns
/// those still to be written (leader unknown or unreachable, or an error
/// worth retrying). Partitions of deleted topics need no marker.
async fn write_markers(
    broker: &Broker,
    meta: &TxnMetadata,
    commit: bool,
    coordinator_epoch: i32,
    partitions: BTreeSet<(String, i32)>,
) -> BTreeSet<(String, i32)> {
    let mut by_leader: BTreeMap<String, BTreeSet<(String, i32)>> = BTreeMap::new();
    let mut remaining = BTreeSet::new();
    broker.with_image(|image| {
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
        let security = broker.inter_broker_security().clone();
        match send_markers(
            &addr,
            security,
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
