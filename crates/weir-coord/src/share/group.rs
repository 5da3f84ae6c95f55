//! The membership of one share group (KIP-932's ShareGroupHeartbeat), as a
//! pure state machine: events in, records, timers and answers out.
//!
//! A share group needs no reconciliation: members of a share group may read
//! the same partition at once (each record is acquired by one of them), so a
//! member takes its new target assignment at once, at the group epoch. A
//! partition is shared only when the group has more members than
//! partitions. Every change goes through a [`ShareRecord`], applied with the
//! same [`replay`](ShareGroupEngine::replay) a loading coordinator uses.

use std::collections::{BTreeMap, BTreeSet};

use crate::consumer::{Assignment, TopicLookup, TopicMetadata};

/// ShareGroupHeartbeat's member epoch for a member leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// The broker settings of share groups, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupConfig {
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.share.session.timeout.ms`: a silent member is removed.
    pub session_timeout_ms: i32,
    /// `group.share.max.size`: the most members a share group may have.
    pub max_size: usize,
}

impl Default for ShareGroupConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            max_size: 200,
        }
    }
}

/// What a share group persists (in `__consumer_offsets`), each record the
/// latest value of its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareRecord {
    GroupMetadata {
        epoch: i32,
    },
    GroupMetadataTombstone,
    /// The subscribed topics as they were when the target was computed.
    PartitionMetadata {
        topics: Vec<TopicMetadata>,
    },
    PartitionMetadataTombstone,
    /// The topics whose share-partitions may hold state of the group
    /// (Kafka's ShareGroupStatePartitionMetadata): what it lists with its
    /// offsets and deletes with it.
    StatePartitionMetadata {
        topics: Vec<TopicMetadata>,
    },
    StatePartitionMetadataTombstone,
    MemberMetadata {
        member_id: String,
        metadata: ShareMemberMetadata,
    },
    MemberMetadataTombstone {
        member_id: String,
    },
    TargetAssignmentMember {
        member_id: String,
        assignment: Assignment,
    },
    TargetAssignmentMemberTombstone {
        member_id: String,
    },
    TargetAssignmentMetadata {
        assignment_epoch: i32,
    },
    TargetAssignmentMetadataTombstone,
    CurrentMemberAssignment {
        member_id: String,
        member_epoch: i32,
        assignment: Assignment,
    },
    CurrentMemberAssignmentTombstone {
        member_id: String,
    },
}

/// What a member told the coordinator about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareMemberMetadata {
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
}

/// A member of the group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareMember {
    pub member_id: String,
    pub metadata: ShareMemberMetadata,
    pub member_epoch: i32,
    pub assignment: Assignment,
}

/// A ShareGroupHeartbeat, as the coordinator decodes it; `None` fields
/// were null (unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareHeartbeat {
    pub member_id: String,
    /// 0 to join, the current epoch to heartbeat, -1 to leave.
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// A successful ShareGroupHeartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's partitions, when they changed or it joined.
    pub assignment: Option<Assignment>,
}

/// Why a ShareGroupHeartbeat was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareGroupError {
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the member id is not known to the group; rejoin with member epoch 0")]
    UnknownMemberId,
    #[error("the member epoch is fenced; rejoin with member epoch 0")]
    FencedMemberEpoch,
    #[error("the group has reached group.share.max.size members")]
    GroupMaxSizeReached,
    #[error("the group has members")]
    NonEmptyGroup,
}

impl ShareGroupError {
    pub fn code(&self) -> i16 {
        match self {
            ShareGroupError::UnknownMemberId => 25,
            ShareGroupError::InvalidRequest(_) => 42,
            ShareGroupError::GroupIdNotFound => 69,
            ShareGroupError::NonEmptyGroup => 68,
            ShareGroupError::GroupMaxSizeReached => 81,
            ShareGroupError::FencedMemberEpoch => 110,
        }
    }
}

/// What one event produced: persist `records` (already applied to the
/// engine), arm `sessions` (member id → deadline; a member whose session
/// was ended is in `ended`), then answer once the records are replicated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareOutput {
    pub records: Vec<ShareRecord>,
    pub sessions: Vec<(String, u64)>,
    /// Members that left or were removed: their session timers go. (What
    /// they acquired stays theirs until their share sessions close or the
    /// locks expire.)
    pub ended: Vec<String>,
}

/// The replayed state of a share group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroupState {
    pub exists: bool,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub subscription: BTreeMap<String, TopicMetadata>,
    /// The topics where the group may have share-partition state, by
    /// name: every one it subscribed to or had offsets altered on, until
    /// its offsets there are deleted.
    pub state_topics: BTreeMap<String, TopicMetadata>,
    pub members: BTreeMap<String, ShareMember>,
    pub target: BTreeMap<String, Assignment>,
}

impl ShareGroupState {
    /// Applies one record.
    pub fn replay(&mut self, record: &ShareRecord) {
        match record {
            ShareRecord::GroupMetadata { epoch } => {
                self.exists = true;
                self.group_epoch = *epoch;
            }
            ShareRecord::GroupMetadataTombstone => *self = Self::default(),
            ShareRecord::PartitionMetadata { topics } => {
                self.subscription = topics.iter().map(|t| (t.name.clone(), t.clone())).collect();
                // A group written without StatePartitionMetadata still
                // finds the state of what it subscribes to.
                for topic in topics {
                    self.state_topics
                        .entry(topic.name.clone())
                        .or_insert_with(|| topic.clone());
                }
            }
            ShareRecord::PartitionMetadataTombstone => self.subscription.clear(),
            ShareRecord::StatePartitionMetadata { topics } => {
                self.state_topics = topics.iter().map(|t| (t.name.clone(), t.clone())).collect();
            }
            ShareRecord::StatePartitionMetadataTombstone => self.state_topics.clear(),
            ShareRecord::MemberMetadata {
                member_id,
                metadata,
            } => {
                self.exists = true;
                let member = self
                    .members
                    .entry(member_id.clone())
                    .or_insert_with(|| ShareMember {
                        member_id: member_id.clone(),
                        ..ShareMember::default()
                    });
                member.metadata = metadata.clone();
            }
            ShareRecord::MemberMetadataTombstone { member_id } => {
                self.members.remove(member_id);
            }
            ShareRecord::TargetAssignmentMember {
                member_id,
                assignment,
            } => {
                self.target.insert(member_id.clone(), assignment.clone());
            }
            ShareRecord::TargetAssignmentMemberTombstone { member_id } => {
                self.target.remove(member_id);
            }
            ShareRecord::TargetAssignmentMetadata { assignment_epoch } => {
                self.assignment_epoch = *assignment_epoch;
            }
            ShareRecord::TargetAssignmentMetadataTombstone => self.assignment_epoch = 0,
            ShareRecord::CurrentMemberAssignment {
                member_id,
                member_epoch,
                assignment,
            } => {
                if let Some(member) = self.members.get_mut(member_id) {
                    member.member_epoch = *member_epoch;
                    member.assignment = assignment.clone();
                }
            }
            ShareRecord::CurrentMemberAssignmentTombstone { member_id } => {
                if let Some(member) = self.members.get_mut(member_id) {
                    member.member_epoch = 0;
                    member.assignment.clear();
                }
            }
        }
    }
}

/// One share group.
#[derive(Debug, Clone)]
pub struct ShareGroupEngine {
    group_id: String,
    config: ShareGroupConfig,
    state: ShareGroupState,
    /// Member id → when its session ends.
    sessions: BTreeMap<String, u64>,
    out: ShareOutput,
}

impl ShareGroupEngine {
    pub fn new(group_id: impl Into<String>, config: ShareGroupConfig) -> Self {
        Self {
            group_id: group_id.into(),
            config,
            state: ShareGroupState::default(),
            sessions: BTreeMap::new(),
            out: ShareOutput::default(),
        }
    }

    /// Applies a record read back from the log (loading the group).
    pub fn replay(&mut self, record: &ShareRecord) {
        self.state.replay(record);
    }

    /// After loading: a full session for every member.
    pub fn on_loaded(&mut self, now_ms: u64) -> ShareOutput {
        let members: Vec<String> = self.state.members.keys().cloned().collect();
        for member_id in members {
            self.schedule_session(&member_id, now_ms);
        }
        std::mem::take(&mut self.out)
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn state(&self) -> &ShareGroupState {
        &self.state
    }

    pub fn exists(&self) -> bool {
        self.state.exists
    }

    pub fn set_config(&mut self, config: ShareGroupConfig) {
        self.config = config;
    }

    /// Deletes the group (DeleteGroups): the tombstones of all its records.
    /// Only an empty group can be deleted.
    pub fn delete(&mut self) -> Result<ShareOutput, ShareGroupError> {
        if !self.state.exists {
            return Err(ShareGroupError::GroupIdNotFound);
        }
        if !self.state.members.is_empty() {
            return Err(ShareGroupError::NonEmptyGroup);
        }
        let targets: Vec<String> = self.state.target.keys().cloned().collect();
        for member_id in targets {
            self.append(ShareRecord::TargetAssignmentMemberTombstone { member_id });
        }
        self.append(ShareRecord::TargetAssignmentMetadataTombstone);
        self.append(ShareRecord::PartitionMetadataTombstone);
        self.append(ShareRecord::StatePartitionMetadataTombstone);
        self.append(ShareRecord::GroupMetadataTombstone);
        Ok(std::mem::take(&mut self.out))
    }

    /// The group's offsets were altered on `added` or deleted on `removed`
    /// (topic names): the topics where it may hold state follow.
    pub fn state_topics_changed(
        &mut self,
        added: Vec<TopicMetadata>,
        removed: &[String],
    ) -> ShareOutput {
        let mut topics = self.state.state_topics.clone();
        for name in removed {
            topics.remove(name);
        }
        for topic in added {
            topics.insert(topic.name.clone(), topic);
        }
        self.write_state_topics(topics);
        std::mem::take(&mut self.out)
    }

    fn write_state_topics(&mut self, topics: BTreeMap<String, TopicMetadata>) {
        if topics != self.state.state_topics {
            self.append(ShareRecord::StatePartitionMetadata {
                topics: topics.into_values().collect(),
            });
        }
    }

    /// Whether `member_id` is a member: ShareFetch and ShareAcknowledge come
    /// only from members.
    pub fn is_member(&self, member_id: &str) -> bool {
        self.state.members.contains_key(member_id)
    }

    /// Handles one ShareGroupHeartbeat.
    pub fn heartbeat(
        &mut self,
        now_ms: u64,
        request: &ShareHeartbeat,
        topics: &dyn TopicLookup,
    ) -> (Result<ShareHeartbeatResponse, ShareGroupError>, ShareOutput) {
        let result = self.on_heartbeat(now_ms, request, topics);
        if result.is_err() {
            debug_assert!(
                self.out.records.is_empty(),
                "a refused heartbeat changes nothing"
            );
        }
        (result, std::mem::take(&mut self.out))
    }

    /// A member's session ended at `now_ms` (its timer fired): it is
    /// removed unless it heartbeat since.
    pub fn session_expired(
        &mut self,
        now_ms: u64,
        member_id: &str,
        topics: &dyn TopicLookup,
    ) -> ShareOutput {
        if self.sessions.get(member_id).is_some_and(|at| now_ms >= *at) {
            self.remove_member(member_id, topics);
        }
        std::mem::take(&mut self.out)
    }

    /// Topics changed: the target follows if a subscribed one did.
    pub fn metadata_changed(&mut self, topics: &dyn TopicLookup) -> ShareOutput {
        if !self.state.members.is_empty() && self.refresh_subscription(topics) {
            self.bump_group_epoch();
        }
        std::mem::take(&mut self.out)
    }

    fn on_heartbeat(
        &mut self,
        now_ms: u64,
        request: &ShareHeartbeat,
        topics: &dyn TopicLookup,
    ) -> Result<ShareHeartbeatResponse, ShareGroupError> {
        use ShareGroupError::InvalidRequest;
        if request.member_id.is_empty() {
            return Err(InvalidRequest("MemberId can't be empty."));
        }
        if request.rack_id.as_deref() == Some("") {
            return Err(InvalidRequest("RackId can't be empty."));
        }
        let known = self.state.members.get(&request.member_id);
        match request.member_epoch {
            LEAVE_GROUP_MEMBER_EPOCH => {
                if !self.state.exists {
                    return Err(ShareGroupError::GroupIdNotFound);
                }
                if known.is_none() {
                    return Err(ShareGroupError::UnknownMemberId);
                }
                self.remove_member(&request.member_id, topics);
                return Ok(ShareHeartbeatResponse {
                    member_id: request.member_id.clone(),
                    member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                });
            }
            0 => {
                if request
                    .subscribed_topic_names
                    .as_ref()
                    .is_none_or(|names| names.is_empty())
                {
                    return Err(InvalidRequest(
                        "SubscribedTopicNames must be set in first request.",
                    ));
                }
                if known.is_none() && self.state.members.len() >= self.config.max_size {
                    return Err(ShareGroupError::GroupMaxSizeReached);
                }
            }
            epoch if epoch > 0 => {
                let Some(member) = known else {
                    return Err(ShareGroupError::UnknownMemberId);
                };
                if member.member_epoch != epoch {
                    return Err(ShareGroupError::FencedMemberEpoch);
                }
            }
            _ => return Err(InvalidRequest("MemberEpoch is invalid.")),
        }

        // The member's metadata; a subscription change bumps the epoch.
        let member_id = request.member_id.clone();
        let old = self
            .state
            .members
            .get(&member_id)
            .map(|m| m.metadata.clone());
        let mut updated = old.clone().unwrap_or_default();
        if let Some(rack) = &request.rack_id {
            updated.rack_id = Some(rack.clone());
        }
        if let Some(names) = &request.subscribed_topic_names {
            updated.subscribed_topic_names = names.iter().cloned().collect();
        }
        updated.client_id.clone_from(&request.client_id);
        updated.client_host.clone_from(&request.client_host);
        if old.as_ref() != Some(&updated) {
            let bump = old
                .as_ref()
                .is_none_or(|o| o.subscribed_topic_names != updated.subscribed_topic_names);
            self.append(ShareRecord::MemberMetadata {
                member_id: member_id.clone(),
                metadata: updated,
            });
            if bump {
                self.refresh_subscription(topics);
                self.bump_group_epoch();
            }
        }
        if self.state.group_epoch > self.state.assignment_epoch {
            self.compute_target();
        }
        // No reconciliation: the member takes its target at once.
        let target = self
            .state
            .target
            .get(&member_id)
            .cloned()
            .unwrap_or_default();
        let member = &self.state.members[&member_id];
        let changed =
            member.member_epoch != self.state.assignment_epoch || member.assignment != target;
        if changed {
            self.append(ShareRecord::CurrentMemberAssignment {
                member_id: member_id.clone(),
                member_epoch: self.state.assignment_epoch,
                assignment: target,
            });
        }
        self.schedule_session(&member_id, now_ms);
        let member = &self.state.members[&member_id];
        Ok(ShareHeartbeatResponse {
            member_id,
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            assignment: (changed || request.member_epoch == 0).then(|| member.assignment.clone()),
        })
    }

    fn remove_member(&mut self, member_id: &str, topics: &dyn TopicLookup) {
        self.append(ShareRecord::CurrentMemberAssignmentTombstone {
            member_id: member_id.to_owned(),
        });
        self.append(ShareRecord::TargetAssignmentMemberTombstone {
            member_id: member_id.to_owned(),
        });
        self.append(ShareRecord::MemberMetadataTombstone {
            member_id: member_id.to_owned(),
        });
        self.sessions.remove(member_id);
        self.out.ended.push(member_id.to_owned());
        self.refresh_subscription(topics);
        self.bump_group_epoch();
    }

    /// Recomputes the subscribed topics' metadata; writes it and returns
    /// true if it changed.
    fn refresh_subscription(&mut self, topics: &dyn TopicLookup) -> bool {
        let names: BTreeSet<&String> = self
            .state
            .members
            .values()
            .flat_map(|m| m.metadata.subscribed_topic_names.iter())
            .collect();
        let subscription: BTreeMap<String, TopicMetadata> = names
            .into_iter()
            .filter_map(|name| {
                topics.topic(name).map(|topic| {
                    (
                        name.clone(),
                        TopicMetadata {
                            id: topic.id,
                            name: name.clone(),
                            partitions: topic.partitions,
                        },
                    )
                })
            })
            .collect();
        if subscription == self.state.subscription {
            return false;
        }
        // First: replaying the subscription would already count its topics.
        let mut state_topics = self.state.state_topics.clone();
        state_topics.extend(subscription.iter().map(|(n, t)| (n.clone(), t.clone())));
        self.write_state_topics(state_topics);
        self.append(ShareRecord::PartitionMetadata {
            topics: subscription.into_values().collect(),
        });
        true
    }

    fn bump_group_epoch(&mut self) {
        self.append(ShareRecord::GroupMetadata {
            epoch: self.state.group_epoch + 1,
        });
    }

    fn compute_target(&mut self) {
        let target = simple_assignment(&self.state.members, &self.state.subscription);
        for (member_id, assignment) in target {
            if self.state.target.get(&member_id) != Some(&assignment) {
                self.append(ShareRecord::TargetAssignmentMember {
                    member_id,
                    assignment,
                });
            }
        }
        self.append(ShareRecord::TargetAssignmentMetadata {
            assignment_epoch: self.state.group_epoch,
        });
    }

    fn schedule_session(&mut self, member_id: &str, now_ms: u64) {
        let at = now_ms + u64::try_from(self.config.session_timeout_ms).unwrap_or(0);
        self.sessions.insert(member_id.to_owned(), at);
        self.out.sessions.push((member_id.to_owned(), at));
    }

    fn append(&mut self, record: ShareRecord) {
        self.state.replay(&record);
        self.out.records.push(record);
    }
}

/// Kafka's simple assignor for share groups: each subscribed topic's
/// partitions are spread over the members subscribed to it, each partition
/// to one member while there are at least as many partitions as members,
/// and shared (every member still gets one) when there are more members.
pub fn simple_assignment(
    members: &BTreeMap<String, ShareMember>,
    subscription: &BTreeMap<String, TopicMetadata>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|id| (id.clone(), Assignment::new()))
        .collect();
    for (name, topic) in subscription {
        let subscribed: Vec<&String> = members
            .values()
            .filter(|m| m.metadata.subscribed_topic_names.contains(name))
            .map(|m| &m.member_id)
            .collect();
        let (count, partitions) = (subscribed.len(), topic.partitions.max(0) as usize);
        if count == 0 || partitions == 0 {
            continue;
        }
        // Start each topic at a different member, so that many one-partition
        // topics do not all land on the first member.
        let offset = (topic.id.as_u128() % count as u128) as usize;
        if partitions >= count {
            for partition in 0..partitions {
                let member = subscribed[(partition + offset) % count];
                out.get_mut(member)
                    .expect("a member")
                    .entry(topic.id)
                    .or_default()
                    .insert(partition as i32);
            }
        } else {
            for (index, member) in subscribed.iter().enumerate() {
                let partition = ((index + offset) % partitions) as i32;
                out.get_mut(*member)
                    .expect("a member")
                    .entry(topic.id)
                    .or_default()
                    .insert(partition);
            }
        }
    }
    out
}
