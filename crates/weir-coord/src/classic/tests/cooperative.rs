//! KIP-429 over the classic protocol: cooperative-sticky clients, modelled on
//! librdkafka's, against the engine under seeded random schedules.
//!
//! A client told to give partitions up revokes them (when its application
//! gets to it), then rejoins owning the rest; a leader leaves out of its
//! assignment any partition another member still claims. A connection's
//! requests may reach the engine in any order (the coordinator applies each
//! in a task of its own), and its responses come back in request order.
//!
//! Named invariants: `no_partition_owned_twice` after every step, and
//! `a_new_member_gets_its_share`: once a fourth member joins three that
//! settled, the group settles again with every partition owned, split as
//! evenly as possible.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::super::*;
use super::{join_request, Harness};

const PARTITIONS: i32 = 6;
const CLIENTS: usize = 4;

/// librdkafka's join states, as far as the broker can tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Must (re)join.
    Init,
    WaitJoin,
    WaitSync,
    /// Assigned `added`, told to give up `revoked`: waits for the application.
    Revoking {
        revoked: BTreeSet<i32>,
        added: BTreeSet<i32>,
    },
    /// Waits for the application to take `added`; rejoins after if it revoked.
    Assigning {
        added: BTreeSet<i32>,
        rejoin: bool,
    },
    Steady,
}

impl Phase {
    /// librdkafka heartbeats only once it has an assignment to work on.
    fn heartbeats(&self) -> bool {
        matches!(
            self,
            Phase::Revoking { .. } | Phase::Assigning { .. } | Phase::Steady
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Join,
    Sync,
    Heartbeat,
}

#[derive(Debug)]
struct Client {
    member_id: String,
    generation: i32,
    /// The generation of the last assignment (sent in the metadata).
    assigned_in: i32,
    owned: BTreeSet<i32>,
    phase: Phase,
    /// Sent and not yet answered, in the order sent.
    in_flight: VecDeque<(RequestId, Kind)>,
    /// Sent and not yet applied by the engine.
    unapplied: Vec<Event>,
    active: bool,
}

impl Client {
    fn new() -> Self {
        Self {
            member_id: String::new(),
            generation: -1,
            assigned_in: -1,
            owned: BTreeSet::new(),
            phase: Phase::Init,
            in_flight: VecDeque::new(),
            unapplied: Vec::new(),
            active: false,
        }
    }

    fn metadata(&self) -> String {
        format!("{}|{}", encode(&self.owned), self.assigned_in)
    }

    fn waits_for(&self, kind: Kind) -> bool {
        self.in_flight.iter().any(|(_, k)| *k == kind)
    }

    /// Lost partitions (a reset generation or member id): all given up.
    fn lose_all(&mut self) {
        self.owned.clear();
        self.phase = Phase::Init;
    }
}

fn encode(partitions: &BTreeSet<i32>) -> String {
    let list: Vec<String> = partitions.iter().map(i32::to_string).collect();
    list.join(",")
}

fn decode(text: &str) -> BTreeSet<i32> {
    text.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().expect("a partition"))
        .collect()
}

/// xorshift64: schedules are reproducible from their seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

struct Sim {
    h: Harness,
    clients: Vec<Client>,
    answers: BTreeMap<RequestId, Response>,
    trace: Vec<String>,
}

impl Sim {
    fn new() -> Self {
        let config = GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        };
        Self {
            h: Harness::with(GroupEngine::new("g", config)),
            clients: (0..CLIENTS).map(|_| Client::new()).collect(),
            answers: BTreeMap::new(),
            trace: Vec::new(),
        }
    }

    fn send(&mut self, client: usize, kind: Kind, event: impl FnOnce(RequestId) -> Event) {
        let request_id = self.h.request_id();
        let c = &mut self.clients[client];
        c.in_flight.push_back((request_id, kind));
        c.unapplied.push(event(request_id));
    }

    fn send_join(&mut self, client: usize) {
        let c = &self.clients[client];
        let mut request = join_request(&c.member_id, None);
        request.protocols = vec![Protocol::new("cooperative-sticky", c.metadata())];
        self.h.next_uuid += 1;
        let fresh_uuid = uuid::Uuid::from_u128(self.h.next_uuid);
        self.clients[client].phase = Phase::WaitJoin;
        self.send(client, Kind::Join, |request_id| Event::Join {
            request_id,
            now_ms: 0,
            request,
            fresh_uuid,
        });
    }

    fn send_sync(&mut self, client: usize, assignments: Vec<(String, Vec<u8>)>) {
        let c = &self.clients[client];
        let request = SyncGroup {
            member_id: c.member_id.clone(),
            group_instance_id: None,
            generation_id: c.generation,
            protocol_type: Some("consumer".to_owned()),
            protocol_name: Some("cooperative-sticky".to_owned()),
            assignments,
        };
        self.clients[client].phase = Phase::WaitSync;
        self.send(client, Kind::Sync, |request_id| Event::Sync {
            request_id,
            now_ms: 0,
            request,
        });
    }

    fn send_heartbeat(&mut self, client: usize) {
        let c = &self.clients[client];
        let request = Heartbeat {
            member_id: c.member_id.clone(),
            group_instance_id: None,
            generation_id: c.generation,
        };
        self.send(client, Kind::Heartbeat, |request_id| Event::Heartbeat {
            request_id,
            now_ms: 0,
            request,
        });
    }

    /// The engine takes the `nth` request the client has not had applied yet.
    fn apply(&mut self, client: usize, nth: usize) {
        let mut event = self.clients[client].unapplied.remove(nth);
        if let Event::Join { now_ms, .. }
        | Event::Sync { now_ms, .. }
        | Event::Heartbeat { now_ms, .. } = &mut event
        {
            *now_ms = self.h.now;
        }
        self.trace
            .push(format!("c{client} {event:?} in {}", self.h.engine.state()));
        let out = self.h.handle(event);
        self.absorb(out);
    }

    fn advance(&mut self, ms: u64) {
        let out = self.h.advance(ms);
        self.absorb(out);
    }

    fn absorb(&mut self, out: Vec<Command>) {
        for command in out {
            if let Command::Respond {
                request_id,
                response,
            } = command
            {
                self.answers.insert(request_id, response);
            }
        }
    }

    /// Whether the client's oldest request in flight has its answer.
    fn can_receive(&self, client: usize) -> bool {
        self.clients[client]
            .in_flight
            .front()
            .is_some_and(|(r, _)| self.answers.contains_key(r))
    }

    fn receive(&mut self, client: usize) {
        let (request_id, _) = self.clients[client].in_flight.pop_front().unwrap();
        let response = self.answers.remove(&request_id).unwrap();
        self.trace.push(format!("c{client} <- {response:?}"));
        match response {
            Response::Heartbeat(result) => self.on_heartbeat(client, result),
            Response::Join(r) => self.on_join(client, r),
            Response::Sync(r) => self.on_sync(client, r),
            Response::Leave(_) => unreachable!("clients never leave"),
        }
    }

    fn on_heartbeat(&mut self, client: usize, result: Result<(), GroupError>) {
        let c = &mut self.clients[client];
        // Answers to a heartbeat sent before a rejoin are outdated.
        if !c.phase.heartbeats() {
            return;
        }
        // A rebalance already under way in the client takes precedence.
        let steady = c.phase == Phase::Steady;
        match result {
            Ok(()) => {}
            Err(GroupError::RebalanceInProgress) if steady => c.phase = Phase::Init,
            Err(GroupError::RebalanceInProgress) => {}
            Err(GroupError::UnknownMemberId) => {
                c.member_id.clear();
                if steady {
                    c.lose_all();
                }
            }
            Err(_) => {
                c.generation = -1;
                if steady {
                    c.lose_all();
                }
            }
        }
    }

    fn on_join(&mut self, client: usize, r: JoinResponse) {
        let c = &mut self.clients[client];
        match r.error {
            None => {
                c.member_id = r.member_id.clone();
                c.generation = r.generation_id;
                let assignments = if r.leader == r.member_id {
                    assign(&r.members)
                } else {
                    Vec::new()
                };
                self.send_sync(client, assignments);
            }
            Some(GroupError::MemberIdRequired) => {
                c.member_id = r.member_id;
                c.phase = Phase::Init;
            }
            Some(GroupError::UnknownMemberId) => {
                c.member_id.clear();
                c.lose_all();
            }
            Some(_) => c.phase = Phase::Init,
        }
    }

    fn on_sync(&mut self, client: usize, r: SyncResponse) {
        let c = &mut self.clients[client];
        match r.error {
            None => {
                let assigned = decode(std::str::from_utf8(&r.assignment).unwrap());
                let revoked: BTreeSet<i32> = c.owned.difference(&assigned).copied().collect();
                let added: BTreeSet<i32> = assigned.difference(&c.owned).copied().collect();
                c.assigned_in = c.generation;
                c.phase = if revoked.is_empty() {
                    Phase::Assigning {
                        added,
                        rejoin: false,
                    }
                } else {
                    Phase::Revoking { revoked, added }
                };
            }
            Some(GroupError::UnknownMemberId) => {
                c.member_id.clear();
                c.lose_all();
            }
            Some(GroupError::IllegalGeneration) => {
                c.generation = -1;
                c.lose_all();
            }
            Some(_) => c.phase = Phase::Init,
        }
    }

    /// The application's rebalance callback runs (in its next poll).
    fn run_callback(&mut self, client: usize) {
        let c = &mut self.clients[client];
        c.phase = match std::mem::replace(&mut c.phase, Phase::Init) {
            Phase::Revoking { revoked, added } => {
                c.owned.retain(|p| !revoked.contains(p));
                Phase::Assigning {
                    added,
                    rejoin: true,
                }
            }
            Phase::Assigning { added, rejoin } => {
                c.owned.extend(added);
                if rejoin {
                    Phase::Init
                } else {
                    Phase::Steady
                }
            }
            other => other,
        };
    }

    /// One step picked at random among those possible.
    fn step(&mut self, rng: &mut Rng) {
        #[derive(Clone, Copy)]
        enum Step {
            Receive(usize),
            Join(usize),
            Heartbeat(usize),
            Callback(usize),
            Apply(usize),
            Advance,
        }
        let mut steps = vec![Step::Advance];
        for (i, c) in self.clients.iter().enumerate().filter(|(_, c)| c.active) {
            if self.can_receive(i) {
                steps.push(Step::Receive(i));
            }
            if c.phase == Phase::Init && !c.waits_for(Kind::Join) && !c.waits_for(Kind::Sync) {
                steps.push(Step::Join(i));
            }
            if c.phase.heartbeats() && !c.waits_for(Kind::Heartbeat) {
                steps.push(Step::Heartbeat(i));
            }
            if matches!(c.phase, Phase::Revoking { .. } | Phase::Assigning { .. }) {
                steps.push(Step::Callback(i));
            }
            steps.extend(c.unapplied.iter().map(|_| Step::Apply(i)));
        }
        match steps[rng.below(steps.len())] {
            Step::Receive(i) => self.receive(i),
            Step::Join(i) => self.send_join(i),
            Step::Heartbeat(i) => self.send_heartbeat(i),
            Step::Callback(i) => self.run_callback(i),
            Step::Apply(i) => {
                let nth = rng.below(self.clients[i].unapplied.len());
                self.apply(i, nth);
            }
            // Well within the session timeout: nobody expires.
            Step::Advance => self.advance(rng.below(300) as u64),
        }
        self.no_partition_owned_twice();
    }

    fn no_partition_owned_twice(&self) {
        let mut owners = BTreeMap::new();
        for (i, c) in self.clients.iter().enumerate() {
            for p in &c.owned {
                if let Some(other) = owners.insert(*p, i) {
                    panic!(
                        "partition {p} owned by c{other} and c{i}\n{}",
                        self.trace.join("\n")
                    );
                }
            }
        }
    }

    /// The active clients' partitions once the group has settled: Stable,
    /// every client steady with no join or sync in flight.
    fn settled(&self) -> Option<Vec<BTreeSet<i32>>> {
        let active: Vec<&Client> = self.clients.iter().filter(|c| c.active).collect();
        let quiet = |c: &&Client| {
            c.phase == Phase::Steady && !c.waits_for(Kind::Join) && !c.waits_for(Kind::Sync)
        };
        (self.h.engine.state() == GroupState::Stable && active.iter().all(quiet))
            .then(|| active.iter().map(|c| c.owned.clone()).collect())
    }

    fn run_until_settled(&mut self, rng: &mut Rng, max_steps: usize) -> Vec<BTreeSet<i32>> {
        for _ in 0..max_steps {
            self.step(rng);
            if let Some(split) = self.settled() {
                return split;
            }
        }
        let tail = self.trace.len().saturating_sub(60);
        panic!(
            "never settled: {:?} in {}\n{}",
            self.clients
                .iter()
                .map(|c| (&c.phase, &c.owned))
                .collect::<Vec<_>>(),
            self.h.engine.state(),
            self.trace[tail..].join("\n")
        );
    }
}

/// The leader's assignor: sticky (members keep what they own, up to an even
/// share; claims of an older generation lose), then KIP-429's adjustment: a
/// partition another member still claims is left out, for its owner to
/// revoke first.
fn assign(members: &[JoinedMember]) -> Vec<(String, Vec<u8>)> {
    let mut claims: BTreeMap<i32, Vec<(i32, &str)>> = BTreeMap::new();
    for m in members {
        let metadata = std::str::from_utf8(&m.metadata).unwrap();
        let (owned, generation) = metadata.split_once('|').unwrap();
        let generation: i32 = generation.parse().unwrap();
        for p in decode(owned) {
            claims
                .entry(p)
                .or_default()
                .push((generation, &m.member_id));
        }
    }
    let mut kept: BTreeMap<&str, BTreeSet<i32>> = members
        .iter()
        .map(|m| (m.member_id.as_str(), BTreeSet::new()))
        .collect();
    for (p, claimants) in &claims {
        let (_, owner) = claimants.iter().max().unwrap();
        kept.get_mut(owner).unwrap().insert(*p);
    }
    // The members owning most get the larger shares.
    let mut order: Vec<&str> = kept.keys().copied().collect();
    order.sort_by_key(|m| (std::cmp::Reverse(kept[m].len()), *m));
    let n = members.len() as i32;
    let share = |rank: usize| (PARTITIONS / n + i32::from((rank as i32) < PARTITIONS % n)) as usize;
    let mut free: BTreeSet<i32> = (0..PARTITIONS).collect();
    for (rank, m) in order.iter().enumerate() {
        let mine = kept.get_mut(m).unwrap();
        *mine = mine.iter().take(share(rank)).copied().collect();
        free.retain(|p| !mine.contains(p));
    }
    for (rank, m) in order.iter().enumerate() {
        let mine = kept.get_mut(m).unwrap();
        while mine.len() < share(rank) {
            let p = free.pop_first().unwrap();
            mine.insert(p);
        }
    }
    members
        .iter()
        .map(|m| {
            let mut mine = kept[m.member_id.as_str()].clone();
            mine.retain(|p| {
                claims
                    .get(p)
                    .is_none_or(|c| c.iter().any(|(_, owner)| *owner == m.member_id))
            });
            (m.member_id.clone(), encode(&mine).into_bytes())
        })
        .collect()
}

#[test]
fn a_new_member_gets_its_share() {
    for seed in 1..=500u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut sim = Sim::new();
        for c in &mut sim.clients[..3] {
            c.active = true;
        }
        let before = sim.run_until_settled(&mut rng, 200_000);
        assert_eq!(before.iter().map(BTreeSet::len).sum::<usize>(), 6);
        sim.trace.clear();
        sim.clients[3].active = true;
        let after = sim.run_until_settled(&mut rng, 200_000);
        let mut sizes: Vec<usize> = after.iter().map(BTreeSet::len).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [1, 1, 2, 2], "seed {seed}: {before:?} -> {after:?}");
        for (kept, had) in after.iter().zip(&before) {
            assert!(kept.is_subset(had), "seed {seed}: {before:?} -> {after:?}");
        }
    }
}
