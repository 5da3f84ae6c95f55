//! The `uniform` assignor: balanced first, sticky second, for any mix of
//! subscriptions (Kafka's UniformAssignor, homogeneous and heterogeneous).
//!
//! One algorithm serves both cases, in three passes:
//!
//! 1. **Keep**: every member keeps the partitions of its current target
//!    assignment that it still subscribes to and that still exist.
//! 2. **Fill**: the partitions nobody kept go, topic by topic, to the
//!    subscriber of the topic with the fewest partitions. Topics with the most
//!    partitions per subscriber go first (then fewer subscribers, then topic
//!    id), as Kafka orders them, so that tightly constrained topics are placed
//!    while members are still empty.
//! 3. **Balance**: while some subscriber `a` of a topic holds a partition of it
//!    and has two or more partitions more than another subscriber `b` of the
//!    same topic, one of `a`'s partitions of that topic moves to `b`.
//!
//! Each move in pass 3 lowers the sum of the squares of the members' counts,
//! so the passes end. When they do, two members with the same subscription
//! differ by at most one partition: if `a` had two more than `b`, `a` holds a
//! partition of a topic `b` also subscribes to, and pass 3 would have moved it.
//! With a homogeneous group this moves as few partitions as balance allows:
//! a member gives partitions away only while it is above every other member by
//! two or more, which any balanced assignment must also undo.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::assignor::{GroupSpec, MemberSpec};
use super::topics::{contains, Assignment};

pub(super) fn assign(spec: &GroupSpec) -> BTreeMap<String, Assignment> {
    let members: Vec<(&String, &MemberSpec)> = spec.members.iter().collect();
    let mut state = Builder::new(spec, &members);
    state.keep(&members);
    let order = state.topic_order(spec);
    state.fill(&order);
    state.balance(&order, &members);
    members
        .iter()
        .zip(state.result)
        .map(|((id, _), assignment)| ((*id).clone(), assignment))
        .collect()
}

/// The assignment being built; members are numbered in member id order.
struct Builder {
    /// Topic → its subscribers, ascending. Only topics that exist and have
    /// partitions.
    subscribers: BTreeMap<Uuid, Vec<usize>>,
    /// Topic → owner of each partition in the new assignment.
    owners: BTreeMap<Uuid, Vec<Option<usize>>>,
    result: Vec<Assignment>,
    counts: Vec<usize>,
}

impl Builder {
    fn new(spec: &GroupSpec, members: &[(&String, &MemberSpec)]) -> Self {
        let mut subscribers: BTreeMap<Uuid, Vec<usize>> = BTreeMap::new();
        for (index, (_, member)) in members.iter().enumerate() {
            for topic in &member.subscribed_topics {
                if spec.partitions(topic).is_some_and(|n| n > 0) {
                    subscribers.entry(*topic).or_default().push(index);
                }
            }
        }
        let owners = subscribers
            .keys()
            .map(|topic| (*topic, vec![None; spec.partitions(topic).unwrap_or(0)]))
            .collect();
        Self {
            subscribers,
            owners,
            result: vec![Assignment::new(); members.len()],
            counts: vec![0; members.len()],
        }
    }

    fn give(&mut self, member: usize, topic: Uuid, partition: usize) {
        self.owners.get_mut(&topic).expect("a subscribed topic")[partition] = Some(member);
        self.result[member]
            .entry(topic)
            .or_default()
            .insert(partition as i32);
        self.counts[member] += 1;
    }

    fn take(&mut self, member: usize, topic: Uuid, partition: i32) {
        if let Some(set) = self.result[member].get_mut(&topic) {
            set.remove(&partition);
            if set.is_empty() {
                self.result[member].remove(&topic);
            }
        }
        self.counts[member] -= 1;
    }

    /// Pass 1: keep what is still subscribed and exists; a partition two
    /// members both claim (never the case for a consistent target) goes to the
    /// first.
    fn keep(&mut self, members: &[(&String, &MemberSpec)]) {
        for (index, (_, member)) in members.iter().enumerate() {
            for (topic, partitions) in &member.assignment {
                if !member.subscribed_topics.contains(topic) {
                    continue;
                }
                for &partition in partitions {
                    let free = usize::try_from(partition).ok().filter(|p| {
                        self.owners
                            .get(topic)
                            .and_then(|owners| owners.get(*p))
                            .is_some_and(Option::is_none)
                    });
                    if let Some(p) = free {
                        self.give(index, *topic, p);
                    }
                }
            }
        }
    }

    /// Topics by partitions per subscriber (descending), then subscriber
    /// count (ascending), then id.
    fn topic_order(&self, spec: &GroupSpec) -> Vec<Uuid> {
        let mut order: Vec<Uuid> = self.subscribers.keys().copied().collect();
        let key = |topic: &Uuid| {
            (
                spec.partitions(topic).unwrap_or(0),
                self.subscribers[topic].len(),
            )
        };
        order.sort_by(|a, b| {
            let ((pa, sa), (pb, sb)) = (key(a), key(b));
            (pb * sa).cmp(&(pa * sb)).then(sa.cmp(&sb)).then(a.cmp(b))
        });
        order
    }

    /// Pass 2: each unowned partition to the least loaded subscriber.
    fn fill(&mut self, order: &[Uuid]) {
        for topic in order {
            let mut by_load: BTreeSet<(usize, usize)> = self.subscribers[topic]
                .iter()
                .map(|&m| (self.counts[m], m))
                .collect();
            let free: Vec<usize> = self.owners[topic]
                .iter()
                .enumerate()
                .filter(|(_, owner)| owner.is_none())
                .map(|(p, _)| p)
                .collect();
            for partition in free {
                let (count, member) = by_load.pop_first().expect("a topic has subscribers");
                self.give(member, *topic, partition);
                by_load.insert((count + 1, member));
            }
        }
    }

    /// Pass 3: move partitions from the most to the least loaded subscriber
    /// of each topic until no such move is left.
    fn balance(&mut self, order: &[Uuid], members: &[(&String, &MemberSpec)]) {
        loop {
            let mut moved = false;
            for topic in order {
                while let Some((from, to)) = self.imbalance(topic) {
                    // Prefer giving away a partition the member did not have
                    // before this assignment, to keep what it already owns.
                    let held = &self.result[from][topic];
                    let previous = &members[from].1.assignment;
                    let partition = *held
                        .iter()
                        .rev()
                        .find(|p| !contains(previous, *topic, **p))
                        .unwrap_or_else(|| held.last().expect("the member holds the topic"));
                    self.take(from, *topic, partition);
                    self.give(to, *topic, partition as usize);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }

    /// The most loaded holder and the least loaded subscriber of `topic`, if
    /// they differ by two partitions or more.
    fn imbalance(&self, topic: &Uuid) -> Option<(usize, usize)> {
        let subscribers = &self.subscribers[topic];
        let least = *subscribers
            .iter()
            .min_by_key(|&&m| (self.counts[m], m))
            .expect("a topic has subscribers");
        let most = *subscribers
            .iter()
            .filter(|&&m| self.result[m].contains_key(topic))
            .max_by_key(|&&m| (self.counts[m], std::cmp::Reverse(m)))?;
        (self.counts[most] > self.counts[least] + 1).then_some((most, least))
    }
}
