//! The classic group membership protocol (JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup) of one group, as a pure state machine: [`Event`]s in,
//! [`Command`]s out. It follows Apache Kafka's classic GroupCoordinator.

use std::collections::{BTreeMap, BTreeSet};

use super::command::{
    Command, JoinResponse, JoinedMember, LeaveResponse, LeftMember, Response, SyncResponse,
    TimerKey,
};
use super::error::GroupError;
use super::event::{Event, Heartbeat, JoinGroup, LeaveGroup, RequestId, SyncGroup};
use super::member::{Member, Protocol};
use super::snapshot::{GroupSnapshot, MemberSnapshot};
use super::state::GroupState;

/// The broker settings the protocol depends on (Kafka's names and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty
    /// group waits for more members, extended while members keep arriving.
    pub initial_rebalance_delay_ms: u64,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`.
    pub max_size: usize,
    /// How long a member that joined during a rebalance has to complete it
    /// (Kafka's fixed CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS).
    pub new_member_join_timeout_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            initial_rebalance_delay_ms: 3_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            new_member_join_timeout_ms: 300_000,
        }
    }
}

/// What the armed join timer will do when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JoinTimer {
    /// The initial rebalance delay: extend it if members arrived, else complete.
    Initial { delay_ms: u64, remaining_ms: u64 },
    /// The rebalance timeout: complete the join phase with whoever rejoined.
    Complete,
}

/// One classic group: its members, generation and parked requests.
///
/// Feed it with [`handle`](Self::handle) and execute what
/// [`take_commands`](Self::take_commands) returns, in order.
#[derive(Debug)]
pub struct GroupEngine {
    group_id: String,
    config: GroupConfig,
    state: GroupState,
    previous_state: GroupState,
    state_timestamp_ms: Option<u64>,
    generation_id: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader_id: Option<String>,
    /// In join order; the first one is the next leader when the leader goes.
    members: Vec<Member>,
    /// Dynamic members that were handed a member id (MEMBER_ID_REQUIRED) and have
    /// not joined with it yet, with their session deadline.
    pending_members: BTreeMap<String, u64>,
    /// Members of the current generation whose SyncGroup has not arrived.
    pending_sync: BTreeSet<String>,
    /// A member joined during the initial rebalance delay.
    new_member_added: bool,
    join_timer: Option<(u64, JoinTimer)>,
    /// Deadline and generation of the pending-sync timer.
    sync_timer: Option<(u64, i32)>,
    now_ms: u64,
    output: Vec<Command>,
}

fn ms(timeout: i32) -> u64 {
    u64::try_from(timeout).unwrap_or(0)
}

impl GroupEngine {
    /// A new, empty group.
    pub fn new(group_id: impl Into<String>, config: GroupConfig) -> Self {
        Self {
            group_id: group_id.into(),
            config,
            state: GroupState::Empty,
            previous_state: GroupState::Dead,
            state_timestamp_ms: None,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Vec::new(),
            pending_members: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            new_member_added: false,
            join_timer: None,
            sync_timer: None,
            now_ms: 0,
            output: Vec::new(),
        }
    }

    /// A group rebuilt from its last persisted metadata (coordinator failover):
    /// Stable if it has members, Empty otherwise. Every member's session starts
    /// at `now_ms`; the heartbeat timers are in the output.
    pub fn load(
        group_id: impl Into<String>,
        config: GroupConfig,
        snapshot: GroupSnapshot,
        now_ms: u64,
    ) -> Self {
        let mut engine = Self::new(group_id, config);
        engine.now_ms = now_ms;
        engine.generation_id = snapshot.generation_id;
        engine.protocol_type = snapshot.protocol_type;
        engine.protocol_name = snapshot.protocol_name;
        engine.leader_id = snapshot.leader;
        engine.state_timestamp_ms = snapshot.current_state_timestamp_ms;
        let protocol_type = engine.protocol_type.clone().unwrap_or_default();
        let protocol_name = engine.protocol_name.clone().unwrap_or_default();
        for m in snapshot.members {
            engine.members.push(Member {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                protocol_type: protocol_type.clone(),
                protocols: vec![Protocol::new(protocol_name.clone(), m.metadata)],
                assignment: m.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                heartbeat_deadline_ms: 0,
            });
        }
        if !engine.members.is_empty() {
            engine.state = GroupState::Stable;
        }
        for idx in 0..engine.members.len() {
            let timeout = ms(engine.members[idx].session_timeout_ms);
            engine.reschedule_heartbeat(idx, timeout);
        }
        engine
    }

    /// Starts a rebalance of a loaded group (one that was a consumer group a
    /// moment ago, KIP-848's online downgrade): every member must rejoin.
    pub fn rebalance(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        if !self.members.is_empty() {
            self.prepare_rebalance();
        }
    }

    /// Apply one event; its commands are queued for [`take_commands`](Self::take_commands).
    pub fn handle(&mut self, event: Event) {
        self.now_ms = event.now_ms();
        match event {
            Event::Join {
                request_id,
                request,
                fresh_uuid,
                ..
            } => self.on_join(request_id, request, fresh_uuid),
            Event::Sync {
                request_id,
                request,
                ..
            } => self.on_sync(request_id, request),
            Event::Heartbeat {
                request_id,
                request,
                ..
            } => self.on_heartbeat(request_id, request),
            Event::Leave {
                request_id,
                request,
                ..
            } => self.on_leave(request_id, request),
            Event::Timer { key, .. } => self.on_timer(key),
            Event::Unload { .. } => self.on_unload(),
        }
    }

    /// The commands produced since the last call, in the order to execute them.
    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.output)
    }

    // ---- views for the coordinator ----

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    /// When the group last changed state (Kafka's currentStateTimestamp).
    pub fn state_timestamp_ms(&self) -> Option<u64> {
        self.state_timestamp_ms
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    pub fn leader_id(&self) -> Option<&str> {
        self.leader_id.as_deref()
    }

    /// Members in join order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    pub fn member_ids(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|m| m.member_id.as_str())
    }

    /// Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet.
    pub fn pending_member_ids(&self) -> impl Iterator<Item = &str> {
        self.pending_members.keys().map(String::as_str)
    }

    /// The persisted part of the group, as [`Command::PersistGroup`] carries it.
    pub fn snapshot(&self) -> GroupSnapshot {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        GroupSnapshot {
            protocol_type: self.protocol_type.clone(),
            generation_id: self.generation_id,
            protocol_name: self.protocol_name.clone(),
            leader: self.leader_id.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members
                .iter()
                .map(|m| MemberSnapshot {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    metadata: m.metadata(protocol).to_vec(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Whether an OffsetCommit (not transactional) from this member and generation
    /// is accepted. An empty member id with generation -1 is a simple consumer
    /// (manual assignment), allowed while the group is Empty.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        self.validate_commit(member_id, generation_id, group_instance_id, false)
    }

    /// Whether a TxnOffsetCommit from this member and generation is
    /// accepted. As in Kafka, the rules of OffsetCommit apply, except that
    /// a request without member (TxnOffsetCommit before v3 carries none) is
    /// accepted in any state, and a rebalance in progress is no refusal.
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        self.validate_commit(member_id, generation_id, group_instance_id, true)
    }

    fn validate_commit(
        &self,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
        transactional: bool,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
            self.validate_member(member_id, group_instance_id)?;
            if generation_id != self.generation_id {
                return Err(GroupError::IllegalGeneration);
            }
        } else if !transactional && self.state != GroupState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        if !transactional && self.state == GroupState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    // ---- JoinGroup ----

    fn on_join(&mut self, request_id: RequestId, request: JoinGroup, fresh_uuid: uuid::Uuid) {
        if request.session_timeout_ms < self.config.min_session_timeout_ms
            || request.session_timeout_ms > self.config.max_session_timeout_ms
        {
            let response =
                JoinResponse::error(&request.member_id, GroupError::InvalidSessionTimeout);
            return self.respond(request_id, Response::Join(response));
        }
        if !self.accept_joining_member(&request.member_id) {
            self.remove_member_silently(&request.member_id);
            let response = JoinResponse::error("", GroupError::GroupMaxSizeReached);
            return self.respond(request_id, Response::Join(response));
        }
        if request.member_id.is_empty() {
            self.join_new_member(request_id, request, fresh_uuid);
        } else {
            self.join_existing_member(request_id, request);
        }
    }

    fn accept_joining_member(&self, member_id: &str) -> bool {
        let max = self.config.max_size;
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                self.member(member_id).is_some_and(Member::is_awaiting_join)
                    || self.num_awaiting_join() < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.member(member_id).is_some() || self.members.len() < max
            }
        }
    }

    fn join_new_member(&mut self, request_id: RequestId, request: JoinGroup, uuid: uuid::Uuid) {
        if self.state == GroupState::Dead {
            let response = JoinResponse::error("", GroupError::CoordinatorNotAvailable);
            return self.respond(request_id, Response::Join(response));
        }
        if !self.supports_protocols(&request.protocol_type, &request.protocols) {
            let response = JoinResponse::error("", GroupError::InconsistentGroupProtocol);
            return self.respond(request_id, Response::Join(response));
        }
        match request.group_instance_id.clone() {
            Some(instance_id) => {
                let new_id = format!("{instance_id}-{uuid}");
                match self.static_member_id(&instance_id).map(str::to_owned) {
                    Some(old_id) => self.replace_static_member(request_id, request, old_id, new_id),
                    None => self.add_member_then_rebalance(request_id, request, new_id),
                }
            }
            None => {
                let new_id = format!("{}-{uuid}", request.client_id);
                if request.require_known_member_id {
                    let deadline = self.now_ms + ms(request.session_timeout_ms);
                    self.pending_members.insert(new_id.clone(), deadline);
                    self.schedule(
                        TimerKey::Heartbeat {
                            member_id: new_id.clone(),
                        },
                        deadline,
                    );
                    let response = JoinResponse::error(&new_id, GroupError::MemberIdRequired);
                    self.respond(request_id, Response::Join(response));
                } else {
                    self.add_member_then_rebalance(request_id, request, new_id);
                }
            }
        }
    }

    fn join_existing_member(&mut self, request_id: RequestId, request: JoinGroup) {
        let member_id = request.member_id.clone();
        if self.state == GroupState::Dead {
            let response = JoinResponse::error(&member_id, GroupError::CoordinatorNotAvailable);
            return self.respond(request_id, Response::Join(response));
        }
        if !self.supports_protocols(&request.protocol_type, &request.protocols) {
            let response = JoinResponse::error(&member_id, GroupError::InconsistentGroupProtocol);
            return self.respond(request_id, Response::Join(response));
        }
        if self.pending_members.contains_key(&member_id) {
            if request.group_instance_id.is_some() {
                // Pending ids are only handed to dynamic members.
                let response = JoinResponse::error(&member_id, GroupError::UnknownMemberId);
                return self.respond(request_id, Response::Join(response));
            }
            return self.add_member_then_rebalance(request_id, request, member_id);
        }
        if let Err(error) = self.validate_member(&member_id, request.group_instance_id.as_deref()) {
            return self.respond(
                request_id,
                Response::Join(JoinResponse::error(&member_id, error)),
            );
        }
        let idx = self.index(&member_id).expect("validated member");
        let protocols_match = self.members[idx].protocols == request.protocols;
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member(idx, &request, request_id);
                self.maybe_prepare_rebalance_or_complete_join();
            }
            GroupState::CompletingRebalance if protocols_match => {
                // A retry of a JoinGroup whose response was lost.
                let response = self.current_join_response(&member_id, true);
                self.respond(request_id, Response::Join(response));
            }
            GroupState::Stable if protocols_match && !self.is_leader(&member_id) => {
                let response = self.current_join_response(&member_id, false);
                self.respond(request_id, Response::Join(response));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                // The leader rejoining, or a member with new metadata: rebalance.
                self.update_member(idx, &request, request_id);
                self.maybe_prepare_rebalance_or_complete_join();
            }
            GroupState::Empty | GroupState::Dead => {
                let response = JoinResponse::error(&member_id, GroupError::UnknownMemberId);
                self.respond(request_id, Response::Join(response));
            }
        }
    }

    fn add_member_then_rebalance(&mut self, request_id: RequestId, request: JoinGroup, id: String) {
        self.pending_members.remove(&id);
        if self.state == GroupState::PreparingRebalance && self.previous_state == GroupState::Empty
        {
            self.new_member_added = true;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(id.clone());
        }
        self.members.push(Member {
            member_id: id,
            group_instance_id: request.group_instance_id,
            client_id: request.client_id,
            client_host: request.client_host,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            session_timeout_ms: request.session_timeout_ms,
            protocol_type: request.protocol_type,
            protocols: request.protocols,
            assignment: Vec::new(),
            awaiting_join: Some(request_id),
            awaiting_sync: None,
            is_new: true,
            heartbeat_deadline_ms: 0,
        });
        let idx = self.members.len() - 1;
        self.reschedule_heartbeat(idx, self.config.new_member_join_timeout_ms);
        self.maybe_prepare_rebalance_or_complete_join();
    }

    /// Record a member's new join: protocols, timeouts and its parked request.
    fn update_member(&mut self, idx: usize, request: &JoinGroup, request_id: RequestId) {
        let member = &mut self.members[idx];
        member.protocols = request.protocols.clone();
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.session_timeout_ms = request.session_timeout_ms;
        // Kafka drops a superseded JoinGroup; answer it so its connection is not stuck.
        if let Some(old) = member.awaiting_join.replace(request_id) {
            let response = JoinResponse::error(&request.member_id, GroupError::RebalanceInProgress);
            self.respond(old, Response::Join(response));
        }
    }

    /// KIP-345: a known static member rejoins with an unknown member id (it
    /// restarted). The new id takes over the old one's place and assignment; the
    /// old id is fenced.
    fn replace_static_member(
        &mut self,
        request_id: RequestId,
        request: JoinGroup,
        old_id: String,
        new_id: String,
    ) {
        let previous_leader = self.leader_id.clone().unwrap_or_default();
        let idx = self.index(&old_id).expect("static member is a member");
        let (old_join, old_sync) = {
            let member = &mut self.members[idx];
            member.member_id = new_id.clone();
            member.is_new = false;
            (member.awaiting_join.take(), member.awaiting_sync.take())
        };
        if let Some(old) = old_join {
            let response = JoinResponse::error(&old_id, GroupError::FencedInstanceId);
            self.respond(old, Response::Join(response));
        }
        if let Some(old) = old_sync {
            self.respond(
                old,
                Response::Sync(SyncResponse::error(GroupError::FencedInstanceId)),
            );
        }
        self.cancel(TimerKey::Heartbeat {
            member_id: old_id.clone(),
        });
        self.pending_sync.remove(&old_id);
        if self.leader_id.as_deref() == Some(old_id.as_str()) {
            self.leader_id = Some(new_id.clone());
        }
        let timeout = ms(self.members[idx].session_timeout_ms);
        self.reschedule_heartbeat(idx, timeout);
        self.update_member(idx, &request, request_id);

        match self.state {
            GroupState::Stable => {
                if self.protocol_name.as_deref() == Some(self.select_protocol().as_str()) {
                    // Nothing the group agreed on changes: hand back the current
                    // assignment without a rebalance.
                    self.members[idx].awaiting_join = None;
                    self.persist();
                    let mut response = self.current_join_response(&new_id, false);
                    if request.supports_skip_assignment {
                        if self.is_leader(&new_id) {
                            response.members = self.joined_members();
                            response.skip_assignment = true;
                        }
                    } else {
                        // An old client must not believe it is the leader and reassign.
                        response.leader = previous_leader;
                    }
                    self.respond(request_id, Response::Join(response));
                } else {
                    self.maybe_prepare_rebalance_or_complete_join();
                }
            }
            GroupState::CompletingRebalance => self.prepare_rebalance(),
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(),
            GroupState::Empty | GroupState::Dead => {
                unreachable!("a group with a static member is neither Empty nor Dead")
            }
        }
    }

    // ---- SyncGroup ----

    fn on_sync(&mut self, request_id: RequestId, request: SyncGroup) {
        if let Err(error) = self.validate_sync(&request) {
            return self.respond(request_id, Response::Sync(SyncResponse::error(error)));
        }
        let member_id = request.member_id;
        let idx = self.index(&member_id).expect("validated member");
        match self.state {
            GroupState::PreparingRebalance => {
                let response = SyncResponse::error(GroupError::RebalanceInProgress);
                self.respond(request_id, Response::Sync(response));
            }
            GroupState::CompletingRebalance => {
                if let Some(old) = self.members[idx].awaiting_sync.replace(request_id) {
                    let response = SyncResponse::error(GroupError::RebalanceInProgress);
                    self.respond(old, Response::Sync(response));
                }
                self.pending_sync.remove(&member_id);
                if self.is_leader(&member_id) {
                    let mut assignments: BTreeMap<String, Vec<u8>> =
                        request.assignments.into_iter().collect();
                    for member in &mut self.members {
                        member.assignment =
                            assignments.remove(&member.member_id).unwrap_or_default();
                    }
                    self.transition(GroupState::Stable);
                    self.persist();
                    self.propagate_assignment(None);
                }
            }
            GroupState::Stable => {
                self.pending_sync.remove(&member_id);
                let response = SyncResponse {
                    error: None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: self.members[idx].assignment.clone(),
                };
                self.respond(request_id, Response::Sync(response));
            }
            GroupState::Empty | GroupState::Dead => {
                unreachable!("validated members exist only in a live, non-empty group")
            }
        }
    }

    fn validate_sync(&self, request: &SyncGroup) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
        if request.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        let inconsistent = |asked: &Option<String>, ours: &Option<String>| {
            asked
                .as_ref()
                .is_some_and(|asked| ours.as_ref() != Some(asked))
        };
        if inconsistent(&request.protocol_type, &self.protocol_type)
            || inconsistent(&request.protocol_name, &self.protocol_name)
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    // ---- Heartbeat ----

    fn on_heartbeat(&mut self, request_id: RequestId, request: Heartbeat) {
        let result = self.heartbeat(&request);
        self.respond(request_id, Response::Heartbeat(result));
    }

    fn heartbeat(&mut self, request: &Heartbeat) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
        if request.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        let idx = self.index(&request.member_id).expect("validated member");
        let timeout = ms(self.members[idx].session_timeout_ms);
        match self.state {
            GroupState::PreparingRebalance => {
                self.reschedule_heartbeat(idx, timeout);
                Err(GroupError::RebalanceInProgress)
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.reschedule_heartbeat(idx, timeout);
                Ok(())
            }
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
        }
    }

    // ---- LeaveGroup ----

    fn on_leave(&mut self, request_id: RequestId, request: LeaveGroup) {
        if self.state == GroupState::Dead {
            let response = LeaveResponse {
                error: Some(GroupError::CoordinatorNotAvailable),
                members: Vec::new(),
            };
            return self.respond(request_id, Response::Leave(response));
        }
        let mut results = Vec::with_capacity(request.members.len());
        for leaving in request.members {
            let error = if leaving.member_id.is_empty() {
                match leaving
                    .group_instance_id
                    .as_deref()
                    .and_then(|instance| self.static_member_id(instance))
                    .map(str::to_owned)
                {
                    Some(member_id) => {
                        self.remove_member_and_answer(&member_id);
                        None
                    }
                    None => Some(GroupError::UnknownMemberId),
                }
            } else if self.pending_members.remove(&leaving.member_id).is_some() {
                self.cancel(TimerKey::Heartbeat {
                    member_id: leaving.member_id.clone(),
                });
                None
            } else {
                match self.validate_member(&leaving.member_id, leaving.group_instance_id.as_deref())
                {
                    Ok(()) => {
                        self.remove_member_and_answer(&leaving.member_id);
                        None
                    }
                    Err(error) => Some(error),
                }
            };
            results.push(LeftMember {
                member_id: leaving.member_id,
                group_instance_id: leaving.group_instance_id,
                error,
            });
        }
        if results.iter().any(|r| r.error.is_none()) {
            match self.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join()
                }
                GroupState::PreparingRebalance => self.maybe_complete_join_phase(),
                GroupState::Empty | GroupState::Dead => {}
            }
        }
        let response = LeaveResponse {
            error: None,
            members: results,
        };
        self.respond(request_id, Response::Leave(response));
    }

    // ---- timers ----

    fn on_timer(&mut self, key: TimerKey) {
        if self.state == GroupState::Dead {
            return;
        }
        match key {
            TimerKey::Heartbeat { member_id } => self.on_heartbeat_expiry(&member_id),
            TimerKey::Join => {
                let Some((at_ms, kind)) = self.join_timer else {
                    return;
                };
                if self.now_ms < at_ms || self.state != GroupState::PreparingRebalance {
                    return;
                }
                self.join_timer = None;
                match kind {
                    JoinTimer::Initial {
                        delay_ms,
                        remaining_ms,
                    } => self.try_complete_initial_rebalance(delay_ms, remaining_ms),
                    JoinTimer::Complete => self.complete_join(),
                }
            }
            TimerKey::PendingSync => {
                let Some((at_ms, generation)) = self.sync_timer else {
                    return;
                };
                if self.now_ms < at_ms {
                    return;
                }
                self.sync_timer = None;
                let live = matches!(
                    self.state,
                    GroupState::CompletingRebalance | GroupState::Stable
                );
                if generation == self.generation_id && live && !self.pending_sync.is_empty() {
                    let missing: Vec<String> =
                        std::mem::take(&mut self.pending_sync).into_iter().collect();
                    for member_id in &missing {
                        self.remove_member_and_answer(member_id);
                    }
                    self.prepare_rebalance();
                }
            }
        }
    }

    fn on_heartbeat_expiry(&mut self, member_id: &str) {
        if let Some(&deadline) = self.pending_members.get(member_id) {
            if self.now_ms >= deadline {
                self.pending_members.remove(member_id);
                if self.state == GroupState::PreparingRebalance && self.all_members_joined() {
                    self.complete_join();
                }
            }
            return;
        }
        let Some(idx) = self.index(member_id) else {
            return;
        };
        let member = &self.members[idx];
        if self.now_ms < member.heartbeat_deadline_ms || member.has_satisfied_heartbeat() {
            return;
        }
        self.remove_member_and_answer(member_id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join()
            }
            GroupState::PreparingRebalance if self.all_members_joined() => self.complete_join(),
            _ => {}
        }
    }

    fn on_unload(&mut self) {
        self.transition(GroupState::Dead);
        let mut parked = Vec::new();
        for member in &mut self.members {
            if let Some(join) = member.awaiting_join.take() {
                parked.push((
                    join,
                    Response::Join(JoinResponse::error(
                        &member.member_id,
                        GroupError::NotCoordinator,
                    )),
                ));
            }
            if let Some(sync) = member.awaiting_sync.take() {
                parked.push((
                    sync,
                    Response::Sync(SyncResponse::error(GroupError::NotCoordinator)),
                ));
            }
        }
        for (request_id, response) in parked {
            self.respond(request_id, response);
        }
        let timers: Vec<String> = self
            .members
            .iter()
            .map(|m| m.member_id.clone())
            .chain(std::mem::take(&mut self.pending_members).into_keys())
            .collect();
        for member_id in timers {
            self.cancel(TimerKey::Heartbeat { member_id });
        }
        self.cancel_join_timer();
        self.remove_sync_expiration();
    }

    // ---- rebalance ----

    fn maybe_prepare_rebalance_or_complete_join(&mut self) {
        if self.state.can_transition_to(GroupState::PreparingRebalance) {
            self.prepare_rebalance();
        } else {
            self.maybe_complete_join_phase();
        }
    }

    fn prepare_rebalance(&mut self) {
        if self.state == GroupState::CompletingRebalance {
            for member in &mut self.members {
                member.assignment.clear();
            }
            self.propagate_assignment(Some(GroupError::RebalanceInProgress));
        }
        self.remove_sync_expiration();
        let initial = self.state == GroupState::Empty;
        if initial {
            let delay_ms = self.config.initial_rebalance_delay_ms;
            let remaining_ms = self.rebalance_timeout_ms().saturating_sub(delay_ms);
            self.schedule_join_timer(
                delay_ms,
                JoinTimer::Initial {
                    delay_ms,
                    remaining_ms,
                },
            );
        }
        self.transition(GroupState::PreparingRebalance);
        if !initial {
            if self.all_members_joined() {
                self.complete_join();
            } else {
                self.schedule_join_timer(self.rebalance_timeout_ms(), JoinTimer::Complete);
            }
        }
    }

    fn try_complete_initial_rebalance(&mut self, delay_ms: u64, remaining_ms: u64) {
        if self.new_member_added && remaining_ms != 0 {
            self.new_member_added = false;
            let new_delay_ms = self.config.initial_rebalance_delay_ms.min(remaining_ms);
            let new_remaining_ms = remaining_ms.saturating_sub(delay_ms);
            self.schedule_join_timer(
                new_delay_ms,
                JoinTimer::Initial {
                    delay_ms: new_delay_ms,
                    remaining_ms: new_remaining_ms,
                },
            );
        } else {
            self.complete_join();
        }
    }

    fn maybe_complete_join_phase(&mut self) {
        if self.state == GroupState::PreparingRebalance
            && self.previous_state != GroupState::Empty
            && self.all_members_joined()
        {
            self.complete_join();
        }
    }

    /// End of the join phase: drop dynamic members that did not rejoin, form the
    /// next generation and answer every parked JoinGroup.
    fn complete_join(&mut self) {
        self.cancel_join_timer();
        let missing: Vec<String> = self
            .members
            .iter()
            .filter(|m| !m.is_awaiting_join() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &missing {
            self.remove_member_and_answer(member_id);
        }
        if self.state == GroupState::Dead {
            return;
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that did not rejoin are left: wait for them.
            self.schedule_join_timer(self.rebalance_timeout_ms(), JoinTimer::Complete);
            return;
        }
        self.generation_id += 1;
        self.pending_sync.clear();
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition(GroupState::Empty);
            self.persist();
            return;
        }
        self.protocol_name = Some(self.select_protocol());
        self.transition(GroupState::CompletingRebalance);
        let joined = self.joined_members();
        for idx in 0..self.members.len() {
            let member_id = self.members[idx].member_id.clone();
            if let Some(request_id) = self.members[idx].awaiting_join.take() {
                let mut response = self.current_join_response(&member_id, false);
                if self.is_leader(&member_id) {
                    response.members = joined.clone();
                }
                self.respond(request_id, Response::Join(response));
            }
            let timeout = ms(self.members[idx].session_timeout_ms);
            self.reschedule_heartbeat(idx, timeout);
            self.members[idx].is_new = false;
            self.pending_sync.insert(member_id);
        }
        let at_ms = self.now_ms + self.rebalance_timeout_ms();
        self.sync_timer = Some((at_ms, self.generation_id));
        self.schedule(TimerKey::PendingSync, at_ms);
    }

    /// Keep the leader if it rejoined, else promote the first member that did.
    fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.as_deref() else {
            return false;
        };
        if self.member(leader).is_some_and(Member::is_awaiting_join) {
            return true;
        }
        match self.members.iter().find(|m| m.is_awaiting_join()) {
            Some(member) => {
                self.leader_id = Some(member.member_id.clone());
                true
            }
            None => false,
        }
    }

    /// Answer every parked SyncGroup with the member's assignment (or `error`).
    fn propagate_assignment(&mut self, error: Option<GroupError>) {
        for idx in 0..self.members.len() {
            let Some(request_id) = self.members[idx].awaiting_sync.take() else {
                continue;
            };
            let response = match error {
                None => SyncResponse {
                    error: None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: self.members[idx].assignment.clone(),
                },
                Some(error) => SyncResponse::error(error),
            };
            self.respond(request_id, Response::Sync(response));
            let timeout = ms(self.members[idx].session_timeout_ms);
            self.reschedule_heartbeat(idx, timeout);
        }
    }

    /// The protocol every member supports that most members prefer; ties go to
    /// the one the earliest member prefers.
    fn select_protocol(&self) -> String {
        let first = self.members.first().expect("a group with members");
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .collect();
        let mut votes = vec![0usize; candidates.len()];
        for member in &self.members {
            if let Some(vote) = member.vote(&candidates) {
                let pos = candidates
                    .iter()
                    .position(|c| *c == vote)
                    .expect("a candidate");
                votes[pos] += 1;
            }
        }
        let mut best = 0;
        for (pos, count) in votes.iter().enumerate() {
            if *count > votes[best] {
                best = pos;
            }
        }
        candidates[best].to_owned()
    }

    // ---- membership bookkeeping ----

    fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|p| self.members.iter().all(|m| m.supports(&p.name)))
    }

    fn validate_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(instance_id) = group_instance_id {
            match self.static_member_id(instance_id) {
                None => return Err(GroupError::UnknownMemberId),
                Some(existing) if existing != member_id => {
                    return Err(GroupError::FencedInstanceId)
                }
                Some(_) => {}
            }
        }
        if self.index(member_id).is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }

    fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.as_str())
    }

    fn index(&self, member_id: &str) -> Option<usize> {
        self.members.iter().position(|m| m.member_id == member_id)
    }

    fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    fn num_awaiting_join(&self) -> usize {
        self.members.iter().filter(|m| m.is_awaiting_join()).count()
    }

    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.iter().all(Member::is_awaiting_join)
    }

    /// The group's rebalance timeout: the largest of its members'.
    fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .iter()
            .map(|m| ms(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .iter()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol).to_vec(),
            })
            .collect()
    }

    /// A JoinGroup response for the current generation (the member list only if
    /// `with_members` and the member leads).
    fn current_join_response(&self, member_id: &str, with_members: bool) -> JoinResponse {
        JoinResponse {
            error: None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader_id.clone().unwrap_or_default(),
            member_id: member_id.to_owned(),
            members: if with_members && self.is_leader(member_id) {
                self.joined_members()
            } else {
                Vec::new()
            },
            skip_assignment: false,
        }
    }

    /// Remove a member, answering its parked requests with UNKNOWN_MEMBER_ID and
    /// disarming its session timer. The caller decides whether to rebalance.
    fn remove_member_and_answer(&mut self, member_id: &str) {
        let Some(member) = self.remove_member_silently(member_id) else {
            return;
        };
        if let Some(join) = member.awaiting_join {
            let response = JoinResponse::error("", GroupError::UnknownMemberId);
            self.respond(join, Response::Join(response));
        }
        if let Some(sync) = member.awaiting_sync {
            // Kafka leaves this request unanswered; answering frees its connection.
            self.respond(
                sync,
                Response::Sync(SyncResponse::error(GroupError::UnknownMemberId)),
            );
        }
    }

    fn remove_member_silently(&mut self, member_id: &str) -> Option<Member> {
        self.pending_members.remove(member_id);
        self.pending_sync.remove(member_id);
        let idx = self.index(member_id)?;
        let member = self.members.remove(idx);
        self.cancel(TimerKey::Heartbeat {
            member_id: member_id.to_owned(),
        });
        if self.is_leader(member_id) {
            self.leader_id = self.members.first().map(|m| m.member_id.clone());
        }
        Some(member)
    }

    // ---- output ----

    fn transition(&mut self, to: GroupState) {
        debug_assert!(
            self.state.can_transition_to(to),
            "group {}: {} -> {} is not a valid transition",
            self.group_id,
            self.state,
            to
        );
        self.previous_state = self.state;
        self.state = to;
        self.state_timestamp_ms = Some(self.now_ms);
    }

    fn persist(&mut self) {
        let snapshot = self.snapshot();
        self.output.push(Command::PersistGroup(snapshot));
    }

    fn respond(&mut self, request_id: RequestId, response: Response) {
        self.output.push(Command::Respond {
            request_id,
            response,
        });
    }

    fn schedule(&mut self, key: TimerKey, at_ms: u64) {
        self.output.push(Command::ScheduleTimer { key, at_ms });
    }

    fn cancel(&mut self, key: TimerKey) {
        self.output.push(Command::CancelTimer { key });
    }

    fn reschedule_heartbeat(&mut self, idx: usize, timeout_ms: u64) {
        let at_ms = self.now_ms + timeout_ms;
        let member = &mut self.members[idx];
        member.heartbeat_deadline_ms = at_ms;
        let key = TimerKey::Heartbeat {
            member_id: member.member_id.clone(),
        };
        self.schedule(key, at_ms);
    }

    fn schedule_join_timer(&mut self, delay_ms: u64, kind: JoinTimer) {
        let at_ms = self.now_ms + delay_ms;
        self.join_timer = Some((at_ms, kind));
        self.schedule(TimerKey::Join, at_ms);
    }

    fn cancel_join_timer(&mut self) {
        if self.join_timer.take().is_some() {
            self.cancel(TimerKey::Join);
        }
    }

    /// Forget who still owes a SyncGroup and disarm the pending-sync timer.
    fn remove_sync_expiration(&mut self) {
        self.pending_sync.clear();
        if self.sync_timer.take().is_some() {
            self.cancel(TimerKey::PendingSync);
        }
    }
}
