//! A member of a consumer group under the consumer rebalance protocol
//! (KIP-848, Kafka's `group.protocol=consumer`): the member heartbeats its
//! subscription, the coordinator assigns it partitions, and the member
//! confirms in its next heartbeat which partitions it owns, having
//! committed and let go of those taken from it.

use std::time::Duration;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::groups::CommittedOffset;
use crate::{Client, Cluster};

/// Kafka's default `max.poll.interval.ms`, which the Java client sends as
/// the rebalance timeout.
const REBALANCE_TIMEOUT_MS: i32 = 300_000;

/// The epoch a member leaves the group with.
const LEAVE_GROUP_EPOCH: i32 = -1;

/// What a heartbeat brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    /// The assignment stays as it was.
    Unchanged,
    /// A new assignment, by topic id, sorted.
    Assigned(Vec<(Uuid, Vec<i32>)>),
    /// The coordinator fenced the member: its partitions may be someone
    /// else's already, so it lets go of them without committing, and joins
    /// again with its next heartbeat.
    Fenced,
}

/// One member of a consumer group, talking to the group's coordinator.
pub struct GroupConsumer {
    group: String,
    topics: Vec<String>,
    coordinator: Option<Client>,
    /// Chosen by the member (ConsumerGroupHeartbeat v1), kept for its life.
    member_id: String,
    /// 0 until the coordinator admits the member.
    member_epoch: i32,
    heartbeat_interval: Duration,
    next_heartbeat: Instant,
    /// The partitions assigned, by topic id, sorted.
    assignment: Vec<(Uuid, Vec<i32>)>,
}

impl GroupConsumer {
    /// A member of `group` subscribed to `topics`; it joins with its first
    /// [`heartbeat`](Self::heartbeat).
    pub fn new(group: &str, topics: Vec<String>) -> Self {
        Self {
            group: group.to_owned(),
            topics,
            coordinator: None,
            member_id: Uuid::new_v4().simple().to_string(),
            member_epoch: 0,
            heartbeat_interval: Duration::from_secs(3),
            next_heartbeat: Instant::now(),
            assignment: Vec::new(),
        }
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// When the next heartbeat is due.
    pub fn next_heartbeat(&self) -> Instant {
        self.next_heartbeat
    }

    /// The partitions the coordinator assigned, by topic id.
    pub fn assignment(&self) -> &[(Uuid, Vec<i32>)] {
        &self.assignment
    }

    /// Sends a heartbeat, confirming `owned` (the partitions the member
    /// reads now, by topic id). A coordinator that moved or failed is
    /// looked for again at the next heartbeat, due soon.
    pub async fn heartbeat(
        &mut self,
        cluster: &mut Cluster,
        owned: &[(Uuid, Vec<i32>)],
    ) -> Result<HeartbeatOutcome, ClientError> {
        let joining = self.member_epoch == 0;
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(self.member_epoch)
            .with_rebalance_timeout_ms(if joining { REBALANCE_TIMEOUT_MS } else { -1 })
            .with_subscribed_topic_names(joining.then(|| {
                self.topics
                    .iter()
                    .map(|t| TopicName(StrBytes::from_string(t.clone())))
                    .collect()
            }))
            .with_topic_partitions(Some(
                owned
                    .iter()
                    .map(|(topic_id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(*topic_id)
                            .with_partitions(partitions.clone())
                    })
                    .collect(),
            ));
        let response: Result<ConsumerGroupHeartbeatResponse, ClientError> =
            match self.coordinator(cluster).await {
                Ok(client) => client.call(ApiKey::ConsumerGroupHeartbeat, &request).await,
                Err(error) => Err(error),
            };
        let outcome = response.and_then(|response| {
            check(
                response.error_code,
                response.error_message.as_ref().map(|m| m.to_string()),
            )
            .map(|()| response)
        });
        let response = match outcome {
            Ok(response) => response,
            Err(error) => {
                self.next_heartbeat = Instant::now() + self.heartbeat_interval.min(RETRY_BACKOFF);
                if fenced(&error) {
                    // Kafka's members rejoin under the same id at epoch 0,
                    // giving up their partitions.
                    self.member_epoch = 0;
                    self.assignment.clear();
                    self.next_heartbeat = Instant::now();
                    return Ok(HeartbeatOutcome::Fenced);
                }
                if coordinator_moved(&error) {
                    self.coordinator = None;
                    return Ok(HeartbeatOutcome::Unchanged);
                }
                return Err(with_subject(error, "group", &self.group));
            }
        };
        self.member_epoch = response.member_epoch;
        if response.heartbeat_interval_ms > 0 {
            self.heartbeat_interval = Duration::from_millis(response.heartbeat_interval_ms as u64);
        }
        self.next_heartbeat = Instant::now() + self.heartbeat_interval;
        let Some(assignment) = response.assignment else {
            return Ok(HeartbeatOutcome::Unchanged);
        };
        let mut assigned: Vec<(Uuid, Vec<i32>)> = assignment
            .topic_partitions
            .into_iter()
            .map(|t| {
                let mut partitions = t.partitions;
                partitions.sort_unstable();
                (t.topic_id, partitions)
            })
            .collect();
        assigned.sort();
        self.assignment = assigned.clone();
        Ok(HeartbeatOutcome::Assigned(assigned))
    }

    /// Commits `offsets` (topic, partition, next offset to read) as this
    /// member; asked again of the coordinator found anew while the old one
    /// is unreachable or has moved, within the request timeout, as Kafka's
    /// `commitSync` does.
    pub async fn commit(
        &mut self,
        cluster: &mut Cluster,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let (group, member_id, epoch) = (
            self.group.clone(),
            self.member_id.clone(),
            self.member_epoch,
        );
        self.with_coordinator(cluster, async |client| {
            client
                .offset_commit_as(&group, &member_id, epoch, offsets)
                .await
        })
        .await
    }

    /// The group's committed offsets for `partitions` of `topic`; asked
    /// again as [`commit`](Self::commit) is.
    pub async fn committed(
        &mut self,
        cluster: &mut Cluster,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Vec<CommittedOffset>, ClientError> {
        let group = self.group.clone();
        let wanted = vec![(topic.to_owned(), partitions.to_vec())];
        self.with_coordinator(cluster, async |client| {
            client.offset_fetch(&group, Some(&wanted)).await
        })
        .await
    }

    /// `call` on the coordinator, found again and called again while it is
    /// unreachable or has moved, until the request timeout.
    async fn with_coordinator<T>(
        &mut self,
        cluster: &mut Cluster,
        call: impl AsyncFn(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let deadline = Instant::now() + cluster.any().config().request_timeout;
        loop {
            let outcome = match self.coordinator(cluster).await {
                Ok(client) => call(client).await,
                Err(error) => Err(error),
            };
            match outcome {
                Err(error) if coordinator_moved(&error) => {
                    self.coordinator = None;
                    if Instant::now() >= deadline {
                        return Err(error);
                    }
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                outcome => return outcome,
            }
        }
    }

    /// Leaves the group, so that its partitions go to other members now
    /// rather than after the session timeout.
    pub async fn leave(&mut self, cluster: &mut Cluster) -> Result<(), ClientError> {
        if self.member_epoch == 0 {
            return Ok(());
        }
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(LEAVE_GROUP_EPOCH)
            .with_rebalance_timeout_ms(-1);
        let client = self.coordinator(cluster).await?;
        let response: ConsumerGroupHeartbeatResponse = client
            .call(ApiKey::ConsumerGroupHeartbeat, &request)
            .await?;
        self.member_epoch = 0;
        check(response.error_code, None)
    }

    /// The connection to the group's coordinator, found if there is none.
    async fn coordinator(&mut self, cluster: &mut Cluster) -> Result<&mut Client, ClientError> {
        if self.coordinator.is_none() {
            let found = match cluster.any().find_coordinator(&self.group).await {
                Err(error) if !matches!(error, ClientError::Kafka { .. }) => {
                    // The bootstrap broker failed: ask another.
                    cluster.metadata(Some(&[])).await?;
                    cluster.any().find_coordinator(&self.group).await?
                }
                found => found?,
            };
            let client = cluster.any().connect_to_broker(&found.addr()).await?;
            self.coordinator = Some(client);
        }
        Ok(self.coordinator.as_mut().expect("just connected"))
    }
}

/// How soon to try again after a failed heartbeat.
const RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// The coordinator no longer knows the member at its epoch: it must join
/// again.
fn fenced(error: &ClientError) -> bool {
    error.is(ResponseError::FencedMemberEpoch) || error.is(ResponseError::UnknownMemberId)
}

/// The request went to a broker that is not (or no longer) the group's
/// coordinator, or could not reach it.
fn coordinator_moved(error: &ClientError) -> bool {
    matches!(error, ClientError::Io { .. } | ClientError::Timeout { .. })
        || error.is(ResponseError::NotCoordinator)
        || error.is(ResponseError::CoordinatorNotAvailable)
        || error.is(ResponseError::CoordinatorLoadInProgress)
}
