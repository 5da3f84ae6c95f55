//! The ConsumerGroupHeartbeat protocol of one group (Kafka's
//! GroupMetadataManager.consumerGroupHeartbeat and its timers), as a pure
//! state machine: events in, [`Output`] out.
//!
//! Every change goes through a record: the engine validates a request without
//! touching anything, then emits records one at a time, applying each with the
//! same [`GroupState::replay`] a loading coordinator uses. What the engine
//! computes next reads the state those records made, so replaying the emitted
//! records rebuilds exactly the same group.

use std::collections::BTreeMap;

use base64::Engine as _;
use uuid::Uuid;

use super::assignor::ServerAssignor;
use super::command::{HeartbeatResponse, Output, TimerCommand, TimerKey};
use super::config::ConsumerGroupConfig;
use super::describe::{ConsumerGroupState, GroupDescription, MemberDescription};
use super::error::ConsumerGroupError;
use super::event::{Event, HeartbeatRequest};
use super::member::{Member, MemberMetadata};
use super::reconciliation::{reconcile, CurrentAssignment, MemberState, Target};
use super::record::Record;
use super::state::{GroupState, ReplayError};
use super::target::{build_target_assignment, group_spec, subscription_metadata};
use super::topics::{is_subset, Assignment, TopicLookup};

/// ConsumerGroupHeartbeat's member epoch for a member leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// ConsumerGroupHeartbeat's member epoch for a static member leaving for a
/// while: it keeps its assignment until its session times out.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// One consumer group (KIP-848 protocol).
///
/// The engine is per group, like the classic [`GroupEngine`](crate::classic::GroupEngine):
/// a group's records live in one `__consumer_offsets` partition and its
/// requests are serialized by that partition's coordinator, so there is no
/// state shared between groups that an engine over many groups would have to
/// keep consistent. What groups share, the cluster's topics, is passed in as a
/// [`TopicLookup`] with each event rather than copied into every group.
///
/// Drive it with [`handle`](Self::handle); rebuild it on another coordinator
/// with [`replay`](Self::replay) of the group's records, then
/// [`on_loaded`](Self::on_loaded).
#[derive(Debug, Clone)]
pub struct ConsumerGroupEngine {
    pub(super) group_id: String,
    pub(super) config: ConsumerGroupConfig,
    pub(super) state: GroupState,
    /// Member id → when its session expires. Not persisted: a loaded group
    /// gives every member a full session (see [`on_loaded`](Self::on_loaded)).
    pub(super) sessions: BTreeMap<String, u64>,
    /// Member id → (deadline, epoch) of its pending revocation.
    pub(super) rebalances: BTreeMap<String, (u64, i32)>,
    /// Classic member id → by when it must rejoin (JoinGroup) after it was
    /// told to, and by when it must SyncGroup after joining.
    pub(super) classic_joins: BTreeMap<String, u64>,
    pub(super) classic_syncs: BTreeMap<String, u64>,
    /// What the event being handled produced so far.
    pub(super) out: Output,
}

/// How a heartbeat that passed validation relates to the group's members.
enum Joining {
    /// A member the group has, heartbeating or rejoining.
    Existing,
    /// A member the group does not have yet.
    New,
    /// A static member rejoining under a new member id, replacing the member
    /// with this id that held its instance id (and left with epoch -2).
    Replacing(String),
}

/// Kafka's textual form of a Uuid: URL-safe base64 without padding.
pub(super) fn kafka_uuid(uuid: Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid.as_bytes())
}

pub(super) fn timeout_ms(timeout: i32) -> u64 {
    u64::try_from(timeout).unwrap_or(0)
}

impl ConsumerGroupEngine {
    /// A group that does not exist yet: the first heartbeat with epoch 0
    /// creates it, and replaying records loads it.
    pub fn new(group_id: impl Into<String>, config: ConsumerGroupConfig) -> Self {
        Self {
            group_id: group_id.into(),
            config,
            state: GroupState::default(),
            sessions: BTreeMap::new(),
            rebalances: BTreeMap::new(),
            classic_joins: BTreeMap::new(),
            classic_syncs: BTreeMap::new(),
            out: Output::default(),
        }
    }

    /// Applies one record read back from `__consumer_offsets` (loading the
    /// group on a new coordinator). Records are replayed in log order; when
    /// the log is loaded, call [`on_loaded`](Self::on_loaded).
    pub fn replay(&mut self, record: &Record) -> Result<(), ReplayError> {
        self.state.replay(record)
    }

    /// Arms the timers of a freshly loaded group: a full session for every
    /// member and the rebalance timeout of members that must revoke
    /// partitions (as Kafka's onLoaded). Feed
    /// [`Event::MetadataChanged`] next, in case topics changed meanwhile.
    pub fn on_loaded(&mut self, now_ms: u64) -> Output {
        self.sessions.clear();
        self.rebalances.clear();
        let members: Vec<(String, CurrentAssignment, i32)> = self
            .state
            .members
            .values()
            .map(|m| {
                (
                    m.member_id.clone(),
                    m.current.clone(),
                    m.metadata.rebalance_timeout_ms,
                )
            })
            .collect();
        for (member_id, current, rebalance_timeout_ms) in members {
            self.schedule_session(&member_id, now_ms);
            if current.state == MemberState::UnrevokedPartitions {
                self.schedule_rebalance(
                    &member_id,
                    now_ms,
                    current.member_epoch,
                    rebalance_timeout_ms,
                );
            }
        }
        std::mem::take(&mut self.out)
    }

    /// Handles one event. The result's records are already applied to the
    /// engine; see [`Output`] for how to execute it.
    pub fn handle(&mut self, event: Event, topics: &dyn TopicLookup) -> Output {
        match event {
            Event::Heartbeat {
                now_ms,
                request,
                fresh_member_id,
            } => {
                let response = self.on_heartbeat(now_ms, &request, fresh_member_id, topics);
                if response.is_err() {
                    debug_assert!(
                        self.out.records.is_empty(),
                        "a refused request changes nothing"
                    );
                }
                self.out.response = Some(response);
            }
            Event::Timer { now_ms, key } => self.on_timer(now_ms, &key, topics),
            Event::MetadataChanged { .. } => self.on_metadata_changed(topics),
        }
        std::mem::take(&mut self.out)
    }

    /// The replayed state, for tests comparing engines.
    #[cfg(test)]
    pub(super) fn persisted(&self) -> &GroupState {
        &self.state
    }

    // ---- views for the coordinator ----

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// New settings (the group's configs changed): they apply from the next
    /// event on, to timers armed from then on.
    pub fn set_config(&mut self, config: ConsumerGroupConfig) {
        self.config = config;
    }

    pub fn config(&self) -> &ConsumerGroupConfig {
        &self.config
    }

    /// Whether the group exists: created by a first heartbeat or loaded.
    pub fn exists(&self) -> bool {
        self.state.exists
    }

    pub fn group_epoch(&self) -> i32 {
        self.state.group_epoch
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.state.assignment_epoch
    }

    /// The group's state, derived from its members and epochs as Kafka does.
    pub fn state(&self) -> ConsumerGroupState {
        if self.state.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.state.group_epoch > self.state.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .state
            .members
            .values()
            .all(|m| m.current.is_reconciled_to(self.state.assignment_epoch))
        {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// The members, by member id.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.state.members.values()
    }

    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.state.members.get(member_id)
    }

    /// The member's target assignment, if it has one.
    pub fn target_assignment(&self, member_id: &str) -> Option<&Assignment> {
        self.state.target.get(member_id)
    }

    /// The names of the topics the group subscribes to (that existed when
    /// last checked): the coordinator can index groups by topic to send
    /// [`Event::MetadataChanged`] only to those a change concerns.
    pub fn subscribed_topic_names(&self) -> impl Iterator<Item = &str> {
        self.state.subscription.keys().map(String::as_str)
    }

    /// The assignor the next target assignment will use: the one most
    /// members ask for (ties go to the earlier in `group.consumer.assignors`),
    /// else the default.
    pub fn preferred_assignor(&self) -> ServerAssignor {
        let mut votes: BTreeMap<ServerAssignor, usize> = BTreeMap::new();
        for member in self.state.members.values() {
            if let Some(assignor) = member
                .metadata
                .server_assignor
                .as_deref()
                .and_then(|name| self.config.assignor(name))
            {
                *votes.entry(assignor).or_default() += 1;
            }
        }
        let mut best: Option<(ServerAssignor, usize)> = None;
        for assignor in &self.config.assignors {
            if let Some(&count) = votes.get(assignor) {
                if best.is_none_or(|(_, most)| count > most) {
                    best = Some((*assignor, count));
                }
            }
        }
        best.map_or_else(|| self.config.default_assignor(), |(a, _)| a)
    }

    /// ConsumerGroupDescribe's view of the group.
    pub fn describe(&self) -> GroupDescription {
        let empty = Assignment::new();
        GroupDescription {
            group_id: self.group_id.clone(),
            state: self.state(),
            group_epoch: self.state.group_epoch,
            assignment_epoch: self.state.assignment_epoch,
            assignor: self.preferred_assignor(),
            members: self
                .state
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    instance_id: m.metadata.instance_id.clone(),
                    rack_id: m.metadata.rack_id.clone(),
                    member_epoch: m.current.member_epoch,
                    state: m.current.state,
                    client_id: m.metadata.client_id.clone(),
                    client_host: m.metadata.client_host.clone(),
                    subscribed_topic_names: m
                        .metadata
                        .subscribed_topic_names
                        .iter()
                        .cloned()
                        .collect(),
                    subscribed_topic_regex: m.metadata.subscribed_topic_regex.clone(),
                    assignment: m.current.assigned.clone(),
                    target_assignment: self
                        .state
                        .target
                        .get(&m.member_id)
                        .unwrap_or(&empty)
                        .clone(),
                    classic: m.is_classic(),
                })
                .collect(),
        }
    }

    /// Checks an OffsetCommit against the group (Kafka's
    /// ConsumerGroup.validateOffsetCommit): a negative epoch (admin client or
    /// a consumer without group management) may commit only while the group is
    /// empty; otherwise the member must exist (UNKNOWN_MEMBER_ID). A classic
    /// member sends its generation (ILLEGAL_GENERATION); a consumer-protocol
    /// member uses v9+ (UNSUPPORTED_VERSION) and its current epoch
    /// (STALE_MEMBER_EPOCH).
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Result<(), ConsumerGroupError> {
        self.validate_commit(member_id, member_epoch, Commit::Offsets { api_version })
    }

    /// Checks a TxnOffsetCommit against the group, as
    /// [`validate_offset_commit`](Self::validate_offset_commit) at any
    /// version, the generation field carrying the member epoch (KIP-848);
    /// a request that names no member, generation or instance (before v3)
    /// is taken as it is.
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        group_instance_id: Option<&str>,
    ) -> Result<(), ConsumerGroupError> {
        self.validate_commit(
            member_id,
            member_epoch,
            Commit::Transactional { group_instance_id },
        )
    }

    fn validate_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        commit: Commit<'_>,
    ) -> Result<(), ConsumerGroupError> {
        if member_epoch < 0 && self.state.members.is_empty() {
            return Ok(());
        }
        let names_nobody = member_epoch == -1 && member_id.is_empty();
        if let (
            Commit::Transactional {
                group_instance_id: None,
            },
            true,
        ) = (commit, names_nobody)
        {
            return Ok(());
        }
        let member = self
            .state
            .members
            .get(member_id)
            .ok_or(ConsumerGroupError::UnknownMemberId)?;
        if let Commit::Offsets { api_version } = commit {
            if api_version < 9 && !member.is_classic() {
                return Err(ConsumerGroupError::UnsupportedVersion);
            }
        }
        if member.current.member_epoch == member_epoch {
            Ok(())
        } else if member.is_classic() {
            Err(ConsumerGroupError::IllegalGeneration)
        } else {
            Err(ConsumerGroupError::StaleMemberEpoch)
        }
    }

    /// Checks an OffsetFetch that names a member (v9+, Kafka's
    /// validateOffsetFetch): without a member id and with a negative epoch
    /// anyone may fetch; otherwise the member must exist with that epoch.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ConsumerGroupError> {
        match member_id {
            None if member_epoch < 0 => Ok(()),
            _ => self.validate_member_epoch(member_id.unwrap_or_default(), member_epoch),
        }
    }

    /// The member exists (UNKNOWN_MEMBER_ID) at exactly `member_epoch`
    /// (STALE_MEMBER_EPOCH).
    fn validate_member_epoch(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ConsumerGroupError> {
        let member = self
            .state
            .members
            .get(member_id)
            .ok_or(ConsumerGroupError::UnknownMemberId)?;
        if member.current.member_epoch != member_epoch {
            return Err(ConsumerGroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// The records that delete the group (DeleteGroups), applied to the
    /// engine; refused with NON_EMPTY_GROUP while it has members. The
    /// coordinator deletes the group's offsets itself.
    pub fn delete(&mut self) -> Result<Vec<Record>, ConsumerGroupError> {
        if !self.state.members.is_empty() {
            return Err(ConsumerGroupError::NonEmptyGroup);
        }
        let stale_targets: Vec<String> = self.state.target.keys().cloned().collect();
        for member_id in stale_targets {
            self.append(Record::TargetAssignmentMemberTombstone { member_id });
        }
        self.append(Record::TargetAssignmentMetadataTombstone);
        self.append(Record::PartitionMetadataTombstone);
        self.append(Record::GroupMetadataTombstone);
        self.sessions.clear();
        self.rebalances.clear();
        Ok(std::mem::take(&mut self.out).records)
    }

    // ---- heartbeat ----

    fn on_heartbeat(
        &mut self,
        now_ms: u64,
        request: &HeartbeatRequest,
        fresh_member_id: Uuid,
        topics: &dyn TopicLookup,
    ) -> Result<HeartbeatResponse, ConsumerGroupError> {
        self.validate_request(request)?;
        if matches!(
            request.member_epoch,
            LEAVE_GROUP_MEMBER_EPOCH | LEAVE_GROUP_STATIC_MEMBER_EPOCH
        ) {
            return self.on_leave(request, topics);
        }
        if request.member_epoch != 0 && !self.state.exists {
            return Err(ConsumerGroupError::GroupIdNotFound);
        }
        if self.state.members.len() >= self.config.max_size
            && (request.member_id.is_empty()
                || !self.state.members.contains_key(&request.member_id))
        {
            return Err(ConsumerGroupError::GroupMaxSizeReached);
        }
        let member_id = if request.member_id.is_empty() {
            kafka_uuid(fresh_member_id)
        } else {
            request.member_id.clone()
        };
        let joining = self.resolve_member(&member_id, request)?;

        // Everything below succeeds: from here on, records are emitted.
        if let Joining::Replacing(old_member_id) = &joining {
            self.replace_static_member(old_member_id, &member_id);
        }

        // 1. The member's metadata and subscription; a subscription change
        //    bumps the group epoch.
        let default = MemberMetadata::default();
        let old = self
            .state
            .members
            .get(&member_id)
            .map_or(&default, |m| &m.metadata);
        let updated = updated_metadata(old, request)
            .or_else(|| matches!(joining, Joining::New).then(|| MemberMetadata::clone(old)));
        if let Some(updated) = updated {
            let subscription_changed = !updated.same_subscription(old);
            self.write_member_metadata(&member_id, updated, subscription_changed, topics);
        }

        // 2. A new target assignment when the group epoch moved past it.
        self.update_target_if_behind(topics);

        // 3. Reconcile the member towards its target.
        let assignment_changed =
            self.reconcile_member(now_ms, &member_id, request.owned_partitions.as_ref());

        self.schedule_session(&member_id, now_ms);
        let member = &self.state.members[&member_id];
        Ok(HeartbeatResponse {
            member_id: member_id.clone(),
            member_epoch: member.current.member_epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            assignment: (request.is_full() || assignment_changed)
                .then(|| member.current.assigned.clone()),
        })
    }

    /// Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
    fn validate_request(&self, request: &HeartbeatRequest) -> Result<(), ConsumerGroupError> {
        use ConsumerGroupError::InvalidRequest;
        if request.instance_id.as_deref() == Some("") {
            return Err(InvalidRequest("InstanceId can't be empty."));
        }
        if request.rack_id.as_deref() == Some("") {
            return Err(InvalidRequest("RackId can't be empty."));
        }
        match request.member_epoch {
            epoch if epoch > 0 || epoch == LEAVE_GROUP_MEMBER_EPOCH => {
                if request.member_id.is_empty() {
                    return Err(InvalidRequest("MemberId can't be empty."));
                }
            }
            0 => {
                if request.rebalance_timeout_ms == -1 {
                    return Err(InvalidRequest(
                        "RebalanceTimeoutMs must be provided in first request.",
                    ));
                }
                if request
                    .owned_partitions
                    .as_ref()
                    .is_none_or(|owned| owned.values().any(|p| !p.is_empty()))
                {
                    return Err(InvalidRequest(
                        "TopicPartitions must be empty when (re-)joining.",
                    ));
                }
                let has_names = request
                    .subscribed_topic_names
                    .as_ref()
                    .is_some_and(|names| !names.is_empty());
                let has_regex = request
                    .subscribed_topic_regex
                    .as_ref()
                    .is_some_and(|regex| !regex.is_empty());
                if !has_names && !has_regex {
                    return Err(InvalidRequest(
                        "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                    ));
                }
            }
            LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
                if request.member_id.is_empty() {
                    return Err(InvalidRequest("MemberId can't be empty."));
                }
                if request.instance_id.is_none() {
                    return Err(InvalidRequest("InstanceId can't be null."));
                }
            }
            _ => return Err(InvalidRequest("MemberEpoch is invalid.")),
        }
        if let Some(name) = &request.server_assignor {
            if self.config.assignor(name).is_none() {
                return Err(ConsumerGroupError::UnsupportedAssignor);
            }
        }
        Ok(())
    }

    /// Who is heartbeating, checking its epoch and instance id (Kafka's
    /// getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember), without
    /// changing anything.
    fn resolve_member(
        &self,
        member_id: &str,
        request: &HeartbeatRequest,
    ) -> Result<Joining, ConsumerGroupError> {
        let joining = request.member_epoch == 0;
        let owned = request.owned_partitions.as_ref();
        let (joining, state) = match &request.instance_id {
            None => match self.state.members.get(member_id) {
                Some(member) => {
                    check_member_epoch(member, request.member_epoch, owned)?;
                    (Joining::Existing, member.current.state)
                }
                None if joining => (Joining::New, MemberState::Stable),
                None => return Err(ConsumerGroupError::UnknownMemberId),
            },
            Some(instance_id) => match self.state.static_member(instance_id) {
                None if joining => match self.state.members.get(member_id) {
                    Some(member) => (Joining::Existing, member.current.state),
                    None => (Joining::New, MemberState::Stable),
                },
                None => return Err(ConsumerGroupError::UnknownMemberId),
                Some(existing) if joining => {
                    if existing.current.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                        return Err(ConsumerGroupError::UnreleasedInstanceId);
                    }
                    (
                        Joining::Replacing(existing.member_id.clone()),
                        existing.current.state,
                    )
                }
                Some(existing) => {
                    if existing.member_id != member_id {
                        return Err(ConsumerGroupError::FencedInstanceId);
                    }
                    check_member_epoch(existing, request.member_epoch, owned)?;
                    (Joining::Existing, existing.current.state)
                }
            },
        };
        // A member persisted in a state this version does not know must
        // rejoin owning nothing (CurrentAssignmentBuilder's UNKNOWN case).
        if state == MemberState::Unknown
            && owned.is_none_or(|owned| owned.values().any(|p| !p.is_empty()))
        {
            return Err(ConsumerGroupError::FencedMemberEpoch);
        }
        Ok(joining)
    }

    /// A static member rejoins under `new_member_id`: the old member goes and
    /// the new one takes its metadata, target and current assignment at
    /// epoch 0, so it keeps its partitions without a rebalance.
    pub(super) fn replace_static_member(&mut self, old_member_id: &str, new_member_id: &str) {
        let old = self.state.members[old_member_id].clone();
        let old_target = self
            .state
            .target
            .get(old_member_id)
            .cloned()
            .unwrap_or_default();
        self.remove_member(old_member_id);
        self.append(Record::MemberMetadata {
            member_id: new_member_id.to_owned(),
            metadata: old.metadata,
        });
        self.append(Record::TargetAssignmentMember {
            member_id: new_member_id.to_owned(),
            assignment: old_target,
        });
        self.append(Record::CurrentMemberAssignment {
            member_id: new_member_id.to_owned(),
            assignment: CurrentAssignment {
                member_epoch: 0,
                previous_member_epoch: 0,
                ..old.current
            },
        });
    }

    /// Writes a member's new metadata; a changed subscription changes the
    /// group's subscribed topics and bumps the group epoch.
    pub(super) fn write_member_metadata(
        &mut self,
        member_id: &str,
        metadata: MemberMetadata,
        subscription_changed: bool,
        topics: &dyn TopicLookup,
    ) {
        self.append(Record::MemberMetadata {
            member_id: member_id.to_owned(),
            metadata,
        });
        if subscription_changed {
            self.refresh_subscription(topics);
            self.bump_group_epoch();
        }
    }

    /// A new target assignment when the group epoch moved past it.
    pub(super) fn update_target_if_behind(&mut self, topics: &dyn TopicLookup) {
        if self.state.group_epoch > self.state.assignment_epoch {
            self.compute_target_assignment(topics);
        }
    }

    /// Moves the member one reconciliation step towards its target if it is
    /// not there; returns whether its assigned partitions changed.
    pub(super) fn reconcile_member(
        &mut self,
        now_ms: u64,
        member_id: &str,
        owned: Option<&Assignment>,
    ) -> bool {
        let epoch = self.state.assignment_epoch;
        let member = &self.state.members[member_id];
        if member.current.is_reconciled_to(epoch) {
            return false;
        }
        let empty = Assignment::new();
        let target = Target {
            epoch,
            assignment: self.state.target.get(member_id).unwrap_or(&empty),
        };
        let state = &self.state;
        let next = reconcile(&member.current, target, owned, |topic, partition| {
            state.is_owned(topic, partition)
        })
        .expect("resolve_member refused members that cannot reconcile");
        if next == member.current {
            return false;
        }
        let changed = next.assigned != member.current.assigned;
        let rebalance_timeout_ms = member.metadata.rebalance_timeout_ms;
        let unrevoked =
            (next.state == MemberState::UnrevokedPartitions).then_some(next.member_epoch);
        self.append(Record::CurrentMemberAssignment {
            member_id: member_id.to_owned(),
            assignment: next,
        });
        match unrevoked {
            Some(epoch) => self.schedule_rebalance(member_id, now_ms, epoch, rebalance_timeout_ms),
            None => self.cancel_rebalance(member_id),
        }
        changed
    }

    // ---- leaving ----

    fn on_leave(
        &mut self,
        request: &HeartbeatRequest,
        topics: &dyn TopicLookup,
    ) -> Result<HeartbeatResponse, ConsumerGroupError> {
        if !self.state.exists {
            return Err(ConsumerGroupError::GroupIdNotFound);
        }
        let member_id = match &request.instance_id {
            None => {
                if !self.state.members.contains_key(&request.member_id) {
                    return Err(ConsumerGroupError::UnknownMemberId);
                }
                request.member_id.clone()
            }
            Some(instance_id) => {
                let member = self
                    .state
                    .static_member(instance_id)
                    .ok_or(ConsumerGroupError::UnknownMemberId)?;
                if member.member_id != request.member_id {
                    return Err(ConsumerGroupError::FencedInstanceId);
                }
                if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    // Away for a while: the member keeps its assignment (and
                    // its session timer) but gives up what it was revoking.
                    let assignment = CurrentAssignment {
                        member_epoch: LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                        pending_revocation: Assignment::new(),
                        ..member.current.clone()
                    };
                    let member_id = member.member_id.clone();
                    self.append(Record::CurrentMemberAssignment {
                        member_id: member_id.clone(),
                        assignment,
                    });
                    return Ok(HeartbeatResponse {
                        member_id,
                        member_epoch: LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                        heartbeat_interval_ms: 0,
                        assignment: None,
                    });
                }
                member.member_id.clone()
            }
        };
        self.fence_member(&member_id, topics);
        Ok(HeartbeatResponse {
            member_id,
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Removes a member that left or was fenced: its partitions are free, the
    /// subscription may shrink, the group epoch moves.
    pub(super) fn fence_member(&mut self, member_id: &str, topics: &dyn TopicLookup) {
        if self.may_downgrade_without(member_id) {
            self.downgrade_without(member_id, topics);
            return;
        }
        self.remove_member(member_id);
        self.refresh_subscription(topics);
        self.bump_group_epoch();
    }

    /// The tombstones of a member, in the order replay expects, and its timers.
    pub(super) fn remove_member(&mut self, member_id: &str) {
        self.append(Record::CurrentMemberAssignmentTombstone {
            member_id: member_id.to_owned(),
        });
        self.append(Record::TargetAssignmentMemberTombstone {
            member_id: member_id.to_owned(),
        });
        self.append(Record::MemberMetadataTombstone {
            member_id: member_id.to_owned(),
        });
        if self.sessions.remove(member_id).is_some() {
            self.out.timers.push(TimerCommand::Cancel {
                key: TimerKey::Session {
                    member_id: member_id.to_owned(),
                },
            });
        }
        self.cancel_rebalance(member_id);
        self.cancel_classic_timers(member_id);
    }

    // ---- timers and metadata ----

    fn on_timer(&mut self, now_ms: u64, key: &TimerKey, topics: &dyn TopicLookup) {
        match key {
            TimerKey::Session { member_id } => {
                let expired = self
                    .sessions
                    .get(member_id)
                    .is_some_and(|deadline| now_ms >= *deadline);
                if expired && self.state.members.contains_key(member_id) {
                    self.fence_member(member_id, topics);
                }
            }
            TimerKey::ClassicJoin { member_id } | TimerKey::ClassicSync { member_id } => {
                let deadlines = match key {
                    TimerKey::ClassicJoin { .. } => &mut self.classic_joins,
                    _ => &mut self.classic_syncs,
                };
                if deadlines.get(member_id).is_some_and(|at| now_ms >= *at) {
                    deadlines.remove(member_id);
                    if self.state.members.contains_key(member_id) {
                        self.fence_member(member_id, topics);
                    }
                }
            }
            TimerKey::Rebalance { member_id } => {
                let Some(&(deadline, epoch)) = self.rebalances.get(member_id) else {
                    return;
                };
                if now_ms < deadline {
                    return;
                }
                self.rebalances.remove(member_id);
                let still_revoking = self
                    .state
                    .members
                    .get(member_id)
                    .is_some_and(|m| m.current.member_epoch == epoch);
                if still_revoking {
                    self.fence_member(member_id, topics);
                }
            }
        }
    }

    fn on_metadata_changed(&mut self, topics: &dyn TopicLookup) {
        if self.state.members.is_empty() {
            return;
        }
        if self.refresh_subscription(topics) {
            self.bump_group_epoch();
        }
    }

    // ---- group-level steps ----

    /// Recomputes the subscription metadata; writes it and returns true if
    /// it changed.
    pub(super) fn refresh_subscription(&mut self, topics: &dyn TopicLookup) -> bool {
        let subscription = subscription_metadata(self.state.members.values(), topics);
        if subscription == self.state.subscription {
            return false;
        }
        self.append(Record::PartitionMetadata {
            topics: subscription.into_values().collect(),
        });
        true
    }

    pub(super) fn bump_group_epoch(&mut self) {
        self.append(Record::GroupMetadata {
            epoch: self.state.group_epoch + 1,
        });
    }

    pub(super) fn compute_target_assignment(&mut self, topics: &dyn TopicLookup) {
        let assignor = self.preferred_assignor();
        let spec = group_spec(
            self.state.members.values(),
            &self.state.subscription,
            &self.state.target,
            topics,
        );
        let result =
            build_target_assignment(assignor, self.state.group_epoch, &spec, &self.state.target);
        for record in result.records {
            self.append(record);
        }
    }

    /// Emits a record and applies it.
    pub(super) fn append(&mut self, record: Record) {
        if let Err(e) = self.state.replay(&record) {
            // The engine only emits records that fit its own state.
            panic!("consumer group {}: {e}", self.group_id);
        }
        self.out.records.push(record);
    }

    pub(super) fn schedule_session(&mut self, member_id: &str, now_ms: u64) {
        // A classic member keeps the session timeout it joined with.
        let session_timeout_ms = self
            .state
            .members
            .get(member_id)
            .and_then(|m| m.metadata.classic.as_ref())
            .map_or(self.config.session_timeout_ms, |c| c.session_timeout_ms);
        let at_ms = now_ms + timeout_ms(session_timeout_ms);
        self.sessions.insert(member_id.to_owned(), at_ms);
        self.out.timers.push(TimerCommand::Schedule {
            key: TimerKey::Session {
                member_id: member_id.to_owned(),
            },
            at_ms,
        });
    }

    pub(super) fn schedule_rebalance(
        &mut self,
        member_id: &str,
        now_ms: u64,
        epoch: i32,
        timeout: i32,
    ) {
        let at_ms = now_ms + timeout_ms(timeout);
        self.rebalances.insert(member_id.to_owned(), (at_ms, epoch));
        self.out.timers.push(TimerCommand::Schedule {
            key: TimerKey::Rebalance {
                member_id: member_id.to_owned(),
            },
            at_ms,
        });
    }

    /// Disarms the member's rebalance timeout, if armed.
    pub(super) fn cancel_rebalance(&mut self, member_id: &str) {
        if self.rebalances.remove(member_id).is_some() {
            self.out.timers.push(TimerCommand::Cancel {
                key: TimerKey::Rebalance {
                    member_id: member_id.to_owned(),
                },
            });
        }
    }
}

/// Kafka's throwIfConsumerGroupMemberEpochIsInvalid: epoch 0 is a member
/// rejoining after it was fenced, owning nothing (accepted, as Kafka does
/// since KAFKA-19233); an epoch ahead of the member's is fenced; one behind is
/// accepted only if it is the previous epoch and the member owns no more than
/// it is assigned (its response with the bump was lost).
fn check_member_epoch(
    member: &Member,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), ConsumerGroupError> {
    let current = &member.current;
    if received == 0 {
        return Ok(());
    }
    if received > current.member_epoch {
        return Err(ConsumerGroupError::FencedMemberEpoch);
    }
    if received < current.member_epoch
        && (received != current.previous_member_epoch
            || !owned.is_some_and(|owned| is_subset(owned, &current.assigned)))
    {
        return Err(ConsumerGroupError::FencedMemberEpoch);
    }
    Ok(())
}

/// The member's metadata after `request`, or `None` if the request changes
/// nothing (the common heartbeat, which then allocates nothing).
fn updated_metadata(old: &MemberMetadata, request: &HeartbeatRequest) -> Option<MemberMetadata> {
    let regex = request
        .subscribed_topic_regex
        .as_ref()
        .map(|r| (!r.is_empty()).then(|| r.clone()));
    let changes = request
        .instance_id
        .as_ref()
        .is_some_and(|id| old.instance_id.as_ref() != Some(id))
        || request
            .rack_id
            .as_ref()
            .is_some_and(|rack| old.rack_id.as_ref() != Some(rack))
        || (request.rebalance_timeout_ms != -1
            && request.rebalance_timeout_ms != old.rebalance_timeout_ms)
        || request
            .server_assignor
            .as_ref()
            .is_some_and(|a| old.server_assignor.as_ref() != Some(a))
        || request
            .subscribed_topic_names
            .as_ref()
            .is_some_and(|names| {
                names.len() != old.subscribed_topic_names.len()
                    || names
                        .iter()
                        .any(|n| !old.subscribed_topic_names.contains(n))
            })
        || regex
            .as_ref()
            .is_some_and(|regex| *regex != old.subscribed_topic_regex)
        || request.client_id != old.client_id
        || request.client_host != old.client_host;
    if !changes {
        return None;
    }
    let mut updated = old.clone();
    if let Some(id) = &request.instance_id {
        updated.instance_id = Some(id.clone());
    }
    if let Some(rack) = &request.rack_id {
        updated.rack_id = Some(rack.clone());
    }
    if request.rebalance_timeout_ms != -1 {
        updated.rebalance_timeout_ms = request.rebalance_timeout_ms;
    }
    if let Some(assignor) = &request.server_assignor {
        updated.server_assignor = Some(assignor.clone());
    }
    if let Some(names) = &request.subscribed_topic_names {
        updated.subscribed_topic_names = names.iter().cloned().collect();
    }
    if let Some(regex) = regex {
        updated.subscribed_topic_regex = regex;
    }
    updated.client_id.clone_from(&request.client_id);
    updated.client_host.clone_from(&request.client_host);
    (updated != *old).then_some(updated)
}

/// Which offset commit [`ConsumerGroupEngine::validate_commit`] checks.
#[derive(Clone, Copy)]
enum Commit<'a> {
    /// OffsetCommit, at this version.
    Offsets { api_version: i16 },
    /// TxnOffsetCommit, naming this static member if any.
    Transactional { group_instance_id: Option<&'a str> },
}
