//! A client of a whole cluster: each request about a partition goes to the
//! partition's leader, as Kafka's clients send them, and is sent again
//! after a metadata refresh when leadership has moved.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use crate::admin::Metadata;
use crate::fetch::{ConsumedRecord, FetchTarget, FetchedPartition};
use crate::{Client, ClientConfig, ClientError, Compression, OutgoingRecord, SecurityConfig};

/// How long to wait before asking again where a partition's leader is.
const LEADER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Connections to the brokers of one cluster, and where each partition's
/// leader is as the last metadata said.
pub struct Cluster {
    /// The connection for requests any broker answers: to a bootstrap
    /// address first, to whichever broker answers after it fails.
    bootstrap: Client,
    /// The addresses given to connect with, tried again (with every broker
    /// the metadata named) when the bootstrap connection fails.
    bootstrap_addrs: Vec<String>,
    config: ClientConfig,
    /// Node id → `host:port`.
    brokers: HashMap<i32, String>,
    /// (topic, partition) → the leader's node id.
    leaders: HashMap<(String, i32), i32>,
    connections: HashMap<i32, Client>,
}

/// Whether `error` says the request went to a broker that does not lead the
/// partition (any more), or could not reach it: worth asking the metadata
/// again.
fn leadership_moved(error: &ClientError) -> bool {
    unreachable(error) || leader_error(error)
}

/// Whether `error` says the broker could not be reached or did not answer.
fn unreachable(error: &ClientError) -> bool {
    matches!(error, ClientError::Io { .. } | ClientError::Timeout { .. })
}

/// A Kafka error that means the partition's leader is elsewhere or being
/// elected: the request was not carried out.
fn leader_error(error: &ClientError) -> bool {
    [
        ResponseError::NotLeaderOrFollower,
        ResponseError::LeaderNotAvailable,
        ResponseError::FencedLeaderEpoch,
        ResponseError::UnknownLeaderEpoch,
    ]
    .into_iter()
    .any(|e| error.is(e))
}

impl Cluster {
    /// Connects to the first reachable broker of `bootstrap` (as
    /// [`Client::connect`]); the others are connected to when a partition
    /// they lead is asked about.
    pub async fn connect(bootstrap: &str) -> Result<Self, ClientError> {
        Self::connect_with(bootstrap, ClientConfig::default()).await
    }

    /// [`Cluster::connect`] with explicit settings.
    pub async fn connect_with(bootstrap: &str, config: ClientConfig) -> Result<Self, ClientError> {
        let client = Client::connect_with(bootstrap, config).await?;
        Ok(Self::from_client(client).with_bootstrap(bootstrap))
    }

    /// [`Cluster::connect_with`] over TLS and/or SASL: every broker the
    /// metadata names is connected to with the same security.
    pub async fn connect_with_security(
        bootstrap: &str,
        config: ClientConfig,
        security: SecurityConfig,
    ) -> Result<Self, ClientError> {
        let client = Client::connect_with_security(bootstrap, config, security).await?;
        Ok(Self::from_client(client).with_bootstrap(bootstrap))
    }

    /// A cluster client starting from a connection to one of its brokers;
    /// the others are connected to with its settings and security.
    pub fn from_client(bootstrap: Client) -> Self {
        Self {
            config: bootstrap.config().clone(),
            bootstrap_addrs: vec![bootstrap.addr().to_owned()],
            bootstrap,
            brokers: HashMap::new(),
            leaders: HashMap::new(),
            connections: HashMap::new(),
        }
    }

    fn with_bootstrap(mut self, bootstrap: &str) -> Self {
        self.bootstrap_addrs = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        self
    }

    /// The connection to the bootstrap broker, for requests any broker
    /// answers (metadata, topic administration).
    pub fn any(&mut self) -> &mut Client {
        &mut self.bootstrap
    }

    /// The metadata of `topics` (all with `None`), from which the leaders
    /// of their partitions are learnt.
    /// When the broker asked cannot be reached, the next one of the
    /// bootstrap addresses and of the brokers the metadata named is asked.
    pub async fn metadata(&mut self, topics: Option<&[String]>) -> Result<Metadata, ClientError> {
        let metadata = match self.bootstrap.metadata(topics).await {
            Err(error) if unreachable(&error) => {
                self.reconnect_elsewhere(error).await?;
                self.bootstrap.metadata(topics).await?
            }
            outcome => outcome?,
        };
        for broker in &metadata.brokers {
            let addr = crate::groups::host_port(&broker.host, broker.port);
            if self.brokers.insert(broker.node_id, addr.clone()) != Some(addr) {
                self.connections.remove(&broker.node_id);
            }
        }
        for topic in &metadata.topics {
            for p in &topic.partitions {
                self.leaders
                    .insert((topic.name.clone(), p.partition), p.leader);
            }
        }
        Ok(metadata)
    }

    /// Replaces the bootstrap connection, which failed with `error`, by one
    /// to the first other broker that answers: a bootstrap address or a
    /// broker the metadata named. `error` if none does.
    async fn reconnect_elsewhere(&mut self, error: ClientError) -> Result<(), ClientError> {
        let failed = self.bootstrap.addr().to_owned();
        let mut candidates: Vec<String> = self.bootstrap_addrs.clone();
        let mut known: Vec<&String> = self.brokers.values().collect();
        known.sort();
        candidates.extend(known.into_iter().cloned());
        let mut seen = BTreeSet::from([failed.clone()]);
        candidates.retain(|addr| seen.insert(addr.clone()));
        candidates.push(failed);
        for addr in candidates {
            if let Ok(client) = self.bootstrap.connect_to_broker(&addr).await {
                self.bootstrap = client;
                return Ok(());
            }
        }
        Err(error)
    }

    /// The node leading `partition` of `topic`, from the metadata (asked
    /// for if not known yet); LEADER_NOT_AVAILABLE while it has none.
    pub async fn leader_of(&mut self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        let key = (topic.to_owned(), partition);
        if self.leaders.get(&key).is_none_or(|l| *l < 0) {
            self.metadata(Some(&[topic.to_owned()])).await?;
        }
        match self.leaders.get(&key) {
            Some(&leader) if leader >= 0 => Ok(leader),
            Some(_) => Err(ClientError::Kafka {
                code: ResponseError::LeaderNotAvailable.code(),
                name: "LEADER_NOT_AVAILABLE".to_owned(),
                message: Some(format!("partition '{topic}-{partition}' has no leader")),
            }),
            None => Err(ClientError::Kafka {
                code: ResponseError::UnknownTopicOrPartition.code(),
                name: "UNKNOWN_TOPIC_OR_PARTITION".to_owned(),
                message: Some(format!("partition '{topic}-{partition}'")),
            }),
        }
    }

    /// A connection to `node` (one the metadata named), opened if there is
    /// none: for requests only that broker answers, as DescribeConfigs of
    /// its own configs.
    pub async fn connection(&mut self, node: i32) -> Result<&mut Client, ClientError> {
        if !self.connections.contains_key(&node) {
            let addr = self.brokers.get(&node).cloned().ok_or_else(|| {
                ClientError::InvalidArgument(format!("broker {node} is not in the metadata"))
            })?;
            let client = self.bootstrap.connect_to_broker(&addr).await?;
            self.connections.insert(node, client);
        }
        Ok(self.connections.get_mut(&node).expect("just connected"))
    }

    /// Connections to each of `nodes` (ones the metadata named), opened
    /// where there are none: for requests sent to several brokers at once.
    pub async fn connections(
        &mut self,
        nodes: &BTreeSet<i32>,
    ) -> Result<Vec<(i32, &mut Client)>, ClientError> {
        for &node in nodes {
            self.connection(node).await?;
        }
        Ok(self
            .connections
            .iter_mut()
            .filter(|(node, _)| nodes.contains(node))
            .map(|(&node, client)| (node, client))
            .collect())
    }

    /// The connection to the leader of `partition` of `topic`.
    pub async fn leader(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<&mut Client, ClientError> {
        let leader = self.leader_of(topic, partition).await?;
        self.connection(leader).await
    }

    /// Forgets what made a request fail with `error`: the leaders of
    /// `partitions` (and the connection, if it broke), so that the next try
    /// asks the metadata again.
    fn forget(&mut self, error: &ClientError, partitions: &[(String, i32)]) {
        for key in partitions {
            if let Some(leader) = self.leaders.remove(key) {
                if !leader_error(error) {
                    self.connections.remove(&leader);
                }
            }
        }
    }

    /// Whether to try again after `error` (one `retriable` says is worth
    /// it, before `deadline`); if so, forgets the leaders it puts in doubt
    /// and pauses first.
    pub(crate) async fn again(
        &mut self,
        error: &ClientError,
        retriable: fn(&ClientError) -> bool,
        partitions: &[(String, i32)],
        deadline: tokio::time::Instant,
    ) -> bool {
        if !retriable(error) || tokio::time::Instant::now() >= deadline {
            return false;
        }
        self.forget(error, partitions);
        tokio::time::sleep(LEADER_RETRY_BACKOFF).await;
        true
    }

    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.config.request_timeout
    }

    /// [`Client::list_offsets`] on the partition's leader.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<i64, ClientError> {
        let deadline = self.deadline();
        let key = [(topic.to_owned(), partition)];
        loop {
            let outcome = match self.leader(topic, partition).await {
                Ok(client) => client.list_offsets(topic, partition, timestamp).await,
                Err(error) => Err(error),
            };
            match outcome {
                Err(error) if self.again(&error, leadership_moved, &key, deadline).await => {}
                outcome => return outcome,
            }
        }
    }

    /// [`Client::produce_compressed`] on the partition's leader. Sent again
    /// only when the broker said it does not lead the partition (so the
    /// batch was not appended); a broken connection fails the call, as the
    /// batch may have been appended.
    pub async fn produce_compressed(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<(Option<Bytes>, Option<Bytes>)>,
        compression: Compression,
    ) -> Result<i64, ClientError> {
        let records = crate::produce::without_headers(records);
        self.produce_records(topic, partition, records, compression)
            .await
    }

    /// [`Cluster::produce_compressed`] for records with headers.
    pub async fn produce_records(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<OutgoingRecord>,
        compression: Compression,
    ) -> Result<i64, ClientError> {
        let deadline = self.deadline();
        let key = [(topic.to_owned(), partition)];
        loop {
            let outcome = match self.leader(topic, partition).await {
                Ok(client) => {
                    client
                        .produce_records(topic, partition, records.clone(), compression)
                        .await
                }
                Err(error) => Err(error),
            };
            match outcome {
                Err(error) if self.again(&error, leader_error, &key, deadline).await => {}
                outcome => return outcome,
            }
        }
    }

    /// [`Client::fetch`] from the partition's leader.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<Vec<ConsumedRecord>, ClientError> {
        let target = FetchTarget {
            topic: topic.to_owned(),
            partition,
            offset,
            max_bytes,
        };
        let mut fetched = self.fetch_many(&[target], max_bytes, max_wait_ms).await?;
        Ok(fetched.pop().map(|p| p.records).unwrap_or_default())
    }

    /// [`Client::fetch_many`] over partitions of several leaders: one Fetch
    /// request to each leader, all waited for together. Results come in the
    /// order of `targets`.
    pub async fn fetch_many(
        &mut self,
        targets: &[FetchTarget],
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let deadline = self.deadline();
        let keys: Vec<(String, i32)> = targets
            .iter()
            .map(|t| (t.topic.clone(), t.partition))
            .collect();
        loop {
            match self
                .fetch_from_leaders(targets, max_bytes, max_wait_ms)
                .await
            {
                Err(error) if self.again(&error, leadership_moved, &keys, deadline).await => {}
                outcome => return outcome,
            }
        }
    }

    async fn fetch_from_leaders(
        &mut self,
        targets: &[FetchTarget],
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        // Leader → the indexes of its targets.
        let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (i, target) in targets.iter().enumerate() {
            let leader = self.leader_of(&target.topic, target.partition).await?;
            by_leader.entry(leader).or_default().push(i);
        }
        for &leader in by_leader.keys() {
            self.connection(leader).await?;
        }
        let requests = self
            .connections
            .iter_mut()
            .filter_map(|(node, client)| Some((client, by_leader.get(node)?)))
            .map(|(client, indexes)| async move {
                let own: Vec<FetchTarget> = indexes.iter().map(|&i| targets[i].clone()).collect();
                let fetched = client.fetch_many(&own, max_bytes, max_wait_ms).await?;
                Ok::<_, ClientError>(indexes.iter().copied().zip(fetched).collect::<Vec<_>>())
            });
        let mut results: Vec<Option<FetchedPartition>> = vec![None; targets.len()];
        for answer in futures::future::join_all(requests).await {
            for (i, fetched) in answer? {
                results[i] = Some(fetched);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every target has a leader's answer"))
            .collect())
    }
}
