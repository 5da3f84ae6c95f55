//! Random event sequences from a handful of clients that follow the protocol
//! (more or less), checking named invariants after every event.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::super::*;
use super::{join_request, protocols, Harness};

#[derive(Debug, Clone)]
enum Step {
    /// Client joins (with its member id if it has one, else empty).
    Join {
        client: usize,
        new_metadata: bool,
    },
    /// Client restarts: joins with an empty member id.
    Restart {
        client: usize,
    },
    Sync {
        client: usize,
    },
    Heartbeat {
        client: usize,
    },
    Leave {
        client: usize,
    },
    Advance {
        ms: u64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let client = 0..4usize;
    // Weighted so that groups often get as far as Stable before the next upset.
    prop_oneof![
        3 => (client.clone(), prop::bool::weighted(0.2))
            .prop_map(|(client, new_metadata)| Step::Join { client, new_metadata }),
        1 => client.clone().prop_map(|client| Step::Restart { client }),
        4 => client.clone().prop_map(|client| Step::Sync { client }),
        2 => client.clone().prop_map(|client| Step::Heartbeat { client }),
        1 => client.prop_map(|client| Step::Leave { client }),
        2 => (0..6_000u64).prop_map(|ms| Step::Advance { ms }),
    ]
}

/// What a client believes: its member id and generation.
#[derive(Debug, Clone, Default)]
struct Client {
    member_id: String,
    generation: i32,
}

/// Clients 0 and 1 are static (instance ids "s0", "s1"); 2 and 3 are dynamic.
fn instance(client: usize) -> Option<String> {
    (client < 2).then(|| format!("s{client}"))
}

struct Run {
    h: Harness,
    clients: Vec<Client>,
    /// Request id → client that sent it.
    sent: BTreeMap<RequestId, usize>,
    answered: BTreeSet<RequestId>,
    max_generation: i32,
}

impl Run {
    fn apply(&mut self, step: &Step) {
        let out = match step.clone() {
            Step::Join {
                client,
                new_metadata,
            } => {
                let mut request =
                    join_request(&self.clients[client].member_id, instance(client).as_deref());
                request.client_id = format!("c{client}");
                if new_metadata {
                    request.protocols = protocols(&["cooperative-sticky", "range"]);
                }
                let (rid, out) = self.h.join(request);
                self.sent.insert(rid, client);
                out
            }
            Step::Restart { client } => {
                let mut request = join_request("", instance(client).as_deref());
                request.client_id = format!("c{client}");
                let (rid, out) = self.h.join(request);
                self.sent.insert(rid, client);
                out
            }
            Step::Sync { client } => {
                let c = self.clients[client].clone();
                let assignments: Vec<(String, String)> =
                    if self.h.engine.leader_id() == Some(c.member_id.as_str()) {
                        self.h
                            .engine
                            .member_ids()
                            .map(|m| (m.to_owned(), format!("a-{m}")))
                            .collect()
                    } else {
                        Vec::new()
                    };
                let borrowed: Vec<(&str, &str)> = assignments
                    .iter()
                    .map(|(m, a)| (m.as_str(), a.as_str()))
                    .collect();
                let (rid, out) = self.h.sync(&c.member_id, c.generation, &borrowed);
                self.sent.insert(rid, client);
                out
            }
            Step::Heartbeat { client } => {
                let c = self.clients[client].clone();
                let _ = self
                    .h
                    .heartbeat(&c.member_id, c.generation, instance(client).as_deref());
                Vec::new()
            }
            Step::Leave { client } => {
                let c = self.clients[client].clone();
                let (_, out) = self.h.leave(&[(&c.member_id, instance(client).as_deref())]);
                self.clients[client] = Client::default();
                out
            }
            Step::Advance { ms } => self.h.advance(ms),
        };
        self.observe(&out);
        self.check();
    }

    fn observe(&mut self, out: &[Command]) {
        for command in out {
            let Command::Respond {
                request_id,
                response,
            } = command
            else {
                continue;
            };
            // Every request is answered exactly once.
            assert!(
                self.answered.insert(*request_id),
                "request {request_id} answered twice"
            );
            let Some(&client) = self.sent.get(request_id) else {
                continue;
            };
            let c = &mut self.clients[client];
            match response {
                Response::Join(r) => match r.error {
                    None | Some(GroupError::MemberIdRequired) => {
                        c.member_id = r.member_id.clone();
                        c.generation = r.generation_id;
                    }
                    Some(GroupError::UnknownMemberId | GroupError::FencedInstanceId) => {
                        *c = Client::default()
                    }
                    Some(_) => {}
                },
                Response::Sync(r) => {
                    if matches!(
                        r.error,
                        Some(GroupError::UnknownMemberId | GroupError::FencedInstanceId)
                    ) {
                        *c = Client::default();
                    }
                }
                _ => {}
            }
        }
    }

    fn check(&mut self) {
        let e = &self.h.engine;
        let state = e.state();
        let ids: Vec<&str> = e.member_ids().collect();

        // generation_never_decreases
        assert!(
            e.generation_id() >= self.max_generation,
            "generation went back"
        );
        self.max_generation = e.generation_id();

        // one_leader_iff_members: the leader is a member, and there is one
        // whenever there are members.
        match e.leader_id() {
            Some(leader) => assert!(ids.contains(&leader), "leader {leader} is not a member"),
            None => assert!(
                ids.is_empty() || state == GroupState::Dead,
                "members but no leader"
            ),
        }
        if matches!(state, GroupState::Stable | GroupState::CompletingRebalance) {
            assert!(
                e.leader_id().is_some() && !ids.is_empty(),
                "{state} without members"
            );
        }

        // empty_means_no_members
        if state == GroupState::Empty {
            assert!(ids.is_empty(), "Empty group with members {ids:?}");
        }

        // unique_member_and_instance_ids
        let unique: BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "duplicate member ids");
        let instances: Vec<&str> = e
            .members()
            .iter()
            .filter_map(|m| m.group_instance_id.as_deref())
            .collect();
        let unique: BTreeSet<&str> = instances.iter().copied().collect();
        assert_eq!(
            unique.len(),
            instances.len(),
            "two members share an instance id"
        );

        // parked_requests_match_the_state: JoinGroup waits only in
        // PreparingRebalance, SyncGroup only in CompletingRebalance.
        for m in e.members() {
            if m.is_awaiting_join() {
                assert_eq!(
                    state,
                    GroupState::PreparingRebalance,
                    "{} parked in join",
                    m.member_id
                );
            }
            if m.is_awaiting_sync() {
                assert_eq!(
                    state,
                    GroupState::CompletingRebalance,
                    "{} parked in sync",
                    m.member_id
                );
            }
        }

        // stable_members_have_their_assignment: the leader assigned every member
        // it knew, and members only join the group through a rebalance.
        if state == GroupState::Stable {
            for m in e.members() {
                assert!(
                    !m.assignment.is_empty(),
                    "{} has no assignment in Stable",
                    m.member_id
                );
            }
        }

        // protocol_is_common: a group with members has a protocol every member supports.
        if matches!(state, GroupState::Stable | GroupState::CompletingRebalance) {
            let protocol = e.protocol_name().expect("selected protocol");
            assert!(e
                .members()
                .iter()
                .all(|m| m.protocols.iter().any(|p| p.name == protocol)));
        }

        // every_member_has_a_session_timer
        if state != GroupState::Dead {
            for id in &ids {
                let key = TimerKey::Heartbeat {
                    member_id: (*id).to_owned(),
                };
                assert!(
                    self.h.timers.contains_key(&key)
                        || e.member(id)
                            .is_some_and(|m| m.is_awaiting_join() || m.is_awaiting_sync()),
                    "{id} has no session timer"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_event_sequences_keep_the_invariants(steps in prop::collection::vec(step(), 1..120)) {
        let mut run = Run {
            h: Harness::new(),
            clients: vec![Client::default(); 4],
            sent: BTreeMap::new(),
            answered: BTreeSet::new(),
            max_generation: 0,
        };
        for step in &steps {
            run.apply(step);
        }
        // snapshot_round_trips
        let snapshot = run.h.engine.snapshot();
        prop_assert_eq!(GroupEngine::load("g", GroupConfig::default(), snapshot.clone(), run.h.now).snapshot(), snapshot);
        // no_request_is_left_unanswered once the group is unloaded
        let out = run.h.handle(Event::Unload { now_ms: run.h.now });
        run.observe(&out);
        let unanswered: Vec<&RequestId> = run.sent.keys().filter(|r| !run.answered.contains(r)).collect();
        prop_assert!(unanswered.is_empty(), "unanswered requests {:?}", unanswered);
    }
}
