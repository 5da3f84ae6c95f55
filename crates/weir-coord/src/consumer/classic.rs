//! Classic members of a consumer group (KIP-848's online migration): a
//! consumer that speaks JoinGroup, SyncGroup and Heartbeat in a group whose
//! assignment the broker computes, as Kafka's
//! GroupMetadataManager.classicGroup*ToConsumerGroup do.
//!
//! Such a member reconciles only when it (re)joins: a heartbeat answers
//! REBALANCE_IN_PROGRESS when the group moved on, when the member must
//! revoke partitions, or when partitions it waits for are free; JoinGroup
//! then moves it one reconciliation step with the partitions it says it
//! owns, and SyncGroup hands it its assigned partitions.
//!
//! The group itself moves between the two kinds: a classic group with
//! members becomes a consumer group when a consumer-protocol member joins
//! ([`ConsumerGroupEngine::from_classic`]), and goes back to a classic group
//! when its last consumer-protocol member leaves (`downgrade_without`), as
//! `group.consumer.migration.policy` allows.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    consumer_protocol_assignment, ConsumerProtocolAssignment, ConsumerProtocolSubscription,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::command::{Output, TimerCommand, TimerKey};
use super::config::ConsumerGroupConfig;
use super::engine::{kafka_uuid, timeout_ms, ConsumerGroupEngine};
use super::error::ConsumerGroupError;
use super::member::{ClassicMetadata, ClassicProtocol, MemberMetadata};
use super::reconciliation::{CurrentAssignment, MemberState};
use super::record::Record;
use super::topics::{Assignment, TopicLookup};
use crate::classic::{GroupSnapshot, MemberSnapshot, SyncGroup};

/// The embedded protocol type classic consumers use.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A JoinGroup for a consumer group, as the coordinator decodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicJoin {
    /// Empty for a member that does not have one yet.
    pub member_id: String,
    pub instance_id: Option<String>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<ClassicProtocol>,
    /// JoinGroup v4+: a dynamic member without a member id is given one
    /// (MEMBER_ID_REQUIRED) and must join again with it.
    pub require_known_member_id: bool,
    pub client_id: String,
    pub client_host: String,
}

/// A successful JoinGroup of a classic member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicJoined {
    pub member_id: String,
    /// The member's epoch, which a classic member knows as its generation.
    pub generation_id: i32,
    pub protocol_name: String,
}

/// A successful SyncGroup: the member's partitions, ConsumerProtocolAssignment
/// encoded at the version of its subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicSynced {
    pub assignment: Bytes,
}

/// A classic group as the classic coordinator hands it over for an upgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicGroupImage {
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    /// The protocol the group last chose; members' subscriptions are read
    /// from it.
    pub protocol_name: Option<String>,
    pub members: Vec<ClassicMemberImage>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMemberImage {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocols: Vec<ClassicProtocol>,
    /// Its last assignment, ConsumerProtocolAssignment encoded.
    pub assignment: Bytes,
}

/// A decoded ConsumerProtocolSubscription.
struct Subscription {
    topics: BTreeSet<String>,
    owned: Assignment,
    rack_id: Option<String>,
}

/// Decodes a ConsumerProtocolSubscription (a version, then the body),
/// naming owned partitions by topic id; `None` if it is not one.
fn decode_subscription(metadata: &[u8], topics: &dyn TopicLookup) -> Option<Subscription> {
    let (version, mut body) = versioned(metadata)?;
    let subscription = ConsumerProtocolSubscription::decode(&mut body, version.min(3)).ok()?;
    let mut owned = Assignment::new();
    for owned_topic in subscription.owned_partitions {
        if let Some(topic) = topics.topic(&owned_topic.topic) {
            owned
                .entry(topic.id)
                .or_default()
                .extend(owned_topic.partitions);
        }
    }
    owned.retain(|_, partitions| !partitions.is_empty());
    Some(Subscription {
        topics: subscription.topics.iter().map(|t| t.to_string()).collect(),
        owned,
        rack_id: subscription.rack_id.map(|r| r.to_string()),
    })
}

fn versioned(metadata: &[u8]) -> Option<(i16, Bytes)> {
    if metadata.len() < 2 {
        return None;
    }
    let version = i16::from_be_bytes([metadata[0], metadata[1]]);
    (version >= 0).then(|| (version, Bytes::copy_from_slice(&metadata[2..])))
}

/// Decodes a ConsumerProtocolAssignment, naming partitions by topic id
/// (topics that no longer exist are left out).
fn decode_assignment(bytes: &[u8], topics: &dyn TopicLookup) -> Option<Assignment> {
    if bytes.is_empty() {
        return Some(Assignment::new());
    }
    let (version, mut body) = versioned(bytes)?;
    let decoded = ConsumerProtocolAssignment::decode(&mut body, version.min(3)).ok()?;
    let mut assignment = Assignment::new();
    for assigned in decoded.assigned_partitions {
        if let Some(topic) = topics.topic(&assigned.topic) {
            assignment
                .entry(topic.id)
                .or_default()
                .extend(assigned.partitions);
        }
    }
    assignment.retain(|_, partitions| !partitions.is_empty());
    Some(assignment)
}

/// Encodes `assignment` as a ConsumerProtocolAssignment at the version of
/// `subscription` (the member's ConsumerProtocolSubscription), as Kafka does.
fn encode_assignment(
    assignment: &Assignment,
    subscription: &[u8],
    topics: &dyn TopicLookup,
) -> Bytes {
    let version = versioned(subscription).map_or(0, |(v, _)| v.clamp(0, 3));
    let assigned = assignment
        .iter()
        .filter_map(|(id, partitions)| {
            let name = topics.topic_name(*id)?;
            Some(
                consumer_protocol_assignment::TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_string(name)))
                    .with_partitions(partitions.iter().copied().collect()),
            )
        })
        .collect();
    let message = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned);
    let mut out = BytesMut::new();
    out.extend_from_slice(&version.to_be_bytes());
    message
        .encode(&mut out, version)
        .expect("a ConsumerProtocolAssignment encodes");
    out.freeze()
}

impl From<&crate::classic::Protocol> for ClassicProtocol {
    fn from(protocol: &crate::classic::Protocol) -> Self {
        Self {
            name: protocol.name.clone(),
            metadata: Bytes::from(protocol.metadata.clone()),
        }
    }
}

impl ConsumerGroupEngine {
    /// A consumer group made of the members of a classic group (an online
    /// upgrade): each keeps its last assignment as its target and current
    /// assignment at the classic generation, and its session. Refused
    /// (INCONSISTENT_GROUP_PROTOCOL) when a member's subscription is not the
    /// consumer protocol's. The output's records create the group; write
    /// them in the batch that deletes the classic group.
    pub fn from_classic(
        group_id: impl Into<String>,
        config: ConsumerGroupConfig,
        classic: &ClassicGroupImage,
        topics: &dyn TopicLookup,
        now_ms: u64,
    ) -> Result<(Self, Output), ConsumerGroupError> {
        if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return Err(ConsumerGroupError::InconsistentGroupProtocol);
        }
        let mut engine = Self::new(group_id, config);
        let mut members = Vec::new();
        for member in &classic.members {
            let chosen = member
                .protocols
                .iter()
                .find(|p| Some(&p.name) == classic.protocol_name.as_ref())
                .or_else(|| member.protocols.first())
                .ok_or(ConsumerGroupError::InconsistentGroupProtocol)?;
            let subscription = decode_subscription(&chosen.metadata, topics)
                .ok_or(ConsumerGroupError::InconsistentGroupProtocol)?;
            let assignment = decode_assignment(&member.assignment, topics)
                .ok_or(ConsumerGroupError::InconsistentGroupProtocol)?;
            let metadata = MemberMetadata {
                instance_id: member.instance_id.clone(),
                rack_id: subscription.rack_id,
                client_id: member.client_id.clone(),
                client_host: member.client_host.clone(),
                subscribed_topic_names: subscription.topics,
                subscribed_topic_regex: None,
                rebalance_timeout_ms: member.rebalance_timeout_ms,
                server_assignor: None,
                classic: Some(ClassicMetadata {
                    session_timeout_ms: member.session_timeout_ms,
                    protocols: member.protocols.clone(),
                }),
            };
            members.push((member.member_id.clone(), metadata, assignment));
        }
        let epoch = classic.generation_id;
        for (member_id, metadata, _) in &members {
            engine.append(Record::MemberMetadata {
                member_id: member_id.clone(),
                metadata: metadata.clone(),
            });
        }
        engine.append(Record::GroupMetadata { epoch });
        engine.refresh_subscription(topics);
        for (member_id, _, assignment) in &members {
            engine.append(Record::TargetAssignmentMember {
                member_id: member_id.clone(),
                assignment: assignment.clone(),
            });
        }
        engine.append(Record::TargetAssignmentMetadata {
            assignment_epoch: epoch,
        });
        for (member_id, _, assignment) in members {
            engine.append(Record::CurrentMemberAssignment {
                member_id: member_id.clone(),
                assignment: CurrentAssignment {
                    member_epoch: epoch,
                    previous_member_epoch: epoch,
                    state: MemberState::Stable,
                    assigned: assignment,
                    pending_revocation: Assignment::new(),
                },
            });
            engine.schedule_session(&member_id, now_ms);
        }
        let output = std::mem::take(&mut engine.out);
        Ok((engine, output))
    }

    /// Whether a classic group may become a consumer group: the policy
    /// allows it, the group uses the consumer protocol and fits
    /// `group.consumer.max.size`.
    pub fn may_upgrade(config: &ConsumerGroupConfig, classic: &ClassicGroupImage) -> bool {
        config.migration_policy.upgrades()
            && classic.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
            && classic.members.len() <= config.max_size
    }

    /// JoinGroup of a classic member (Kafka's classicGroupJoinToConsumerGroup).
    pub fn classic_join(
        &mut self,
        now_ms: u64,
        request: &ClassicJoin,
        fresh_member_id: Uuid,
        topics: &dyn TopicLookup,
    ) -> (Result<ClassicJoined, ConsumerGroupError>, Output) {
        let result = self.on_classic_join(now_ms, request, fresh_member_id, topics);
        if result.is_err() {
            debug_assert!(
                self.out.records.is_empty(),
                "a refused join changes nothing"
            );
        }
        (result, std::mem::take(&mut self.out))
    }

    fn on_classic_join(
        &mut self,
        now_ms: u64,
        request: &ClassicJoin,
        fresh_member_id: Uuid,
        topics: &dyn TopicLookup,
    ) -> Result<ClassicJoined, ConsumerGroupError> {
        let unknown = request.member_id.is_empty();
        let member_id = if unknown {
            kafka_uuid(fresh_member_id)
        } else {
            request.member_id.clone()
        };
        let is_member = self.state.members.contains_key(&member_id)
            || request
                .instance_id
                .as_deref()
                .is_some_and(|id| self.state.static_member(id).is_some());
        if !is_member && self.state.members.len() >= self.config.max_size {
            return Err(ConsumerGroupError::GroupMaxSizeReached);
        }
        if !self.supports_classic_protocols(&member_id, &request.protocol_type, &request.protocols)
        {
            return Err(ConsumerGroupError::InconsistentGroupProtocol);
        }
        if unknown && request.require_known_member_id && request.instance_id.is_none() {
            return Err(ConsumerGroupError::MemberIdRequired(member_id));
        }
        let subscription = decode_subscription(&request.protocols[0].metadata, topics)
            .ok_or(ConsumerGroupError::InconsistentGroupProtocol)?;
        // Who joins: a static member that joins without its member id
        // replaces the one holding its instance id, keeping its partitions.
        let replacing = match request
            .instance_id
            .as_deref()
            .and_then(|id| self.state.static_member(id))
        {
            Some(existing) if existing.member_id == member_id => None,
            Some(existing) if unknown => Some(existing.member_id.clone()),
            Some(_) => return Err(ConsumerGroupError::FencedInstanceId),
            None => None,
        };

        // Everything below succeeds.
        if let Some(old_member_id) = &replacing {
            self.replace_static_member(old_member_id, &member_id);
        }
        let old = self
            .state
            .members
            .get(&member_id)
            .map(|m| m.metadata.clone());
        let updated = MemberMetadata {
            instance_id: request.instance_id.clone(),
            rack_id: subscription.rack_id.clone(),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            subscribed_topic_names: subscription.topics.clone(),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            server_assignor: None,
            classic: Some(ClassicMetadata {
                session_timeout_ms: request.session_timeout_ms,
                protocols: request.protocols.clone(),
            }),
        };
        if old.as_ref() != Some(&updated) {
            let subscription_changed = old
                .as_ref()
                .is_none_or(|old| !updated.same_subscription(old));
            self.write_member_metadata(&member_id, updated, subscription_changed, topics);
        }
        self.update_target_if_behind(topics);
        self.reconcile_member(now_ms, &member_id, Some(&subscription.owned));

        let member = &self.state.members[&member_id];
        let joined = ClassicJoined {
            member_id: member_id.clone(),
            generation_id: member.current.member_epoch,
            protocol_name: request.protocols[0].name.clone(),
        };
        self.classic_joins.remove(&member_id);
        self.out.timers.push(TimerCommand::Cancel {
            key: TimerKey::ClassicJoin {
                member_id: member_id.clone(),
            },
        });
        self.schedule_session(&member_id, now_ms);
        let rebalance_timeout_ms = request.rebalance_timeout_ms;
        self.schedule_classic(
            TimerKey::ClassicSync {
                member_id: member_id.clone(),
            },
            now_ms,
            rebalance_timeout_ms,
        );
        Ok(joined)
    }

    /// Kafka's supportsClassicProtocols: the consumer protocol type, and a
    /// protocol every other classic member supports too.
    fn supports_classic_protocols(
        &self,
        member_id: &str,
        protocol_type: &str,
        protocols: &[ClassicProtocol],
    ) -> bool {
        if protocol_type != CONSUMER_PROTOCOL_TYPE || protocols.is_empty() {
            return false;
        }
        protocols.iter().any(|protocol| {
            self.state
                .members
                .values()
                .filter(|m| m.member_id != member_id)
                .filter_map(|m| m.metadata.classic.as_ref())
                .all(|classic| classic.protocols.iter().any(|p| p.name == protocol.name))
        })
    }

    /// SyncGroup of a classic member: its assigned partitions (the
    /// assignments a leader would send are ignored: the broker assigns).
    pub fn classic_sync(
        &mut self,
        now_ms: u64,
        request: &SyncGroup,
        topics: &dyn TopicLookup,
    ) -> (Result<ClassicSynced, ConsumerGroupError>, Output) {
        let member_id = request.member_id.as_str();
        let instance_id = request.group_instance_id.as_deref();
        let generation_id = request.generation_id;
        let protocol_type = request.protocol_type.as_deref();
        let protocol_name = request.protocol_name.as_deref();
        let result = (|| {
            let member = self.classic_member(member_id, instance_id)?;
            if member.current.member_epoch != generation_id {
                return Err(ConsumerGroupError::IllegalGeneration);
            }
            let classic = member.metadata.classic.as_ref().expect("a classic member");
            if protocol_type.is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
                || protocol_name.is_some_and(|n| !classic.protocols.iter().any(|p| p.name == n))
            {
                return Err(ConsumerGroupError::InconsistentGroupProtocol);
            }
            let member_id = member.member_id.clone();
            // The group moved on: rejoin first, unless the member is still
            // revoking what its last join asked it to.
            if self.state.group_epoch > member.current.member_epoch
                && member.current.state != MemberState::UnrevokedPartitions
            {
                let timeout = member.metadata.rebalance_timeout_ms;
                self.schedule_classic_join_if_absent(&member_id, now_ms, timeout);
                return Err(ConsumerGroupError::RebalanceInProgress);
            }
            let subscription = protocol_name
                .and_then(|n| classic.protocols.iter().find(|p| p.name == n))
                .unwrap_or(&classic.protocols[0]);
            let assignment =
                encode_assignment(&member.current.assigned, &subscription.metadata, topics);
            self.classic_syncs.remove(&member_id);
            self.out.timers.push(TimerCommand::Cancel {
                key: TimerKey::ClassicSync {
                    member_id: member_id.clone(),
                },
            });
            self.schedule_session(&member_id, now_ms);
            Ok(ClassicSynced { assignment })
        })();
        (result, std::mem::take(&mut self.out))
    }

    /// Heartbeat of a classic member: REBALANCE_IN_PROGRESS when it must
    /// rejoin to reconcile.
    pub fn classic_heartbeat(
        &mut self,
        now_ms: u64,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> (Result<(), ConsumerGroupError>, Output) {
        let result = (|| {
            let member = self.classic_member(member_id, instance_id)?;
            if member.current.member_epoch != generation_id {
                return Err(ConsumerGroupError::IllegalGeneration);
            }
            let member_id = member.member_id.clone();
            let must_rejoin = member.current.member_epoch < self.state.group_epoch
                || member.current.state == MemberState::UnrevokedPartitions
                || (member.current.state == MemberState::UnreleasedPartitions
                    && !self.waiting_on_unreleased(&member_id));
            let timeout = member.metadata.rebalance_timeout_ms;
            self.schedule_session(&member_id, now_ms);
            if must_rejoin {
                self.schedule_classic_join_if_absent(&member_id, now_ms, timeout);
                return Err(ConsumerGroupError::RebalanceInProgress);
            }
            Ok(())
        })();
        (result, std::mem::take(&mut self.out))
    }

    /// LeaveGroup of classic members: each leaves (its member id in the
    /// answer) or gets its error; the group epoch moves once if any left.
    #[allow(clippy::type_complexity)]
    pub fn classic_leave(
        &mut self,
        leaving: &[(String, Option<String>)],
        topics: &dyn TopicLookup,
    ) -> (Vec<Result<String, ConsumerGroupError>>, Output) {
        let mut answers = Vec::with_capacity(leaving.len());
        let mut left = false;
        for (member_id, instance_id) in leaving {
            let found = match instance_id {
                None => self.classic_member(member_id, None),
                Some(instance_id) => {
                    // An admin removes a static member by instance id alone.
                    let given = (!member_id.is_empty()).then_some(member_id.as_str());
                    match self.state.static_member(instance_id) {
                        None => Err(ConsumerGroupError::UnknownMemberId),
                        Some(m) if given.is_some_and(|id| id != m.member_id) => {
                            Err(ConsumerGroupError::FencedInstanceId)
                        }
                        Some(m) if !m.is_classic() => Err(ConsumerGroupError::UnknownMemberId),
                        Some(m) => Ok(m),
                    }
                }
            };
            match found.map(|m| m.member_id.clone()) {
                Ok(id) => {
                    self.remove_member(&id);
                    left = true;
                    answers.push(Ok(id));
                }
                Err(error) => answers.push(Err(error)),
            }
        }
        if left {
            self.refresh_subscription(topics);
            self.bump_group_epoch();
        }
        (answers, std::mem::take(&mut self.out))
    }

    /// The classic member `member_id` (or holding `instance_id`):
    /// UNKNOWN_MEMBER_ID if there is none or it speaks the consumer
    /// protocol, FENCED_INSTANCE_ID if another member holds the instance id.
    fn classic_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&super::member::Member, ConsumerGroupError> {
        let member = match instance_id {
            None => self.state.members.get(member_id),
            Some(instance_id) => {
                let member = self.state.static_member(instance_id);
                if member.is_some_and(|m| m.member_id != member_id) {
                    return Err(ConsumerGroupError::FencedInstanceId);
                }
                member
            }
        };
        member
            .filter(|m| m.is_classic())
            .ok_or(ConsumerGroupError::UnknownMemberId)
    }

    /// Whether a partition of the member's target that it lacks is still
    /// owned by another member (Kafka's waitingOnUnreleasedPartition).
    fn waiting_on_unreleased(&self, member_id: &str) -> bool {
        let (Some(target), Some(member)) = (
            self.state.target.get(member_id),
            self.state.members.get(member_id),
        ) else {
            return false;
        };
        target.iter().any(|(topic, partitions)| {
            partitions.iter().any(|p| {
                !member
                    .current
                    .assigned
                    .get(topic)
                    .is_some_and(|held| held.contains(p))
                    && self.state.is_owned(*topic, *p)
            })
        })
    }

    fn schedule_classic(&mut self, key: TimerKey, now_ms: u64, timeout: i32) {
        let at_ms = now_ms + timeout_ms(timeout);
        let (deadlines, member_id) = match &key {
            TimerKey::ClassicJoin { member_id } => (&mut self.classic_joins, member_id),
            TimerKey::ClassicSync { member_id } => (&mut self.classic_syncs, member_id),
            _ => unreachable!("only classic timers are scheduled here"),
        };
        deadlines.insert(member_id.clone(), at_ms);
        self.out.timers.push(TimerCommand::Schedule { key, at_ms });
    }

    fn schedule_classic_join_if_absent(&mut self, member_id: &str, now_ms: u64, timeout: i32) {
        if !self.classic_joins.contains_key(member_id) {
            let key = TimerKey::ClassicJoin {
                member_id: member_id.to_owned(),
            };
            self.schedule_classic(key, now_ms, timeout);
        }
    }

    pub(super) fn cancel_classic_timers(&mut self, member_id: &str) {
        if self.classic_joins.remove(member_id).is_some() {
            self.out.timers.push(TimerCommand::Cancel {
                key: TimerKey::ClassicJoin {
                    member_id: member_id.to_owned(),
                },
            });
        }
        if self.classic_syncs.remove(member_id).is_some() {
            self.out.timers.push(TimerCommand::Cancel {
                key: TimerKey::ClassicSync {
                    member_id: member_id.to_owned(),
                },
            });
        }
    }

    /// Whether removing `member_id` leaves only classic members, so the
    /// group goes back to being a classic group (Kafka's
    /// validateOnlineDowngradeWithFencedMember).
    pub(super) fn may_downgrade_without(&self, member_id: &str) -> bool {
        let members = &self.state.members;
        self.config.migration_policy.downgrades()
            && members.len() > 1
            && members.len() - 1 <= self.config.classic_max_size
            && members.get(member_id).is_some_and(|m| !m.is_classic())
            && members
                .values()
                .filter(|m| m.member_id != member_id)
                .all(|m| m.is_classic())
    }

    /// Deletes the group as a consumer group and describes it as the
    /// classic group it becomes, without `member_id`: the generation is the
    /// group epoch, each member's assignment its target (Kafka's
    /// ClassicGroup.fromConsumerGroup). The classic coordinator rebalances it.
    pub(super) fn downgrade_without(&mut self, member_id: &str, topics: &dyn TopicLookup) {
        let remaining: Vec<super::member::Member> = self
            .state
            .members
            .values()
            .filter(|m| m.member_id != member_id)
            .cloned()
            .collect();
        let protocol_name = select_protocol(&remaining);
        let empty = Assignment::new();
        let members = remaining
            .iter()
            .map(|m| {
                let classic = m
                    .metadata
                    .classic
                    .as_ref()
                    .expect("only classic members remain");
                let metadata = classic
                    .protocols
                    .iter()
                    .find(|p| p.name == protocol_name)
                    .unwrap_or(&classic.protocols[0])
                    .metadata
                    .clone();
                let target = self.state.target.get(&m.member_id).unwrap_or(&empty);
                MemberSnapshot {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.metadata.instance_id.clone(),
                    client_id: m.metadata.client_id.clone(),
                    client_host: m.metadata.client_host.clone(),
                    rebalance_timeout_ms: m.metadata.rebalance_timeout_ms,
                    session_timeout_ms: classic.session_timeout_ms,
                    assignment: encode_assignment(target, &metadata, topics).to_vec(),
                    metadata: metadata.to_vec(),
                }
            })
            .collect();
        let snapshot = GroupSnapshot {
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_owned()),
            generation_id: self.state.group_epoch,
            protocol_name: Some(protocol_name),
            // As a classic group's first member becomes its leader.
            leader: remaining.first().map(|m| m.member_id.clone()),
            current_state_timestamp_ms: None,
            members,
        };
        let all: Vec<String> = self.state.members.keys().cloned().collect();
        for id in all {
            self.remove_member(&id);
        }
        let stale_targets: Vec<String> = self.state.target.keys().cloned().collect();
        for id in stale_targets {
            self.append(Record::TargetAssignmentMemberTombstone { member_id: id });
        }
        self.append(Record::TargetAssignmentMetadataTombstone);
        self.append(Record::PartitionMetadataTombstone);
        self.append(Record::GroupMetadataTombstone);
        self.out.downgraded = Some(snapshot);
    }
}

/// The protocol the most members prefer among those all of them support
/// (Kafka's ClassicGroup.selectProtocol); ties go to the first member's
/// preference.
fn select_protocol(members: &[super::member::Member]) -> String {
    let supported = |m: &super::member::Member, name: &str| {
        m.metadata
            .classic
            .as_ref()
            .is_some_and(|c| c.protocols.iter().any(|p| p.name == name))
    };
    let Some(first) = members.first().and_then(|m| m.metadata.classic.as_ref()) else {
        return String::new();
    };
    let candidates: Vec<&str> = first
        .protocols
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| members.iter().all(|m| supported(m, name)))
        .collect();
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for member in members {
        let classic = member.metadata.classic.as_ref().expect("classic members");
        if let Some(vote) = classic
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| candidates.contains(name))
        {
            *votes.entry(vote).or_default() += 1;
        }
    }
    let mut best: Option<(&str, usize)> = None;
    for candidate in &candidates {
        let count = votes.get(candidate).copied().unwrap_or(0);
        if best.is_none_or(|(_, most)| count > most) {
            best = Some((candidate, count));
        }
    }
    best.map_or_else(
        || first.protocols[0].name.clone(),
        |(name, _)| name.to_owned(),
    )
}
