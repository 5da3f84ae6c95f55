//! Tests of the consumer group engine: a small harness plays the coordinator
//! (it owns the clock, the topics and the timers, fires timers as time
//! advances, and keeps every record the engine emitted) and the tests assert on
//! responses, records and the group's state.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::*;

mod assignors;
mod classic;
mod engine;
mod properties;
mod reconciliation;

const REBALANCE_MS: i32 = 30_000;

fn topic_id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// An assignment from (topic number, partitions) pairs.
fn parts(topics: &[(u128, &[i32])]) -> Assignment {
    assignment_from(
        topics
            .iter()
            .map(|(topic, partitions)| (topic_id(*topic), partitions.iter().copied())),
    )
}

/// A first heartbeat of `member_id` subscribing to `topics`.
fn join(member_id: &str, topics: &[&str]) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member_id.to_owned(),
        member_epoch: 0,
        rebalance_timeout_ms: REBALANCE_MS,
        subscribed_topic_names: Some(topics.iter().map(|t| (*t).to_owned()).collect()),
        owned_partitions: Some(Assignment::new()),
        client_id: format!("client-{member_id}"),
        client_host: "/127.0.0.1".to_owned(),
        ..HeartbeatRequest::default()
    }
}

/// A regular heartbeat reporting `owned`.
fn beat(member_id: &str, epoch: i32, owned: Option<Assignment>) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member_id.to_owned(),
        member_epoch: epoch,
        owned_partitions: owned,
        client_id: format!("client-{member_id}"),
        client_host: "/127.0.0.1".to_owned(),
        ..HeartbeatRequest::default()
    }
}

/// Plays the coordinator.
struct Harness {
    engine: ConsumerGroupEngine,
    topics: TopicsImage,
    now: u64,
    next_uuid: u128,
    timers: BTreeMap<TimerKey, u64>,
    /// Every record emitted, in order: the group's log.
    log: Vec<Record>,
}

impl Harness {
    fn new() -> Self {
        Self::with_config(ConsumerGroupConfig::default())
    }

    fn with_config(config: ConsumerGroupConfig) -> Self {
        let mut topics = TopicsImage::new();
        topics.insert("foo", topic_id(1), 6);
        topics.insert("bar", topic_id(2), 3);
        Self {
            engine: ConsumerGroupEngine::new("g", config),
            topics,
            now: 0,
            next_uuid: 1000,
            timers: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    fn collect(&mut self, out: Output) -> Output {
        for timer in &out.timers {
            match timer {
                TimerCommand::Schedule { key, at_ms } => {
                    self.timers.insert(key.clone(), *at_ms);
                }
                TimerCommand::Cancel { key } => {
                    self.timers.remove(key);
                }
            }
        }
        self.log.extend(out.records.iter().cloned());
        out
    }

    fn event(&mut self, event: Event) -> Output {
        let out = self.engine.handle(event, &self.topics);
        self.collect(out)
    }

    fn send(&mut self, request: HeartbeatRequest) -> Output {
        self.next_uuid += 1;
        self.event(Event::Heartbeat {
            now_ms: self.now,
            request,
            fresh_member_id: Uuid::from_u128(self.next_uuid),
        })
    }

    /// Sends a heartbeat that must succeed.
    fn ok(&mut self, request: HeartbeatRequest) -> HeartbeatResponse {
        match self.send(request).response {
            Some(Ok(response)) => response,
            other => panic!("expected a successful response, got {other:?}"),
        }
    }

    /// Sends a heartbeat that must fail; nothing may change.
    fn err(&mut self, request: HeartbeatRequest) -> ConsumerGroupError {
        let out = self.send(request);
        assert!(out.records.is_empty(), "a refused heartbeat wrote {out:?}");
        match out.response {
            Some(Err(error)) => error,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    fn metadata_changed(&mut self) -> Output {
        self.event(Event::MetadataChanged { now_ms: self.now })
    }

    /// Moves the clock, firing due timers in deadline order.
    fn advance(&mut self, ms: u64) {
        let until = self.now + ms;
        loop {
            let due = self
                .timers
                .iter()
                .filter(|(_, at)| **at <= until)
                .min_by_key(|(key, at)| (**at, (*key).clone()))
                .map(|(key, at)| (key.clone(), *at));
            let Some((key, at)) = due else { break };
            self.timers.remove(&key);
            self.now = self.now.max(at);
            self.event(Event::Timer {
                now_ms: self.now,
                key,
            });
        }
        self.now = until;
    }

    fn member(&self, member_id: &str) -> &Member {
        self.engine
            .member(member_id)
            .unwrap_or_else(|| panic!("no member {member_id}"))
    }

    /// An engine rebuilt from the log.
    fn replayed(&self) -> ConsumerGroupEngine {
        let mut engine = ConsumerGroupEngine::new("g", self.engine.config().clone());
        for record in &self.log {
            engine.replay(record).expect("the engine's own log replays");
        }
        engine
    }

    /// Checks that replaying the log gives the engine's state.
    fn assert_replay_matches(&self) {
        assert_eq!(self.replayed().persisted(), self.engine.persisted());
    }
}

/// Checks that no partition is owned (assigned or pending revocation) by two
/// members, and that the engine's partition index agrees with the members.
fn assert_no_partition_owned_twice(engine: &ConsumerGroupEngine) {
    let mut owners: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
    for member in engine.members() {
        for (topic, partition) in member.current.owned() {
            if let Some(other) = owners.insert((topic, partition), &member.member_id) {
                assert_eq!(
                    other, member.member_id,
                    "{topic}-{partition} owned by {other} and {}",
                    member.member_id
                );
            }
        }
    }
    let indexed: BTreeSet<(Uuid, i32)> = engine
        .persisted()
        .partition_epochs
        .iter()
        .flat_map(|(topic, partitions)| partitions.keys().map(move |p| (*topic, *p)))
        .collect();
    let owned: BTreeSet<(Uuid, i32)> = owners.keys().copied().collect();
    assert_eq!(
        indexed, owned,
        "the partition index disagrees with the members"
    );
}
