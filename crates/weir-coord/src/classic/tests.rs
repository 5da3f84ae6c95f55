//! Tests of the group engine: a small harness plays the coordinator (it keeps the
//! timers the engine arms and fires them as time advances) and the tests assert on
//! the commands the engine outputs.

use std::collections::BTreeMap;

use super::*;

const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 30_000;

fn protocols(names: &[&str]) -> Vec<Protocol> {
    names
        .iter()
        .map(|n| Protocol::new(*n, format!("{n}-meta")))
        .collect()
}

fn join_request(member_id: &str, instance: Option<&str>) -> JoinGroup {
    JoinGroup {
        member_id: member_id.to_owned(),
        group_instance_id: instance.map(str::to_owned),
        client_id: "client".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        protocol_type: "consumer".to_owned(),
        protocols: protocols(&["range"]),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        require_known_member_id: true,
        supports_skip_assignment: true,
    }
}

/// Plays the coordinator: owns the clock and the timers, records every command.
struct Harness {
    engine: GroupEngine,
    now: u64,
    next_request: RequestId,
    next_uuid: u128,
    timers: BTreeMap<TimerKey, u64>,
    log: Vec<Command>,
}

impl Harness {
    fn new() -> Self {
        Self::with(GroupEngine::new("g", GroupConfig::default()))
    }

    fn with(engine: GroupEngine) -> Self {
        let mut h = Self {
            engine,
            now: 0,
            next_request: 1,
            next_uuid: 1,
            timers: BTreeMap::new(),
            log: Vec::new(),
        };
        h.collect();
        h
    }

    fn collect(&mut self) -> Vec<Command> {
        let commands = self.engine.take_commands();
        for c in &commands {
            match c {
                Command::ScheduleTimer { key, at_ms } => {
                    self.timers.insert(key.clone(), *at_ms);
                }
                Command::CancelTimer { key } => {
                    self.timers.remove(key);
                }
                _ => {}
            }
        }
        self.log.extend(commands.iter().cloned());
        commands
    }

    fn request_id(&mut self) -> RequestId {
        self.next_request += 1;
        self.next_request - 1
    }

    fn handle(&mut self, event: Event) -> Vec<Command> {
        self.engine.handle(event);
        self.collect()
    }

    fn join(&mut self, request: JoinGroup) -> (RequestId, Vec<Command>) {
        let request_id = self.request_id();
        self.next_uuid += 1;
        let event = Event::Join {
            request_id,
            now_ms: self.now,
            request,
            fresh_uuid: uuid::Uuid::from_u128(self.next_uuid),
        };
        (request_id, self.handle(event))
    }

    /// KIP-394: ask for a member id, then join with it. Returns the member id and
    /// the id of the parked JoinGroup.
    fn join_new(&mut self) -> (String, RequestId) {
        let (rid, out) = self.join(join_request("", None));
        let response = join_response(&out, rid);
        assert_eq!(response.error, Some(GroupError::MemberIdRequired));
        let member_id = response.member_id;
        let (rid, _) = self.join(join_request(&member_id, None));
        (member_id, rid)
    }

    fn sync(
        &mut self,
        member_id: &str,
        generation_id: i32,
        assignments: &[(&str, &str)],
    ) -> (RequestId, Vec<Command>) {
        let request_id = self.request_id();
        let request = SyncGroup {
            member_id: member_id.to_owned(),
            group_instance_id: self
                .engine
                .member(member_id)
                .and_then(|m| m.group_instance_id.clone()),
            generation_id,
            protocol_type: Some("consumer".to_owned()),
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| ((*m).to_owned(), a.as_bytes().to_vec()))
                .collect(),
        };
        let event = Event::Sync {
            request_id,
            now_ms: self.now,
            request,
        };
        (request_id, self.handle(event))
    }

    fn heartbeat(
        &mut self,
        member_id: &str,
        generation_id: i32,
        instance: Option<&str>,
    ) -> Result<(), GroupError> {
        let request_id = self.request_id();
        let request = Heartbeat {
            member_id: member_id.to_owned(),
            group_instance_id: instance.map(str::to_owned),
            generation_id,
        };
        let out = self.handle(Event::Heartbeat {
            request_id,
            now_ms: self.now,
            request,
        });
        match response(&out, request_id) {
            Some(Response::Heartbeat(result)) => result,
            other => panic!("no heartbeat response: {other:?}"),
        }
    }

    fn leave(&mut self, members: &[(&str, Option<&str>)]) -> (LeaveResponse, Vec<Command>) {
        let request_id = self.request_id();
        let request = LeaveGroup {
            members: members
                .iter()
                .map(|(m, i)| LeavingMember {
                    member_id: (*m).to_owned(),
                    group_instance_id: i.map(str::to_owned),
                })
                .collect(),
        };
        let out = self.handle(Event::Leave {
            request_id,
            now_ms: self.now,
            request,
        });
        match response(&out, request_id) {
            Some(Response::Leave(r)) => (r, out),
            other => panic!("no leave response: {other:?}"),
        }
    }

    /// Move the clock forward by `ms`, firing every timer that comes due.
    fn advance(&mut self, ms: u64) -> Vec<Command> {
        let target = self.now + ms;
        let mut out = Vec::new();
        while let Some((key, at)) = self
            .timers
            .iter()
            .filter(|(_, at)| **at <= target)
            .min_by_key(|(_, at)| **at)
            .map(|(k, at)| (k.clone(), *at))
        {
            self.timers.remove(&key);
            self.now = at;
            out.extend(self.handle(Event::Timer { key, now_ms: at }));
        }
        self.now = target;
        out
    }

    /// Advance in steps of 100 ms until the join phase completes (before anyone's
    /// session runs out), returning the commands on the way.
    fn complete_join_phase(&mut self) -> Vec<Command> {
        let mut out = Vec::new();
        while self.engine.state() != GroupState::CompletingRebalance {
            assert!(self.now < 1_000_000, "the join phase never completed");
            out.extend(self.advance(100));
        }
        out
    }

    /// `n` dynamic members form generation 1 and get their assignments.
    fn stable_group(&mut self, n: usize) -> Vec<String> {
        let ids: Vec<String> = (0..n).map(|_| self.join_new().0).collect();
        self.complete_join_phase();
        self.sync_all(&ids);
        ids
    }

    fn sync_all(&mut self, ids: &[String]) {
        let generation = self.engine.generation_id();
        let leader = self.engine.leader_id().unwrap().to_owned();
        let assignment: Vec<(String, String)> = ids
            .iter()
            .map(|m| (m.clone(), format!("assignment-of-{m}")))
            .collect();
        let borrowed: Vec<(&str, &str)> = assignment
            .iter()
            .map(|(m, a)| (m.as_str(), a.as_str()))
            .collect();
        for id in ids.iter().filter(|id| **id != leader) {
            self.sync(id, generation, &[]);
        }
        self.sync(&leader, generation, &borrowed);
        assert_eq!(self.engine.state(), GroupState::Stable);
    }
}

fn response(commands: &[Command], request_id: RequestId) -> Option<Response> {
    let mut found = commands.iter().filter_map(|c| match c {
        Command::Respond {
            request_id: r,
            response,
        } if *r == request_id => Some(response.clone()),
        _ => None,
    });
    let first = found.next();
    assert!(
        found.next().is_none(),
        "request {request_id} answered twice"
    );
    first
}

fn join_response(commands: &[Command], request_id: RequestId) -> JoinResponse {
    match response(commands, request_id) {
        Some(Response::Join(r)) => r,
        other => panic!("expected a JoinGroup response to {request_id}, got {other:?}"),
    }
}

fn sync_response(commands: &[Command], request_id: RequestId) -> SyncResponse {
    match response(commands, request_id) {
        Some(Response::Sync(r)) => r,
        other => panic!("expected a SyncGroup response to {request_id}, got {other:?}"),
    }
}

fn persisted(commands: &[Command]) -> Vec<GroupSnapshot> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::PersistGroup(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn three_members_form_one_generation() {
    let mut h = Harness::new();
    let joins: Vec<(String, RequestId)> = (0..3).map(|_| h.join_new()).collect();
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    assert!(h.collect().is_empty());

    let out = h.advance(10_000);
    assert_eq!(h.engine.state(), GroupState::CompletingRebalance);
    assert_eq!(h.engine.generation_id(), 1);
    assert_eq!(h.engine.protocol_name(), Some("range"));
    let leader = &joins[0].0;
    assert_eq!(h.engine.leader_id(), Some(leader.as_str()));
    for (i, (member_id, rid)) in joins.iter().enumerate() {
        let r = join_response(&out, *rid);
        assert_eq!(r.error, None);
        assert_eq!(r.generation_id, 1);
        assert_eq!(&r.member_id, member_id);
        assert_eq!(&r.leader, leader);
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        if i == 0 {
            let listed: Vec<&str> = r.members.iter().map(|m| m.member_id.as_str()).collect();
            assert_eq!(
                listed,
                joins.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>()
            );
            assert!(r.members.iter().all(|m| m.metadata == b"range-meta"));
        } else {
            assert!(r.members.is_empty(), "followers get no member list");
        }
    }

    // Followers' SyncGroup waits for the leader's.
    let (f1, out) = h.sync(&joins[1].0, 1, &[]);
    assert!(response(&out, f1).is_none());
    let (f2, out) = h.sync(&joins[2].0, 1, &[]);
    assert!(response(&out, f2).is_none());
    let assignments: Vec<(&str, &str)> = vec![
        (joins[0].0.as_str(), "p0"),
        (joins[1].0.as_str(), "p1"),
        (joins[2].0.as_str(), "p2"),
    ];
    let (l, out) = h.sync(leader, 1, &assignments);
    assert_eq!(h.engine.state(), GroupState::Stable);
    // The metadata is persisted before any response goes out.
    assert!(matches!(out.first(), Some(Command::PersistGroup(_))));
    let snapshot = &persisted(&out)[0];
    assert_eq!(snapshot.generation_id, 1);
    assert_eq!(snapshot.members.len(), 3);
    for (rid, expected) in [(l, "p0"), (f1, "p1"), (f2, "p2")] {
        let r = sync_response(&out, rid);
        assert_eq!(r.error, None);
        assert_eq!(r.assignment, expected.as_bytes());
    }
}

#[test]
fn initial_rebalance_delay_is_extended_by_arriving_members() {
    // (arrival times, when the join phase completes) with a 3 s delay and a 10 s
    // rebalance timeout: each delay that saw a new member is extended, up to the
    // rebalance timeout.
    let table: &[(&[u64], u64)] = &[
        (&[0], 3_000),
        (&[0, 2_000], 6_000),
        (&[0, 2_000, 5_000], 9_000),
        (&[0, 2_000, 5_000, 8_000], 10_000),
        (&[0, 4_000], 3_000),
    ];
    for (arrivals, completes_at) in table {
        let mut h = Harness::new();
        let mut parked = Vec::new();
        let mut completed = None;
        for t in 0..=20_000u64 {
            if arrivals.contains(&t) {
                let mut request = join_request("", None);
                request.require_known_member_id = false;
                request.rebalance_timeout_ms = 10_000;
                parked.push(h.join(request).0);
            }
            let out = h.advance(1);
            if completed.is_none() && parked.iter().any(|r| response(&out, *r).is_some()) {
                completed = Some(h.now);
            }
        }
        assert_eq!(completed, Some(*completes_at), "arrivals {arrivals:?}");
    }
}

#[test]
fn member_id_required_flow() {
    let mut h = Harness::new();
    let (rid, out) = h.join(join_request("", None));
    let r = join_response(&out, rid);
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    assert_eq!(r.member_id, format!("client-{}", uuid::Uuid::from_u128(2)));
    assert_eq!(h.engine.state(), GroupState::Empty);
    assert_eq!(
        h.engine.pending_member_ids().collect::<Vec<_>>(),
        vec![r.member_id.as_str()]
    );
    assert!(h.engine.members().is_empty());
    assert_eq!(
        h.timers.get(&TimerKey::Heartbeat {
            member_id: r.member_id.clone()
        }),
        Some(&10_000)
    );

    let (rid2, out) = h.join(join_request(&r.member_id, None));
    assert!(
        response(&out, rid2).is_none(),
        "parked until the join phase ends"
    );
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.engine.member_ids().collect::<Vec<_>>(),
        vec![r.member_id.as_str()]
    );

    // A second client takes an id and never comes back: it does not keep the
    // group from forming once its session is over.
    let (rid3, out) = h.join(join_request("", None));
    let ghost = join_response(&out, rid3).member_id;
    let out = h.advance(10_000);
    assert!(!h.engine.pending_member_ids().any(|m| m == ghost));
    assert_eq!(join_response(&out, rid2).generation_id, 1);
}

#[test]
fn join_is_refused_when_protocols_do_not_match() {
    let table: &[(&str, &str, &[&str], GroupError)] = &[
        (
            "other protocol type",
            "connect",
            &["range"],
            GroupError::InconsistentGroupProtocol,
        ),
        (
            "no common protocol",
            "consumer",
            &["roundrobin"],
            GroupError::InconsistentGroupProtocol,
        ),
        (
            "empty protocol list",
            "consumer",
            &[],
            GroupError::InconsistentGroupProtocol,
        ),
    ];
    for (name, protocol_type, names, expected) in table {
        let mut h = Harness::new();
        h.stable_group(2);
        for member_id in ["", "unknown-member"] {
            let mut request = join_request(member_id, None);
            request.protocol_type = (*protocol_type).to_owned();
            request.protocols = protocols(names);
            let (rid, out) = h.join(request);
            assert_eq!(join_response(&out, rid).error, Some(*expected), "{name}");
            assert_eq!(h.engine.state(), GroupState::Stable, "{name}");
        }
    }
    // An empty group takes any protocol type but not an empty one.
    let mut h = Harness::new();
    let mut request = join_request("", None);
    request.protocol_type = String::new();
    let (rid, out) = h.join(request);
    assert_eq!(
        join_response(&out, rid).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
}

#[test]
fn session_timeout_outside_the_allowed_range_is_refused() {
    for (timeout, ok) in [
        (5_999, false),
        (6_000, true),
        (1_800_000, true),
        (1_800_001, false),
    ] {
        let mut h = Harness::new();
        let mut request = join_request("", None);
        request.session_timeout_ms = timeout;
        let (rid, out) = h.join(request);
        let error = join_response(&out, rid).error;
        let expected = if ok {
            GroupError::MemberIdRequired
        } else {
            GroupError::InvalidSessionTimeout
        };
        assert_eq!(error, Some(expected), "session timeout {timeout}");
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Heartbeat,
    Sync,
    Commit,
}

#[test]
fn requests_are_checked_against_member_and_generation() {
    // (operation, member: 0 = a member, None = unknown, generation, expected)
    type Row = (Op, Option<usize>, i32, Result<(), GroupError>);
    let table: &[Row] = &[
        (Op::Heartbeat, Some(1), 1, Ok(())),
        (
            Op::Heartbeat,
            Some(1),
            0,
            Err(GroupError::IllegalGeneration),
        ),
        (
            Op::Heartbeat,
            Some(1),
            2,
            Err(GroupError::IllegalGeneration),
        ),
        (Op::Heartbeat, None, 1, Err(GroupError::UnknownMemberId)),
        (Op::Sync, Some(1), 1, Ok(())),
        (Op::Sync, Some(1), 0, Err(GroupError::IllegalGeneration)),
        (Op::Sync, None, 1, Err(GroupError::UnknownMemberId)),
        (Op::Commit, Some(1), 1, Ok(())),
        (Op::Commit, Some(1), 0, Err(GroupError::IllegalGeneration)),
        (Op::Commit, None, 1, Err(GroupError::UnknownMemberId)),
        (Op::Commit, None, -1, Err(GroupError::UnknownMemberId)),
    ];
    for (op, member, generation, expected) in table {
        let mut h = Harness::new();
        let ids = h.stable_group(2);
        let member_id = member.map_or("", |i| ids[i].as_str());
        let result = match op {
            Op::Heartbeat => h.heartbeat(member_id, *generation, None),
            Op::Sync => {
                let (rid, out) = h.sync(member_id, *generation, &[]);
                let r = sync_response(&out, rid);
                match r.error {
                    None => {
                        assert_eq!(
                            r.assignment,
                            format!("assignment-of-{member_id}").as_bytes()
                        );
                        Ok(())
                    }
                    Some(e) => Err(e),
                }
            }
            Op::Commit => h
                .engine
                .validate_offset_commit(member_id, *generation, None),
        };
        assert_eq!(
            result, *expected,
            "{op:?} member {member:?} generation {generation}"
        );
    }
}

#[test]
fn requests_during_a_rebalance() {
    let mut h = Harness::new();
    let ids = h.stable_group(2);
    // The leader rejoins: the group rebalances.
    let (leader_join, out) = h.join(join_request(&ids[0], None));
    assert!(response(&out, leader_join).is_none());
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(&ids[1], 1, None),
        Err(GroupError::RebalanceInProgress)
    );
    let (rid, out) = h.sync(&ids[1], 1, &[]);
    assert_eq!(
        sync_response(&out, rid).error,
        Some(GroupError::RebalanceInProgress)
    );
    assert_eq!(h.engine.validate_offset_commit(&ids[1], 1, None), Ok(()));

    let (_, out) = h.join(join_request(&ids[1], None));
    assert_eq!(join_response(&out, leader_join).generation_id, 2);
    assert_eq!(h.engine.state(), GroupState::CompletingRebalance);
    assert_eq!(
        h.engine.validate_offset_commit(&ids[1], 2, None),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(h.heartbeat(&ids[1], 2, None), Ok(()));

    // A follower parked in SyncGroup learns of a new rebalance.
    let (parked, _) = h.sync(&ids[1], 2, &[]);
    let mut rejoin = join_request(&ids[0], None);
    rejoin.protocols = protocols(&["range", "roundrobin"]);
    let (_, out) = h.join(rejoin);
    assert_eq!(
        sync_response(&out, parked).error,
        Some(GroupError::RebalanceInProgress)
    );
}

#[test]
fn simple_consumer_commits_only_to_an_empty_group() {
    let h = Harness::new();
    assert_eq!(h.engine.validate_offset_commit("", -1, None), Ok(()));
    let mut h = Harness::new();
    h.stable_group(1);
    assert_eq!(
        h.engine.validate_offset_commit("", -1, None),
        Err(GroupError::UnknownMemberId)
    );
    h.handle(Event::Unload { now_ms: h.now });
    assert_eq!(
        h.engine.validate_offset_commit("", -1, None),
        Err(GroupError::CoordinatorNotAvailable)
    );
}

#[test]
fn transactional_commits_need_no_member_and_ignore_rebalances() {
    let mut h = Harness::new();
    let ids = h.stable_group(2);
    // TxnOffsetCommit before v3 names no member: accepted in any state.
    assert_eq!(h.engine.validate_txn_offset_commit("", -1, None), Ok(()));
    // With a member, it is checked as OffsetCommit checks it.
    assert_eq!(
        h.engine.validate_txn_offset_commit(&ids[1], 1, None),
        Ok(())
    );
    assert_eq!(
        h.engine.validate_txn_offset_commit(&ids[1], 2, None),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        h.engine.validate_txn_offset_commit("stranger", 1, None),
        Err(GroupError::UnknownMemberId)
    );
    // CompletingRebalance refuses OffsetCommit, not TxnOffsetCommit.
    let (leader_join, _) = h.join(join_request(&ids[0], None));
    let (_, out) = h.join(join_request(&ids[1], None));
    assert_eq!(join_response(&out, leader_join).generation_id, 2);
    assert_eq!(h.engine.state(), GroupState::CompletingRebalance);
    assert_eq!(
        h.engine.validate_offset_commit(&ids[1], 2, None),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        h.engine.validate_txn_offset_commit(&ids[1], 2, None),
        Ok(())
    );
    h.handle(Event::Unload { now_ms: h.now });
    assert_eq!(
        h.engine.validate_txn_offset_commit("", -1, None),
        Err(GroupError::CoordinatorNotAvailable)
    );
}

#[test]
fn member_missing_its_session_timeout_is_removed_and_the_group_rebalances() {
    let mut h = Harness::new();
    let ids = h.stable_group(2);
    // Only the first member heartbeats.
    for _ in 0..2 {
        h.advance(4_000);
        assert_eq!(h.heartbeat(&ids[0], 1, None), Ok(()));
    }
    assert_eq!(h.engine.members().len(), 2);
    h.advance(4_000);
    assert_eq!(
        h.engine.member_ids().collect::<Vec<_>>(),
        vec![ids[0].as_str()]
    );
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(&ids[1], 1, None),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.heartbeat(&ids[0], 1, None),
        Err(GroupError::RebalanceInProgress)
    );

    // The survivor rejoins: everyone has joined, the generation completes at once.
    let (rid, out) = h.join(join_request(&ids[0], None));
    let r = join_response(&out, rid);
    assert_eq!((r.generation_id, r.members.len()), (2, 1));
}

#[test]
fn member_not_rejoining_within_the_rebalance_timeout_is_dropped() {
    let mut h = Harness::new();
    let ids = h.stable_group(3);
    let start = h.now;
    let (leader_join, _) = h.join(join_request(&ids[0], None));
    let (follower_join, _) = h.join(join_request(&ids[1], None));
    // The third keeps heartbeating but never rejoins.
    let mut out = Vec::new();
    while h.engine.state() == GroupState::PreparingRebalance {
        assert_eq!(
            h.heartbeat(&ids[2], 1, None),
            Err(GroupError::RebalanceInProgress)
        );
        out = h.advance(5_000);
    }
    assert_eq!(h.now - start, 30_000);
    assert_eq!(
        h.engine.member_ids().collect::<Vec<_>>(),
        vec![ids[0].as_str(), ids[1].as_str()]
    );
    let r = join_response(&out, leader_join);
    assert_eq!((r.generation_id, r.members.len()), (2, 2));
    assert_eq!(join_response(&out, follower_join).generation_id, 2);
    assert_eq!(
        h.heartbeat(&ids[2], 2, None),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn leader_missing_the_rebalance_is_replaced_by_a_member_that_rejoined() {
    let mut h = Harness::new();
    let ids = h.stable_group(2);
    // The follower rejoins with new metadata; the leader is silent and expires.
    let mut rejoin = join_request(&ids[1], None);
    rejoin.protocols = protocols(&["range", "roundrobin"]);
    let (rid, _) = h.join(rejoin);
    let out = h.complete_join_phase();
    let r = join_response(&out, rid);
    assert_eq!(r.leader, ids[1]);
    assert_eq!(r.members.len(), 1);
    assert_eq!(h.engine.leader_id(), Some(ids[1].as_str()));
}

#[test]
fn pending_sync_members_are_removed() {
    let mut h = Harness::new();
    let ids: Vec<String> = (0..2).map(|_| h.join_new().0).collect();
    h.advance(10_000);
    // Only the leader syncs; the follower never does.
    let leader = h.engine.leader_id().unwrap().to_owned();
    h.sync(&leader, 1, &[(&ids[0], "a"), (&ids[1], "b")]);
    assert_eq!(h.engine.state(), GroupState::Stable);
    for _ in 0..8 {
        h.advance(4_000);
        let _ = h.heartbeat(&ids[0], h.engine.generation_id(), None);
        let _ = h.heartbeat(&ids[1], h.engine.generation_id(), None);
    }
    assert_eq!(
        h.engine.member_ids().collect::<Vec<_>>(),
        vec![ids[0].as_str()]
    );
}

#[test]
fn leave_group_of_two_of_three_members() {
    let mut h = Harness::new();
    let ids = h.stable_group(3);
    let (r, _) = h.leave(&[(&ids[1], None), (&ids[2], None), ("nobody", None)]);
    let errors: Vec<Option<GroupError>> = r.members.iter().map(|m| m.error).collect();
    assert_eq!(errors, vec![None, None, Some(GroupError::UnknownMemberId)]);
    assert_eq!(
        h.engine.member_ids().collect::<Vec<_>>(),
        vec![ids[0].as_str()]
    );
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    assert!(!h.timers.contains_key(&TimerKey::Heartbeat {
        member_id: ids[1].clone()
    }));

    let (rid, out) = h.join(join_request(&ids[0], None));
    let jr = join_response(&out, rid);
    assert_eq!((jr.generation_id, jr.members.len()), (2, 1));

    // The last member leaves: the group is Empty and that is persisted.
    h.sync_all(&ids[..1]);
    let (_, out) = h.leave(&[(&ids[0], None)]);
    assert_eq!(h.engine.state(), GroupState::Empty);
    assert_eq!(h.engine.generation_id(), 3);
    let snapshots = persisted(&out);
    assert_eq!(snapshots.len(), 1);
    assert!(snapshots[0].members.is_empty());
    assert_eq!(snapshots[0].protocol_name, None);
    // The leave response comes after the persisted metadata.
    assert!(matches!(out.last(), Some(Command::Respond { .. })));
}

fn static_join(h: &mut Harness, instance: &str) -> (RequestId, Vec<Command>) {
    let mut request = join_request("", Some(instance));
    request.client_id = instance.to_owned();
    h.join(request)
}

/// Two static members in generation 1, with their member ids.
fn stable_static_group(h: &mut Harness) -> Vec<String> {
    let (a, _) = static_join(h, "a");
    let (b, _) = static_join(h, "b");
    let out = h.complete_join_phase();
    let ids = vec![
        join_response(&out, a).member_id,
        join_response(&out, b).member_id,
    ];
    assert_eq!(ids[0], format!("a-{}", uuid::Uuid::from_u128(2)));
    h.sync_all(&ids);
    ids
}

#[test]
fn static_member_restart_gets_its_assignment_without_a_rebalance() {
    let mut h = Harness::new();
    let ids = stable_static_group(&mut h);
    let (rid, out) = static_join(&mut h, "b");
    let r = join_response(&out, rid);
    assert_eq!(r.error, None);
    assert_eq!(r.generation_id, 1);
    assert_ne!(r.member_id, ids[1]);
    assert_eq!(r.leader, ids[0]);
    assert!(r.members.is_empty());
    assert_eq!(h.engine.state(), GroupState::Stable);
    assert_eq!(h.engine.generation_id(), 1);
    let snapshot = &persisted(&out)[0];
    assert!(snapshot.members.iter().any(|m| m.member_id == r.member_id));
    assert!(!snapshot.members.iter().any(|m| m.member_id == ids[1]));

    let (sid, out) = h.sync(&r.member_id, 1, &[]);
    assert_eq!(
        sync_response(&out, sid).assignment,
        format!("assignment-of-{}", ids[1]).as_bytes()
    );

    // The old id is fenced.
    assert_eq!(
        h.heartbeat(&ids[1], 1, Some("b")),
        Err(GroupError::FencedInstanceId)
    );
    assert_eq!(
        h.heartbeat(&ids[1], 1, None),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.engine.validate_offset_commit(&ids[1], 1, Some("b")),
        Err(GroupError::FencedInstanceId)
    );
    let (jid, out) = h.join(join_request(&ids[1], Some("b")));
    assert_eq!(
        join_response(&out, jid).error,
        Some(GroupError::FencedInstanceId)
    );
    assert_eq!(h.heartbeat(&r.member_id, 1, Some("b")), Ok(()));
}

#[test]
fn static_leader_restart_is_told_to_skip_assignment() {
    for supports_skip in [true, false] {
        let mut h = Harness::new();
        let ids = stable_static_group(&mut h);
        let mut request = join_request("", Some("a"));
        request.supports_skip_assignment = supports_skip;
        let (rid, out) = h.join(request);
        let r = join_response(&out, rid);
        assert_eq!(h.engine.leader_id(), Some(r.member_id.as_str()));
        if supports_skip {
            assert!(r.skip_assignment);
            assert_eq!(r.leader, r.member_id);
            assert_eq!(r.members.len(), 2);
        } else {
            // An old client must not see itself as the leader.
            assert!(!r.skip_assignment);
            assert_eq!(r.leader, ids[0]);
        }
    }
}

#[test]
fn static_member_parked_requests_are_fenced_on_restart() {
    let mut h = Harness::new();
    let ids = stable_static_group(&mut h);
    // The old incarnation's rejoin with new metadata starts a rebalance ...
    let mut request = join_request(&ids[1], Some("b"));
    request.protocols = protocols(&["range", "roundrobin"]);
    let (old_join, _) = h.join(request);
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    // ... and the restarted instance takes over its place.
    let (new_join, out) = static_join(&mut h, "b");
    assert_eq!(
        join_response(&out, old_join).error,
        Some(GroupError::FencedInstanceId)
    );
    assert!(response(&out, new_join).is_none());
    let (_, out) = h.join(join_request(&ids[0], Some("a")));
    let r = join_response(&out, new_join);
    assert_eq!(r.generation_id, 2);
    assert_eq!(h.engine.members().len(), 2);
}

#[test]
fn static_members_are_kept_when_they_miss_a_rebalance() {
    let mut h = Harness::new();
    let ids = stable_static_group(&mut h);
    let (rid, _) = h.join(join_request(&ids[0], Some("a")));
    // b heartbeats but does not rejoin; being static, it stays in the group.
    for _ in 0..8 {
        let _ = h.heartbeat(&ids[1], 1, Some("b"));
        h.advance(4_000);
    }
    assert_eq!(h.engine.state(), GroupState::CompletingRebalance);
    assert_eq!(h.engine.members().len(), 2);
    assert_eq!(
        h.log
            .iter()
            .filter(|c| matches!(c, Command::Respond { request_id, .. } if *request_id == rid))
            .count(),
        1
    );
}

#[test]
fn leave_by_instance_id_removes_a_static_member() {
    let mut h = Harness::new();
    let ids = stable_static_group(&mut h);
    let (r, _) = h.leave(&[("", Some("b")), ("", Some("zzz"))]);
    let errors: Vec<Option<GroupError>> = r.members.iter().map(|m| m.error).collect();
    assert_eq!(errors, vec![None, Some(GroupError::UnknownMemberId)]);
    assert_eq!(
        h.engine.member_ids().collect::<Vec<_>>(),
        vec![ids[0].as_str()]
    );
    let (r, _) = h.leave(&[(&ids[0], Some("wrong"))]);
    assert_eq!(r.members[0].error, Some(GroupError::UnknownMemberId));
}

#[test]
fn selected_protocol_is_the_most_preferred_common_one() {
    let table: &[(&[&[&str]], &str)] = &[
        (&[&["range"]], "range"),
        (
            &[
                &["cooperative-sticky", "range"],
                &["cooperative-sticky", "range"],
            ],
            "cooperative-sticky",
        ),
        (
            &[
                &["range", "cooperative-sticky"],
                &["cooperative-sticky", "range"],
                &["cooperative-sticky", "range"],
            ],
            "cooperative-sticky",
        ),
        (
            &[
                &["range", "cooperative-sticky"],
                &["range", "cooperative-sticky"],
                &["cooperative-sticky", "range"],
            ],
            "range",
        ),
        (
            &[&["roundrobin", "range"], &["cooperative-sticky", "range"]],
            "range",
        ),
    ];
    for (members, expected) in table {
        let mut h = Harness::new();
        let mut parked = Vec::new();
        for names in *members {
            let mut request = join_request("", None);
            request.require_known_member_id = false;
            request.protocols = protocols(names);
            parked.push(h.join(request).0);
        }
        let out = h.complete_join_phase();
        assert_eq!(h.engine.protocol_name(), Some(*expected), "{members:?}");
        let leader = join_response(&out, parked[0]);
        let metadata = format!("{expected}-meta");
        assert!(leader
            .members
            .iter()
            .all(|m| m.metadata == metadata.as_bytes()));
    }
}

#[test]
fn cooperative_members_keep_their_partitions_while_rejoining() {
    let mut h = Harness::new();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut request = join_request("", None);
        request.require_known_member_id = false;
        request.protocols = protocols(&["cooperative-sticky", "range"]);
        let (rid, _) = h.join(request);
        ids.push(rid);
    }
    let out = h.complete_join_phase();
    let ids: Vec<String> = ids
        .iter()
        .map(|r| join_response(&out, *r).member_id)
        .collect();
    assert_eq!(h.engine.protocol_name(), Some("cooperative-sticky"));
    h.sync_all(&ids);

    // A third member joins: a rebalance starts, the others rejoin keeping what
    // they own (the engine leaves their assignment alone until the next sync).
    let mut request = join_request("", None);
    request.require_known_member_id = false;
    request.protocols = protocols(&["cooperative-sticky", "range"]);
    let (new_rid, _) = h.join(request);
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    for id in &ids {
        assert_eq!(
            h.engine.member(id).unwrap().assignment,
            format!("assignment-of-{id}").as_bytes()
        );
        let mut rejoin = join_request(id, None);
        rejoin.protocols = protocols(&["cooperative-sticky", "range"]);
        h.join(rejoin);
    }
    let out = h.collect_log_since_start();
    let third = join_response(&out, new_rid).member_id;
    assert_eq!(h.engine.generation_id(), 2);
    let all: Vec<String> = ids.iter().cloned().chain([third]).collect();
    h.sync_all(&all);

    // Second cooperative round: the leader rejoins after revoking, which starts
    // another rebalance, as in Kafka.
    let mut rejoin = join_request(&ids[0], None);
    rejoin.protocols = protocols(&["cooperative-sticky", "range"]);
    h.join(rejoin);
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
}

/// A cooperative-sticky JoinGroup whose metadata names what the member owns.
fn cooperative_join(member_id: &str, owned: &str) -> JoinGroup {
    let mut request = join_request(member_id, None);
    request.protocols = vec![Protocol::new(
        "cooperative-sticky",
        format!("owned:{owned}"),
    )];
    request
}

/// Three cooperative members formed generation 1; returns their ids, the
/// leader first, with the group in CompletingRebalance.
fn completing_cooperative_group(h: &mut Harness) -> Vec<String> {
    let owned = ["0,1", "2,3", "4,5"];
    let mut parked = Vec::new();
    for owns in owned {
        let mut request = cooperative_join("", owns);
        request.require_known_member_id = false;
        parked.push(h.join(request).0);
    }
    let out = h.complete_join_phase();
    parked
        .iter()
        .map(|r| join_response(&out, *r).member_id)
        .collect()
}

#[test]
fn a_known_member_rejoining_a_formed_generation() {
    use GroupState::{CompletingRebalance, PreparingRebalance, Stable};
    // (state, the leader rejoins, with changed metadata, state after, answered at once)
    let table = [
        // A lost JoinGroup response asked again: the current generation.
        (CompletingRebalance, false, false, CompletingRebalance, true),
        (CompletingRebalance, true, false, CompletingRebalance, true),
        (CompletingRebalance, false, true, PreparingRebalance, false),
        (CompletingRebalance, true, true, PreparingRebalance, false),
        // KIP-429: a follower that revoked rejoins with what it still owns.
        (Stable, false, false, Stable, true),
        (Stable, false, true, PreparingRebalance, false),
        // The leader rejoining always rebalances (topic metadata may have changed).
        (Stable, true, false, PreparingRebalance, false),
        (Stable, true, true, PreparingRebalance, false),
    ];
    for (state, leader, changed, after, answered) in table {
        let case = format!("{state} leader={leader} changed={changed}");
        let mut h = Harness::new();
        let ids = completing_cooperative_group(&mut h);
        if state == Stable {
            h.sync_all(&ids);
        }
        let (member, owns) = if leader {
            (&ids[0], "0,1")
        } else {
            (&ids[2], "4,5")
        };
        let owns = if changed { "5" } else { owns };
        let (rid, out) = h.join(cooperative_join(member, owns));
        assert_eq!(h.engine.state(), after, "{case}");
        assert_eq!(h.engine.generation_id(), 1, "{case}");
        match response(&out, rid) {
            Some(Response::Join(r)) => {
                assert!(answered, "{case}: answered {r:?}");
                assert_eq!((r.error, r.generation_id), (None, 1), "{case}");
                assert_eq!(r.members.len(), if leader { 3 } else { 0 }, "{case}");
            }
            None => assert!(!answered, "{case}: parked"),
            other => panic!("{case}: {other:?}"),
        }
    }
}

#[test]
fn a_member_that_revoked_starts_the_follow_up_rebalance() {
    let mut h = Harness::new();
    let ids = completing_cooperative_group(&mut h);
    h.sync_all(&ids);
    // A fourth member joins; the leader's assignment leaves out partition 4,
    // which the third member must give up first.
    let (rid, out) = h.join(cooperative_join("", ""));
    let fourth = join_response(&out, rid).member_id;
    h.join(cooperative_join(&fourth, ""));
    for (id, owns) in ids.iter().zip(["0,1", "2,3", "4,5"]) {
        assert_eq!(
            h.heartbeat(id, 1, None),
            Err(GroupError::RebalanceInProgress)
        );
        h.join(cooperative_join(id, owns));
    }
    assert_eq!(h.engine.state(), GroupState::CompletingRebalance);
    assert_eq!(h.engine.generation_id(), 2);
    let all: Vec<String> = ids.iter().cloned().chain([fourth.clone()]).collect();
    h.sync_all(&all);

    // The third member revoked 4 and rejoins owning only 5; the others hear
    // of the rebalance from their heartbeats and rejoin as they were.
    let (revoker, _) = h.join(cooperative_join(&ids[2], "5"));
    assert_eq!(h.engine.state(), GroupState::PreparingRebalance);
    let mut rejoins = Vec::new();
    for (id, owns) in [(&ids[0], "0,1"), (&ids[1], "2,3"), (&fourth, "")] {
        assert_eq!(
            h.heartbeat(id, 2, None),
            Err(GroupError::RebalanceInProgress)
        );
        rejoins.push(h.join(cooperative_join(id, owns)).0);
    }
    let out = h.collect_log_since_start();
    assert_eq!(h.engine.state(), GroupState::CompletingRebalance);
    assert_eq!(h.engine.generation_id(), 3);
    assert_eq!(join_response(&out, revoker).generation_id, 3);
    // The leader assigns from what each member owns now: partition 4 is free.
    let leader = join_response(&out, rejoins[0]);
    let revoker_metadata = leader
        .members
        .iter()
        .find(|m| m.member_id == ids[2])
        .map(|m| m.metadata.clone());
    assert_eq!(revoker_metadata.as_deref(), Some(&b"owned:5"[..]));
}

impl Harness {
    fn collect_log_since_start(&mut self) -> Vec<Command> {
        self.collect();
        self.log.clone()
    }
}

#[test]
fn snapshot_load_round_trip() {
    let mut h = Harness::new();
    let ids = h.stable_group(3);
    let snapshot = h.engine.snapshot();
    assert_eq!(persisted(&h.log).last(), Some(&snapshot));

    let loaded = GroupEngine::load("g", GroupConfig::default(), snapshot.clone(), h.now);
    assert_eq!(loaded.snapshot(), snapshot);
    assert_eq!(loaded.state(), GroupState::Stable);
    assert_eq!(loaded.generation_id(), h.engine.generation_id());
    assert_eq!(loaded.leader_id(), h.engine.leader_id());
    assert_eq!(loaded.protocol_type(), Some("consumer"));
    assert_eq!(loaded.protocol_name(), Some("range"));

    let now = h.now;
    let mut l = Harness::with(loaded);
    l.now = now;
    for id in &ids {
        assert_eq!(
            l.timers.get(&TimerKey::Heartbeat {
                member_id: id.clone()
            }),
            Some(&(now + 10_000))
        );
        assert_eq!(l.heartbeat(id, 1, None), Ok(()));
        let (rid, out) = l.sync(id, 1, &[]);
        assert_eq!(
            sync_response(&out, rid).assignment,
            format!("assignment-of-{id}").as_bytes()
        );
    }
    // An empty group loads as Empty.
    let empty = GroupEngine::load("g", GroupConfig::default(), GroupSnapshot::default(), 0);
    assert_eq!(empty.state(), GroupState::Empty);
}

#[test]
fn unload_answers_parked_requests() {
    let mut h = Harness::new();
    let (_, rid) = h.join_new();
    let out = h.handle(Event::Unload { now_ms: h.now });
    assert_eq!(
        join_response(&out, rid).error,
        Some(GroupError::NotCoordinator)
    );
    assert_eq!(h.engine.state(), GroupState::Dead);
    assert!(h.timers.is_empty());
    let (rid, out) = h.join(join_request("", None));
    assert_eq!(
        join_response(&out, rid).error,
        Some(GroupError::CoordinatorNotAvailable)
    );
}

#[test]
fn group_max_size() {
    let mut h = Harness::with(GroupEngine::new(
        "g",
        GroupConfig {
            max_size: 2,
            ..GroupConfig::default()
        },
    ));
    h.stable_group(2);
    let (rid, out) = h.join(join_request("", None));
    assert_eq!(
        join_response(&out, rid).error,
        Some(GroupError::GroupMaxSizeReached)
    );
}

#[test]
fn error_codes_are_kafkas() {
    let table = [
        (GroupError::CoordinatorNotAvailable, 15),
        (GroupError::NotCoordinator, 16),
        (GroupError::IllegalGeneration, 22),
        (GroupError::InconsistentGroupProtocol, 23),
        (GroupError::UnknownMemberId, 25),
        (GroupError::InvalidSessionTimeout, 26),
        (GroupError::RebalanceInProgress, 27),
        (GroupError::MemberIdRequired, 79),
        (GroupError::GroupMaxSizeReached, 81),
        (GroupError::FencedInstanceId, 82),
    ];
    for (error, code) in table {
        assert_eq!(error.code(), code, "{error:?}");
    }
    assert_eq!(error_code(None), 0);
}

mod cooperative;
mod invariants;
