//! Random schedules of clients that follow the protocol (joining, heartbeating
//! with what they own, applying assignments late, leaving, restarting static
//! members, changing subscriptions) mixed with clock jumps that fire timers
//! and topic changes, checking named invariants:
//!
//! - `no_partition_owned_twice`: after every step, no partition is assigned or
//!   pending revocation in two members' current assignments, and no two
//!   clients that are still members consume the same partition;
//! - `the_group_settles`: once every client heartbeats reporting what it owns
//!   and nothing else changes, the group becomes Stable with every partition
//!   of every subscribed topic owned by exactly one member, each member owning
//!   its target (and, with the uniform assignor, members of the same
//!   subscription within one partition of each other);
//! - `replay_rebuilds_the_group`: replaying every record emitted so far gives
//!   the same state, before and after settling.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::super::*;
use super::{assert_no_partition_owned_twice, Harness, REBALANCE_MS};

const CLIENTS: usize = 4;
const TOPICS: [&str; 3] = ["t0", "t1", "t2"];

#[derive(Debug, Clone)]
enum Step {
    /// A client that is not a member joins.
    Join {
        client: usize,
    },
    /// A member heartbeats; it says what it owns unless `silent`.
    Heartbeat {
        client: usize,
        silent: bool,
    },
    /// The client's application catches up with the last assignment it got
    /// (revoking what it lost, taking what it gained).
    Apply {
        client: usize,
    },
    /// A member changes its subscription.
    Subscribe {
        client: usize,
        topics: u8,
    },
    /// A member leaves (a static one may leave for a while, epoch -2, and
    /// comes back under a new member id).
    Leave {
        client: usize,
        temporarily: bool,
    },
    Advance {
        ms: u64,
    },
    AddPartitions {
        topic: usize,
        more: i32,
    },
    DeleteTopic {
        topic: usize,
    },
    CreateTopic {
        topic: usize,
        partitions: i32,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let client = 0..CLIENTS;
    let topic = 0..TOPICS.len();
    prop_oneof![
        3 => client.clone().prop_map(|client| Step::Join { client }),
        6 => (client.clone(), prop::bool::weighted(0.1))
            .prop_map(|(client, silent)| Step::Heartbeat { client, silent }),
        4 => client.clone().prop_map(|client| Step::Apply { client }),
        1 => (client.clone(), 1..8u8).prop_map(|(client, topics)| Step::Subscribe { client, topics }),
        1 => (client, any::<bool>())
            .prop_map(|(client, temporarily)| Step::Leave { client, temporarily }),
        2 => prop_oneof![0..6_000u64, 20_000..50_000u64].prop_map(|ms| Step::Advance { ms }),
        1 => (topic.clone(), 1..3i32).prop_map(|(topic, more)| Step::AddPartitions { topic, more }),
        1 => topic.clone().prop_map(|topic| Step::DeleteTopic { topic }),
        1 => (topic, 1..5i32).prop_map(|(topic, partitions)| Step::CreateTopic { topic, partitions }),
    ]
}

/// What a client believes.
#[derive(Debug, Clone, Default)]
struct Client {
    /// Whether it thinks it is a member.
    joined: bool,
    epoch: i32,
    /// Restarts so far; a static client comes back under a new member id.
    incarnation: u32,
    /// Topic names, as a bit set over [`TOPICS`].
    subscription: u8,
    /// What its application consumes.
    owned: Assignment,
    /// The last assignment received and not yet applied.
    pending: Option<Assignment>,
}

/// Clients 0 and 1 are static (instance ids "i0", "i1"); 2 and 3 dynamic.
fn instance(client: usize) -> Option<String> {
    (client < 2).then(|| format!("i{client}"))
}

struct Run {
    h: Harness,
    clients: Vec<Client>,
    assignor: &'static str,
    next_topic_id: u128,
}

impl Run {
    fn new(range: bool) -> Self {
        let mut h = Harness::new();
        h.topics = TopicsImage::new();
        h.topics.insert("t0", uuid::Uuid::from_u128(1), 4);
        h.topics.insert("t1", uuid::Uuid::from_u128(2), 3);
        Self {
            h,
            clients: (0..CLIENTS)
                .map(|i| Client {
                    subscription: if i % 2 == 0 { 0b011 } else { 0b110 },
                    ..Client::default()
                })
                .collect(),
            assignor: if range { "range" } else { "uniform" },
            next_topic_id: 100,
        }
    }

    fn member_id(&self, client: usize) -> String {
        format!("c{client}-{}", self.clients[client].incarnation)
    }

    fn names(subscription: u8) -> Vec<String> {
        TOPICS
            .iter()
            .enumerate()
            .filter(|(i, _)| subscription & (1 << i) != 0)
            .map(|(_, t)| (*t).to_owned())
            .collect()
    }

    fn request(&self, client: usize, epoch: i32) -> HeartbeatRequest {
        HeartbeatRequest {
            member_id: self.member_id(client),
            member_epoch: epoch,
            instance_id: instance(client),
            client_id: format!("client-{client}"),
            client_host: "/127.0.0.1".into(),
            ..HeartbeatRequest::default()
        }
    }

    /// Sends a heartbeat and updates the client from the response.
    fn send(&mut self, client: usize, request: HeartbeatRequest) {
        let out = self.h.send(request);
        let c = &mut self.clients[client];
        match out.response.expect("a heartbeat is answered") {
            Ok(response) if response.member_epoch >= 0 => {
                c.joined = true;
                c.epoch = response.member_epoch;
                if let Some(assignment) = response.assignment {
                    c.pending = Some(assignment);
                }
            }
            Ok(_) => {}
            Err(
                ConsumerGroupError::FencedMemberEpoch
                | ConsumerGroupError::UnknownMemberId
                | ConsumerGroupError::UnreleasedInstanceId,
            ) => {
                // Give everything up and rejoin later.
                c.joined = false;
                c.epoch = 0;
                c.owned.clear();
                c.pending = None;
            }
            Err(other) => panic!("client {client}: unexpected {other:?}"),
        }
    }

    fn join(&mut self, client: usize) {
        let c = &self.clients[client];
        if c.joined {
            return;
        }
        let request = HeartbeatRequest {
            rebalance_timeout_ms: REBALANCE_MS,
            subscribed_topic_names: Some(Self::names(c.subscription)),
            server_assignor: Some(self.assignor.to_owned()),
            owned_partitions: Some(Assignment::new()),
            ..self.request(client, 0)
        };
        self.clients[client].owned.clear();
        self.send(client, request);
    }

    fn heartbeat(&mut self, client: usize, silent: bool) {
        let c = &self.clients[client];
        if !c.joined {
            return;
        }
        let request = HeartbeatRequest {
            owned_partitions: (!silent).then(|| c.owned.clone()),
            ..self.request(client, c.epoch)
        };
        self.send(client, request);
    }

    fn apply(&mut self, client: usize) {
        let c = &mut self.clients[client];
        if let Some(assignment) = c.pending.take() {
            c.owned = assignment;
        }
    }

    fn apply_step(&mut self, step: &Step) {
        match *step {
            Step::Join { client } => self.join(client),
            Step::Heartbeat { client, silent } => self.heartbeat(client, silent),
            Step::Apply { client } => self.apply(client),
            Step::Subscribe { client, topics } => {
                self.clients[client].subscription = topics;
                if self.clients[client].joined {
                    let c = &self.clients[client];
                    let request = HeartbeatRequest {
                        subscribed_topic_names: Some(Self::names(topics)),
                        owned_partitions: Some(c.owned.clone()),
                        ..self.request(client, c.epoch)
                    };
                    self.send(client, request);
                }
            }
            Step::Leave {
                client,
                temporarily,
            } => {
                if !self.clients[client].joined {
                    return;
                }
                let temporarily = temporarily && instance(client).is_some();
                let epoch = if temporarily {
                    LEAVE_GROUP_STATIC_MEMBER_EPOCH
                } else {
                    LEAVE_GROUP_MEMBER_EPOCH
                };
                let request = self.request(client, epoch);
                self.send(client, request);
                let c = &mut self.clients[client];
                c.joined = false;
                c.owned.clear();
                c.pending = None;
                if temporarily {
                    c.incarnation += 1;
                }
            }
            Step::Advance { ms } => self.h.advance(ms),
            Step::AddPartitions { topic, more } => {
                if let Some(t) = self.h.topics.topic(TOPICS[topic]) {
                    self.h
                        .topics
                        .insert(TOPICS[topic], t.id, t.partitions + more);
                    self.h.metadata_changed();
                }
            }
            Step::DeleteTopic { topic } => {
                if self.h.topics.remove(TOPICS[topic]).is_some() {
                    self.h.metadata_changed();
                }
            }
            Step::CreateTopic { topic, partitions } => {
                if self.h.topics.topic(TOPICS[topic]).is_none() {
                    self.next_topic_id += 1;
                    let id = uuid::Uuid::from_u128(self.next_topic_id);
                    self.h.topics.insert(TOPICS[topic], id, partitions);
                    self.h.metadata_changed();
                }
            }
        }
    }

    fn check_invariants(&self) {
        let engine = &self.h.engine;
        assert_no_partition_owned_twice(engine);
        // What clients consume: two clients the group still has never consume
        // the same partition. (A client fenced behind its back may, until its
        // next heartbeat tells it; its offset commits are refused meanwhile.)
        let mut consumers: BTreeMap<(uuid::Uuid, i32), usize> = BTreeMap::new();
        for (client, c) in self.clients.iter().enumerate() {
            if !c.joined || engine.member(&self.member_id(client)).is_none() {
                continue;
            }
            for (topic, partitions) in &c.owned {
                for p in partitions {
                    if let Some(other) = consumers.insert((*topic, *p), client) {
                        panic!("{topic}-{p} consumed by clients {other} and {client}");
                    }
                }
            }
        }
        assert!(engine.assignment_epoch() <= engine.group_epoch());
        for member in engine.members() {
            assert!(
                member.member_epoch() <= engine.assignment_epoch(),
                "{} at epoch {} past the assignment epoch {}",
                member.member_id,
                member.member_epoch(),
                engine.assignment_epoch()
            );
        }
    }

    /// Every client (re)joins and heartbeats, applying what it gets, while
    /// the clock moves in small steps.
    fn settle(&mut self) {
        self.h.metadata_changed();
        for _ in 0..40 {
            self.h.advance(3_000);
            for client in 0..CLIENTS {
                if self.clients[client].joined {
                    self.apply(client);
                    self.heartbeat(client, false);
                } else {
                    self.join(client);
                }
                self.check_invariants();
            }
        }
        for client in 0..CLIENTS {
            self.apply(client);
        }
    }

    fn check_settled(&self) {
        let engine = &self.h.engine;
        assert_eq!(
            engine.state(),
            ConsumerGroupState::Stable,
            "{:#?}",
            engine.describe()
        );
        let mut owners: BTreeMap<(uuid::Uuid, i32), &str> = BTreeMap::new();
        for member in engine.members() {
            let target = engine
                .target_assignment(&member.member_id)
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                member.current.assigned, target,
                "{} is not at its target",
                member.member_id
            );
            assert!(member.current.pending_revocation.is_empty());
            for (topic, partition) in member.current.owned() {
                assert!(owners
                    .insert((topic, partition), &member.member_id)
                    .is_none());
            }
        }
        // Every partition of every topic a member subscribes to is owned.
        for client in 0..CLIENTS {
            let c = &self.clients[client];
            assert!(c.joined, "client {client} did not get back in");
            let member = engine.member(&self.member_id(client)).expect("a member");
            assert_eq!(
                c.owned, member.current.assigned,
                "client {client} owns what it is told"
            );
            for name in Self::names(c.subscription) {
                if let Some(topic) = self.h.topics.topic(&name) {
                    for p in 0..topic.partitions {
                        assert!(
                            owners.contains_key(&(topic.id, p)),
                            "{name}-{p} is not owned: {:#?}",
                            engine.describe()
                        );
                    }
                }
            }
        }
        let subscribed: BTreeSet<&str> = engine.subscribed_topic_names().collect();
        for (topic, partition) in owners.keys() {
            let name = self
                .h
                .topics
                .topics()
                .iter()
                .find(|(_, t)| t.id == *topic)
                .map(|(name, _)| name.as_str());
            assert!(
                name.is_some_and(|n| subscribed.contains(n)),
                "{topic}-{partition} is owned but not subscribed"
            );
        }
        if self.assignor == "uniform" {
            let members: Vec<&Member> = engine.members().collect();
            for a in &members {
                for b in &members {
                    if a.metadata.subscribed_topic_names == b.metadata.subscribed_topic_names {
                        let (ca, cb) = (
                            partition_count(&a.current.assigned),
                            partition_count(&b.current.assigned),
                        );
                        assert!(
                            ca <= cb + 1,
                            "{} has {ca}, {} has {cb}",
                            a.member_id,
                            b.member_id
                        );
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_keep_the_invariants(
        range in prop::bool::weighted(0.3),
        steps in prop::collection::vec(step(), 1..80),
    ) {
        let mut run = Run::new(range);
        for step in &steps {
            run.apply_step(step);
            run.check_invariants();
        }
        run.h.assert_replay_matches();
        run.settle();
        run.check_settled();
        run.h.assert_replay_matches();
    }
}
