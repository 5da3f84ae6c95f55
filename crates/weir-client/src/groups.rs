//! Consumer groups as an operator sees them: FindCoordinator, ListGroups,
//! DescribeGroups, OffsetFetch, OffsetCommit and TxnOffsetCommit (as a
//! consumer that assigns partitions itself) and DeleteGroups, plus decoding
//! the partition assignment of a consumer group's members.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, DeleteGroupsRequest, DeleteGroupsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Decodable, Message, StrBytes};
use kafka_protocol::ResponseError;

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::Client;

/// FindCoordinator's key type for a consumer group.
const GROUP_KEY_TYPE: i8 = 0;

/// The `protocol_type` of groups of Kafka consumers, whose member
/// assignments follow the ConsumerProtocol.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The state DescribeGroups gives a group the coordinator does not know.
pub const DEAD: &str = "Dead";

/// How long to wait before asking a coordinator that is not ready again.
pub(crate) const COORDINATOR_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Whether FindCoordinator's `error` says there is no coordinator yet: its
/// internal topic is being created, or its partition is still being loaded.
fn no_coordinator_yet(error: &ClientError) -> bool {
    error.is(ResponseError::CoordinatorNotAvailable)
        || error.is(ResponseError::CoordinatorLoadInProgress)
}

/// Whether a request to the coordinator failed because it is still loading
/// its partition. (COORDINATOR_NOT_AVAILABLE from a coordinator means a
/// write did not reach the in-sync replicas: the caller decides.)
pub(crate) fn coordinator_loading(error: &ClientError) -> bool {
    error.is(ResponseError::CoordinatorLoadInProgress)
}

/// Awaits `$attempt` (a call on `$client`) again, within the client's
/// request timeout, while its error passes `$retriable`, as Kafka's clients
/// retry these errors.
macro_rules! retry_while {
    ($client:expr, $retriable:expr, $attempt:expr) => {{
        let deadline = tokio::time::Instant::now() + $client.config().request_timeout;
        loop {
            match $attempt.await {
                Err(error) if $retriable(&error) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep($crate::groups::COORDINATOR_RETRY_BACKOFF).await;
                }
                outcome => break outcome,
            }
        }
    }};
}
pub(crate) use retry_while;

/// The broker that coordinates a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

impl Coordinator {
    /// `host:port`, with an IPv6 host in brackets.
    pub fn addr(&self) -> String {
        host_port(&self.host, self.port)
    }
}

/// `host:port`, with an IPv6 host in brackets.
pub(crate) fn host_port(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// One group of a ListGroups answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    /// Empty for a group that has never had members (only committed
    /// offsets).
    pub protocol_type: String,
    /// `Empty`, `Stable`, `PreparingRebalance`, …; `None` when the broker
    /// answered with ListGroups before v4, which has no state.
    pub state: Option<String>,
    /// `classic` or `consumer` (KIP-848); `None` before ListGroups v5.
    pub group_type: Option<String>,
}

/// A group as DescribeGroups tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    /// `Empty`, `Stable`, `PreparingRebalance`, `CompletingRebalance`, or
    /// [`DEAD`] for a group the coordinator does not know.
    pub state: String,
    /// [`CONSUMER_PROTOCOL_TYPE`] for Kafka consumers; empty for a group
    /// with no members.
    pub protocol_type: String,
    /// The chosen protocol, e.g. the assignor `range`; empty while none is.
    pub protocol: String,
    pub members: Vec<GroupMember>,
}

impl GroupDescription {
    /// True when the coordinator does not know the group.
    pub fn is_dead(&self) -> bool {
        self.state == DEAD
    }

    /// True when its members are Kafka consumers, whose assignments
    /// [`GroupMember::consumer_assignment`] can decode.
    pub fn is_consumer_group(&self) -> bool {
        self.protocol_type == CONSUMER_PROTOCOL_TYPE
    }
}

/// A member of a described group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    pub member_id: String,
    /// The static membership id, if the member has one.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    /// The member's address as the broker saw it, e.g. `/127.0.0.1`.
    pub client_host: String,
    /// The protocol metadata the member joined with.
    pub metadata: Bytes,
    /// The member's assignment from the group leader; for a consumer group
    /// a ConsumerProtocol Assignment.
    pub assignment: Bytes,
}

impl GroupMember {
    /// The partitions assigned to this member of a consumer group,
    /// sorted: see [`decode_consumer_assignment`].
    pub fn consumer_assignment(&self) -> Result<Vec<(String, i32)>, AssignmentError> {
        decode_consumer_assignment(&self.assignment)
    }
}

/// A member assignment that is not a ConsumerProtocol Assignment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a consumer protocol assignment: {0}")]
pub struct AssignmentError(String);

/// Decodes a member assignment as Kafka's ConsumerProtocol Assignment (an
/// int16 version, then the assigned topics and partitions and the user
/// data) into sorted `(topic, partition)` pairs. Empty bytes are no
/// assignment. A version newer than this client knows is read as the
/// newest it knows, as the Java client does: later versions only append
/// fields.
pub fn decode_consumer_assignment(bytes: &[u8]) -> Result<Vec<(String, i32)>, AssignmentError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf = bytes;
    let Some((version, rest)) = buf.split_first_chunk::<2>() else {
        return Err(AssignmentError("shorter than its version".to_owned()));
    };
    let version = i16::from_be_bytes(*version);
    if version < 0 {
        return Err(AssignmentError(format!("negative version {version}")));
    }
    buf = rest;
    let version = version.min(ConsumerProtocolAssignment::VERSIONS.max);
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version)
        .map_err(|e| AssignmentError(e.to_string()))?;
    let mut partitions: Vec<(String, i32)> = assignment
        .assigned_partitions
        .into_iter()
        .flat_map(|t| {
            let topic = t.topic.0.to_string();
            t.partitions.into_iter().map(move |p| (topic.clone(), p))
        })
        .collect();
    partitions.sort();
    partitions.dedup();
    Ok(partitions)
}

/// A committed offset of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The leader epoch committed with the offset, if any.
    pub leader_epoch: Option<i32>,
    pub metadata: Option<String>,
}

/// The partitions to fetch committed offsets of: `(topic, partitions)`.
pub type TopicPartitions = [(String, Vec<i32>)];

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// The first partition error of a commit's answer, `(topic, partition,
/// error code)` each, named after its partition.
fn check_partitions<'a>(
    answers: impl IntoIterator<Item = (&'a str, i32, i16)>,
) -> Result<(), ClientError> {
    for (topic, partition, code) in answers {
        check(code, None)
            .map_err(|e| with_subject(e, "partition", &format!("{topic}-{partition}")))?;
    }
    Ok(())
}

fn text(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

impl Client {
    /// The coordinator of `group`.
    pub async fn find_coordinator(&mut self, group: &str) -> Result<Coordinator, ClientError> {
        self.find_coordinator_of(GROUP_KEY_TYPE, "group", group)
            .await
    }

    /// The coordinator of `key`, a group or (`key_type` 1) a transactional
    /// id; `kind` names it in errors. Asked again, within the request
    /// timeout, while the broker answers that none is available yet (the
    /// internal topic is being created, or its partition loaded), as Kafka's
    /// clients do.
    pub(crate) async fn find_coordinator_of(
        &mut self,
        key_type: i8,
        kind: &str,
        key: &str,
    ) -> Result<Coordinator, ClientError> {
        retry_while!(
            self,
            no_coordinator_yet,
            self.find_coordinator_once(key_type, kind, key)
        )
    }

    async fn find_coordinator_once(
        &mut self,
        key_type: i8,
        kind: &str,
        key: &str,
    ) -> Result<Coordinator, ClientError> {
        let group = key;
        let version = self.require_version(ApiKey::FindCoordinator)?;
        let mut request = FindCoordinatorRequest::default().with_key_type(key_type);
        if version >= 4 {
            request = request.with_coordinator_keys(vec![StrBytes::from_string(group.to_owned())]);
        } else {
            request = request.with_key(StrBytes::from_string(group.to_owned()));
        }
        let response: FindCoordinatorResponse = self
            .call_version(ApiKey::FindCoordinator, version, &request)
            .await?;
        let (code, message, node_id, host, port) = if version >= 4 {
            let found = response
                .coordinators
                .into_iter()
                .find(|c| c.key.as_str() == group)
                .ok_or_else(|| self.missing("FindCoordinator", group))?;
            (
                found.error_code,
                found.error_message,
                found.node_id,
                found.host,
                found.port,
            )
        } else {
            (
                response.error_code,
                response.error_message,
                response.node_id,
                response.host,
                response.port,
            )
        };
        check(code, text(message)).map_err(|e| with_subject(e, kind, group))?;
        Ok(Coordinator {
            node_id: node_id.0,
            host: host.to_string(),
            port,
        })
    }

    /// Every group this broker coordinates, sorted by id.
    /// Asked again while a partition of its groups is still loading.
    pub async fn list_groups(&mut self) -> Result<Vec<ListedGroup>, ClientError> {
        retry_while!(self, coordinator_loading, self.list_groups_once())
    }

    async fn list_groups_once(&mut self) -> Result<Vec<ListedGroup>, ClientError> {
        let version = self.require_version(ApiKey::ListGroups)?;
        let response: ListGroupsResponse = self
            .call_version(ApiKey::ListGroups, version, &ListGroupsRequest::default())
            .await?;
        check(response.error_code, None)?;
        let mut groups: Vec<ListedGroup> = response
            .groups
            .into_iter()
            .map(|g| ListedGroup {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: (version >= 4).then(|| g.group_state.to_string()),
                group_type: (version >= 5).then(|| g.group_type.to_string()),
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(groups)
    }

    /// Describes `groups`, in the order asked. A group the coordinator
    /// does not know is [`DEAD`] with no members (newer brokers answer
    /// GROUP_ID_NOT_FOUND for it, older ones the state alone); any other
    /// error of a group fails the call, once the coordinator has loaded it.
    pub async fn describe_groups(
        &mut self,
        groups: &[&str],
    ) -> Result<Vec<GroupDescription>, ClientError> {
        retry_while!(self, coordinator_loading, self.describe_groups_once(groups))
    }

    async fn describe_groups_once(
        &mut self,
        groups: &[&str],
    ) -> Result<Vec<GroupDescription>, ClientError> {
        let version = self.require_version(ApiKey::DescribeGroups)?;
        let request = DescribeGroupsRequest::default()
            .with_groups(groups.iter().map(|g| group_id(g)).collect());
        let response: DescribeGroupsResponse = self
            .call_version(ApiKey::DescribeGroups, version, &request)
            .await?;
        let mut described: BTreeMap<String, GroupDescription> = BTreeMap::new();
        for group in response.groups {
            let id = group.group_id.0.to_string();
            let description = if group.error_code == ResponseError::GroupIdNotFound.code() {
                GroupDescription {
                    group_id: id.clone(),
                    state: DEAD.to_owned(),
                    protocol_type: String::new(),
                    protocol: String::new(),
                    members: Vec::new(),
                }
            } else {
                check(group.error_code, text(group.error_message))
                    .map_err(|e| with_subject(e, "group", &id))?;
                GroupDescription {
                    group_id: id.clone(),
                    state: group.group_state.to_string(),
                    protocol_type: group.protocol_type.to_string(),
                    protocol: group.protocol_data.to_string(),
                    members: group
                        .members
                        .into_iter()
                        .map(|m| GroupMember {
                            member_id: m.member_id.to_string(),
                            group_instance_id: text(m.group_instance_id),
                            client_id: m.client_id.to_string(),
                            client_host: m.client_host.to_string(),
                            metadata: m.member_metadata,
                            assignment: m.member_assignment,
                        })
                        .collect(),
                }
            };
            described.insert(id, description);
        }
        groups
            .iter()
            .map(|g| {
                described
                    .remove(*g)
                    .ok_or_else(|| self.missing("DescribeGroups", g))
            })
            .collect()
    }

    /// The offsets `group` has committed, sorted by topic and partition:
    /// for `topics` (topic and partitions), or for everything it has
    /// committed with `None`. Partitions without a committed offset are
    /// left out; a partition the broker reports an error for fails the
    /// call.
    pub async fn offset_fetch(
        &mut self,
        group: &str,
        topics: Option<&TopicPartitions>,
    ) -> Result<Vec<CommittedOffset>, ClientError> {
        self.fetch_offsets(group, topics, false).await
    }

    /// [`offset_fetch`](Self::offset_fetch) as a `read_committed` consumer
    /// asks (`require_stable`, OffsetFetch v7 or later): a partition for
    /// which a transaction has an offset pending fails the call with
    /// UNSTABLE_OFFSET_COMMIT.
    pub async fn offset_fetch_stable(
        &mut self,
        group: &str,
        topics: Option<&TopicPartitions>,
    ) -> Result<Vec<CommittedOffset>, ClientError> {
        self.fetch_offsets(group, topics, true).await
    }

    async fn fetch_offsets(
        &mut self,
        group: &str,
        topics: Option<&TopicPartitions>,
        require_stable: bool,
    ) -> Result<Vec<CommittedOffset>, ClientError> {
        retry_while!(
            self,
            coordinator_loading,
            self.fetch_offsets_once(group, topics, require_stable)
        )
    }

    async fn fetch_offsets_once(
        &mut self,
        group: &str,
        topics: Option<&TopicPartitions>,
        require_stable: bool,
    ) -> Result<Vec<CommittedOffset>, ClientError> {
        let version = self.require_version(ApiKey::OffsetFetch)?;
        if topics.is_none() && version < 2 {
            return Err(ClientError::UnsupportedApi {
                addr: self.addr().to_owned(),
                api: "OffsetFetch of all topics (v2 or later; it offers v1)".to_owned(),
            });
        }
        if require_stable && version < 7 {
            return Err(ClientError::UnsupportedApi {
                addr: self.addr().to_owned(),
                api: format!("OffsetFetch with require_stable (v7 or later; it offers v{version})"),
            });
        }
        let request = if version >= 8 {
            let topics = topics.map(|topics| {
                topics
                    .iter()
                    .map(|(topic, partitions)| {
                        OffsetFetchRequestTopics::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(partitions.clone())
                    })
                    .collect()
            });
            OffsetFetchRequest::default()
                .with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(group_id(group))
                    .with_topics(topics)])
                .with_require_stable(require_stable)
        } else {
            let topics = topics.map(|topics| {
                topics
                    .iter()
                    .map(|(topic, partitions)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(partitions.clone())
                    })
                    .collect()
            });
            OffsetFetchRequest::default()
                .with_group_id(group_id(group))
                .with_topics(topics)
                .with_require_stable(require_stable)
        };
        let response: OffsetFetchResponse = self
            .call_version(ApiKey::OffsetFetch, version, &request)
            .await?;
        // (topic, partition, offset, leader epoch, metadata, error code)
        let mut found: Vec<(String, i32, i64, i32, Option<StrBytes>, i16)> = Vec::new();
        if version >= 8 {
            let answer = response
                .groups
                .into_iter()
                .find(|g| g.group_id.0.as_str() == group)
                .ok_or_else(|| self.missing("OffsetFetch", group))?;
            check(answer.error_code, None).map_err(|e| with_subject(e, "group", group))?;
            for topic in answer.topics {
                let name = topic.name.0.to_string();
                for p in topic.partitions {
                    found.push((
                        name.clone(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata,
                        p.error_code,
                    ));
                }
            }
        } else {
            check(response.error_code, None).map_err(|e| with_subject(e, "group", group))?;
            for topic in response.topics {
                let name = topic.name.0.to_string();
                for p in topic.partitions {
                    found.push((
                        name.clone(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata,
                        p.error_code,
                    ));
                }
            }
        }
        let mut offsets = Vec::with_capacity(found.len());
        for (topic, partition, offset, leader_epoch, metadata, code) in found {
            check(code, None)
                .map_err(|e| with_subject(e, "partition", &format!("{topic}-{partition}")))?;
            if offset < 0 {
                continue;
            }
            offsets.push(CommittedOffset {
                topic,
                partition,
                offset,
                leader_epoch: (version >= 5 && leader_epoch >= 0).then_some(leader_epoch),
                metadata: text(metadata),
            });
        }
        offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(offsets)
    }

    /// Commits `offsets` (topic, partition, offset) for `group` as a
    /// consumer that assigns partitions itself (no generation, no member
    /// id), which a coordinator accepts only while the group has no
    /// members. The first partition the broker refuses fails the call
    /// (once the coordinator has loaded it); the other partitions of the request
    /// may have been committed.
    pub async fn offset_commit_simple(
        &mut self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        self.offset_commit_as(group, "", -1, offsets).await
    }

    /// Commits `offsets` (topic, partition, offset) for `group` as its
    /// member `member_id` at `generation_or_epoch` (a classic group's
    /// generation, or a consumer group member's epoch); the first
    /// partition the broker refuses fails the call.
    pub async fn offset_commit_as(
        &mut self,
        group: &str,
        member_id: &str,
        generation_or_epoch: i32,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        retry_while!(
            self,
            coordinator_loading,
            self.offset_commit_once(group, member_id, generation_or_epoch, offsets)
        )
    }

    async fn offset_commit_once(
        &mut self,
        group: &str,
        member_id: &str,
        generation_or_epoch: i32,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        let version = self.require_version(ApiKey::OffsetCommit)?;
        let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (topic, partition, offset) in offsets {
            by_topic.entry(topic.as_str()).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset),
            );
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(generation_or_epoch)
            .with_member_id(StrBytes::from_string(member_id.to_owned()))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(topic, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let response: OffsetCommitResponse = self
            .call_version(ApiKey::OffsetCommit, version, &request)
            .await?;
        check_partitions(response.topics.iter().flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|p| (topic.name.0.as_str(), p.partition_index, p.error_code))
        }))
    }

    /// Commits `offsets` (topic, partition, offset) for `group` within the
    /// transaction of `transactional_id` (TxnOffsetCommit), as a consumer
    /// outside group management (generation -1, no member id). They stay
    /// pending, invisible to OffsetFetch, until the producer's transaction
    /// commits. The first partition the broker refuses fails the call
    /// (once the coordinator has loaded it).
    pub async fn txn_offset_commit(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        retry_while!(
            self,
            coordinator_loading,
            self.txn_offset_commit_once(
                transactional_id,
                producer_id,
                producer_epoch,
                group,
                offsets
            )
        )
    }

    async fn txn_offset_commit_once(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        let version = self.require_version(ApiKey::TxnOffsetCommit)?;
        let mut by_topic: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
        for (topic, partition, offset) in offsets {
            by_topic.entry(topic.as_str()).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1),
            );
        }
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            )))
            .with_group_id(group_id(group))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(topic, partitions)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let response: TxnOffsetCommitResponse = self
            .call_version(ApiKey::TxnOffsetCommit, version, &request)
            .await?;
        check_partitions(response.topics.iter().flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|p| (topic.name.0.as_str(), p.partition_index, p.error_code))
        }))
    }

    /// Deletes `groups` and their committed offsets: for each, in the
    /// order asked, `Ok` or the broker's error (GROUP_ID_NOT_FOUND,
    /// NON_EMPTY_GROUP, …). A group whose coordinator is still loading is
    /// asked about again, within the request timeout.
    pub async fn delete_groups(
        &mut self,
        groups: &[&str],
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        let deadline = tokio::time::Instant::now() + self.config().request_timeout;
        let mut results: BTreeMap<&str, Result<(), ClientError>> = BTreeMap::new();
        let mut pending: Vec<&str> = groups.to_vec();
        loop {
            for (group, result) in pending.iter().zip(self.delete_groups_once(&pending).await?) {
                results.insert(group, result);
            }
            pending.retain(|g| matches!(&results[g], Err(e) if coordinator_loading(e)));
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(COORDINATOR_RETRY_BACKOFF).await;
        }
        Ok(groups
            .iter()
            .map(|g| (g.to_string(), results.remove(g).unwrap_or(Ok(()))))
            .collect())
    }

    /// One DeleteGroups request: each group's outcome, in the order asked.
    async fn delete_groups_once(
        &mut self,
        groups: &[&str],
    ) -> Result<Vec<Result<(), ClientError>>, ClientError> {
        let version = self.require_version(ApiKey::DeleteGroups)?;
        let request = DeleteGroupsRequest::default()
            .with_groups_names(groups.iter().map(|g| group_id(g)).collect());
        let response: DeleteGroupsResponse = self
            .call_version(ApiKey::DeleteGroups, version, &request)
            .await?;
        let mut codes: BTreeMap<String, i16> = response
            .results
            .into_iter()
            .map(|r| (r.group_id.0.to_string(), r.error_code))
            .collect();
        groups
            .iter()
            .map(|g| {
                let code = codes
                    .remove(*g)
                    .ok_or_else(|| self.missing("DeleteGroups", g))?;
                Ok(check(code, None).map_err(|e| with_subject(e, "group", g)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::protocol::Encodable;

    use super::*;

    fn assignment(version: i16, topics: &[(&str, &[i32])]) -> Vec<u8> {
        let body = ConsumerProtocolAssignment::default()
            .with_assigned_partitions(
                topics
                    .iter()
                    .map(|(t, ps)| {
                        TopicPartition::default()
                            .with_topic(topic_name(t))
                            .with_partitions(ps.to_vec())
                    })
                    .collect(),
            )
            .with_user_data(Some(Bytes::from_static(b"user")));
        let mut buf = BytesMut::new();
        buf.put_i16(version);
        body.encode(&mut buf, version.min(3)).unwrap();
        buf.to_vec()
    }

    #[test]
    fn assignments_decode_to_sorted_topic_partitions() {
        let bytes = assignment(0, &[("orders", &[2, 0]), ("audit", &[1])]);
        assert_eq!(
            decode_consumer_assignment(&bytes).unwrap(),
            vec![
                ("audit".to_owned(), 1),
                ("orders".to_owned(), 0),
                ("orders".to_owned(), 2)
            ]
        );
        for version in [1, 2, 3] {
            let bytes = assignment(version, &[("t", &[0])]);
            assert_eq!(
                decode_consumer_assignment(&bytes).unwrap(),
                vec![("t".to_owned(), 0)],
                "v{version}"
            );
        }
    }

    #[test]
    fn an_empty_assignment_is_no_partitions() {
        assert_eq!(decode_consumer_assignment(&[]).unwrap(), vec![]);
        let bytes = assignment(1, &[]);
        assert_eq!(decode_consumer_assignment(&bytes).unwrap(), vec![]);
    }

    #[test]
    fn newer_versions_are_read_as_the_newest_known() {
        // A future version that appends a field after the user data.
        let mut bytes = assignment(3, &[("t", &[4, 5])]);
        bytes[..2].copy_from_slice(&7i16.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 9]);
        assert_eq!(
            decode_consumer_assignment(&bytes).unwrap(),
            vec![("t".to_owned(), 4), ("t".to_owned(), 5)]
        );
    }

    #[test]
    fn undecodable_assignments_are_errors() {
        assert!(decode_consumer_assignment(&[0]).is_err());
        assert!(decode_consumer_assignment(&(-1i16).to_be_bytes()).is_err());
        // Claims one topic but ends after the version.
        assert!(decode_consumer_assignment(&[0, 0, 0, 0, 0, 1]).is_err());
        // A topic name longer than what follows.
        let mut bytes = assignment(0, &[("orders", &[0])]);
        bytes.truncate(9);
        assert!(decode_consumer_assignment(&bytes).is_err());
        // Not the consumer protocol at all.
        assert!(decode_consumer_assignment(b"\x00\x00garbage!").is_err());
    }

    #[test]
    fn coordinator_addresses_bracket_ipv6_hosts() {
        let at = |host: &str| Coordinator {
            node_id: 1,
            host: host.to_owned(),
            port: 9092,
        };
        assert_eq!(at("127.0.0.1").addr(), "127.0.0.1:9092");
        assert_eq!(at("broker-1").addr(), "broker-1:9092");
        assert_eq!(at("::1").addr(), "[::1]:9092");
    }
}
