//! The group's target assignment: what each member should own at the
//! assignment epoch (Kafka's TargetAssignmentBuilder), and the subscription
//! metadata it is computed from.
//!
//! The target is recomputed when the group epoch has moved past the assignment
//! epoch (a member joined, left or changed its subscription, or a subscribed
//! topic changed). Only the members whose target changed get a record, then the
//! assignment epoch is bumped to the group epoch.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{GroupSpec, MemberSpec, ServerAssignor, TopicSpec};
use super::member::{Member, MemberMetadata};
use super::record::Record;
use super::topics::{Assignment, TopicLookup, TopicMetadata};

/// A newly computed target assignment and the records that persist it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetAssignment {
    /// Member id → target, for every member.
    pub assignment: BTreeMap<String, Assignment>,
    /// A TargetAssignmentMember record per member whose target changed, then
    /// the TargetAssignmentMetadata record with the new assignment epoch.
    pub records: Vec<Record>,
}

/// Runs `assignor` over `spec` and diffs the result against `current` (the
/// group's target so far) to produce the records of assignment epoch
/// `group_epoch`.
pub fn build_target_assignment(
    assignor: ServerAssignor,
    group_epoch: i32,
    spec: &GroupSpec,
    current: &BTreeMap<String, Assignment>,
) -> TargetAssignment {
    let assignment = assignor.assign(spec);
    let mut records: Vec<Record> = assignment
        .iter()
        .filter(|(member_id, new)| current.get(*member_id) != Some(*new))
        .map(|(member_id, new)| Record::TargetAssignmentMember {
            member_id: member_id.clone(),
            assignment: new.clone(),
        })
        .collect();
    records.push(Record::TargetAssignmentMetadata {
        assignment_epoch: group_epoch,
    });
    TargetAssignment {
        assignment,
        records,
    }
}

/// The names of the topics `metadata` subscribes to: its names, and those the
/// lookup matches with its regex.
pub(super) fn subscribed_names(
    metadata: &MemberMetadata,
    topics: &dyn TopicLookup,
    regex_cache: &mut BTreeMap<String, BTreeSet<String>>,
) -> BTreeSet<String> {
    let mut names = metadata.subscribed_topic_names.clone();
    if let Some(regex) = &metadata.subscribed_topic_regex {
        let matched = regex_cache
            .entry(regex.clone())
            .or_insert_with(|| topics.topics_matching(regex));
        names.extend(matched.iter().cloned());
    }
    names
}

/// The subscription metadata of a group with `members`: every topic some
/// member subscribes to that exists, by name.
pub(super) fn subscription_metadata<'a>(
    members: impl IntoIterator<Item = &'a Member>,
    topics: &dyn TopicLookup,
) -> BTreeMap<String, TopicMetadata> {
    let mut cache = BTreeMap::new();
    let mut names = BTreeSet::new();
    for member in members {
        names.extend(subscribed_names(&member.metadata, topics, &mut cache));
    }
    names
        .into_iter()
        .filter_map(|name| {
            let topic = topics.topic(&name)?;
            Some((
                name.clone(),
                TopicMetadata {
                    id: topic.id,
                    name,
                    partitions: topic.partitions,
                },
            ))
        })
        .collect()
}

/// The assignor's input for `members`, their subscriptions resolved through
/// the group's subscription metadata, with their current targets.
pub(super) fn group_spec<'a>(
    members: impl IntoIterator<Item = &'a Member>,
    subscription: &BTreeMap<String, TopicMetadata>,
    target: &BTreeMap<String, Assignment>,
    topics: &dyn TopicLookup,
) -> GroupSpec {
    let mut cache = BTreeMap::new();
    let members = members
        .into_iter()
        .map(|member| {
            let subscribed_topics = subscribed_names(&member.metadata, topics, &mut cache)
                .iter()
                .filter_map(|name| subscription.get(name).map(|t| t.id))
                .collect();
            let spec = MemberSpec {
                instance_id: member.metadata.instance_id.clone(),
                rack_id: member.metadata.rack_id.clone(),
                subscribed_topics,
                assignment: target.get(&member.member_id).cloned().unwrap_or_default(),
            };
            (member.member_id.clone(), spec)
        })
        .collect();
    let topics = subscription
        .values()
        .map(|t| {
            (
                t.id,
                TopicSpec {
                    name: t.name.clone(),
                    partitions: t.partitions,
                },
            )
        })
        .collect();
    GroupSpec { members, topics }
}
