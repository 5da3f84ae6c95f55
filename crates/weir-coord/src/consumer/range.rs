//! The `range` assignor (Kafka's KIP-848 RangeAssignor).
//!
//! Members are put in one order: static members first, by instance id, then
//! dynamic members by member id. For each topic, its subscribers in that order
//! take contiguous ranges of partitions: `partitions / subscribers` each, and
//! the first `partitions % subscribers` one more. Topics with the same
//! partition count and the same subscribers are therefore co-partitioned (a
//! member gets the same partition numbers of each), which stream joins rely on.
//!
//! The assignor is sticky the way Kafka's is: not through the previous
//! assignment, but through the order. A static member that restarts keeps its
//! instance id, hence its place, hence its ranges, as long as the members,
//! their subscriptions and the topics stay the same.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use uuid::Uuid;

use super::assignor::{GroupSpec, MemberSpec};
use super::topics::Assignment;

pub(super) fn assign(spec: &GroupSpec) -> BTreeMap<String, Assignment> {
    let mut order: Vec<(&String, &MemberSpec)> = spec.members.iter().collect();
    order.sort_by(
        |(a_id, a), (b_id, b)| match (&a.instance_id, &b.instance_id) {
            (Some(a), Some(b)) => a.cmp(b).then(a_id.cmp(b_id)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => a_id.cmp(b_id),
        },
    );

    // Per topic: partition count, subscribers, and the next range's start.
    let mut ranges: BTreeMap<Uuid, TopicRanges> = BTreeMap::new();
    for (_, member) in &order {
        for topic in &member.subscribed_topics {
            if let Some(partitions) = spec.partitions(topic) {
                ranges
                    .entry(*topic)
                    .or_insert(TopicRanges {
                        partitions,
                        subscribers: 0,
                        next: 0,
                        given: 0,
                    })
                    .subscribers += 1;
            }
        }
    }

    order
        .into_iter()
        .map(|(member_id, member)| {
            let mut assignment = Assignment::new();
            for topic in &member.subscribed_topics {
                if let Some(topic_ranges) = ranges.get_mut(topic) {
                    let range = topic_ranges.next_range();
                    if !range.is_empty() {
                        assignment.insert(*topic, range.map(|p| p as i32).collect());
                    }
                }
            }
            (member_id.clone(), assignment)
        })
        .collect()
}

struct TopicRanges {
    partitions: usize,
    subscribers: usize,
    /// Where the next subscriber's range starts.
    next: usize,
    /// How many subscribers have had their range.
    given: usize,
}

impl TopicRanges {
    fn next_range(&mut self) -> std::ops::Range<usize> {
        let quota = self.partitions / self.subscribers
            + usize::from(self.given < self.partitions % self.subscribers);
        let start = self.next;
        let end = (start + quota).min(self.partitions);
        self.next = end;
        self.given += 1;
        start..end
    }
}
