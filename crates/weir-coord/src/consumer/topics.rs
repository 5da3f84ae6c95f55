//! Topic partitions as the consumer group protocol names them (topic id →
//! partition numbers), and the cluster metadata the engine reads to resolve
//! subscriptions.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// A set of partitions, topic id → partition numbers: an assignment, a member's
/// owned partitions, its partitions pending revocation.
///
/// Ordered maps and sets so that every output (records, responses, describe) is
/// deterministic. A topic never maps to an empty set in the values the engine
/// produces.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The number of partitions in `assignment`.
pub fn partition_count(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

/// Whether `assignment` holds `partition` of `topic`.
pub fn contains(assignment: &Assignment, topic: Uuid, partition: i32) -> bool {
    assignment
        .get(&topic)
        .is_some_and(|partitions| partitions.contains(&partition))
}

/// Whether every partition of `part` is in `whole`.
pub fn is_subset(part: &Assignment, whole: &Assignment) -> bool {
    part.iter().all(|(topic, partitions)| {
        partitions.is_empty()
            || whole
                .get(topic)
                .is_some_and(|held| partitions.is_subset(held))
    })
}

/// Whether `a` and `b` share a partition.
pub fn overlaps(a: &Assignment, b: &Assignment) -> bool {
    a.iter().any(|(topic, partitions)| {
        b.get(topic)
            .is_some_and(|other| !partitions.is_disjoint(other))
    })
}

/// Builds an [`Assignment`] from (topic id, partitions) pairs as requests carry
/// them, merging repeated topics and dropping empty ones.
pub fn assignment_from<I, P>(topics: I) -> Assignment
where
    I: IntoIterator<Item = (Uuid, P)>,
    P: IntoIterator<Item = i32>,
{
    let mut assignment = Assignment::new();
    for (topic, partitions) in topics {
        let set: BTreeSet<i32> = partitions.into_iter().collect();
        if !set.is_empty() {
            assignment.entry(topic).or_default().extend(set);
        }
    }
    assignment
}

/// A topic as the engine needs it: its id and partition count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopicRef {
    pub id: Uuid,
    pub partitions: i32,
}

/// One subscribed topic of the group, as Kafka keeps it in the group's
/// subscription metadata (ConsumerGroupPartitionMetadataValue.TopicMetadata).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicMetadata {
    pub id: Uuid,
    pub name: String,
    pub partitions: i32,
}

/// The cluster's topics as the engine sees them.
///
/// The broker implements this over its metadata image; [`TopicsImage`] is a
/// plain implementation for tests and simple callers. The engine never keeps
/// the whole cluster's metadata: it asks for the topics its members subscribe
/// to when a subscription or the metadata changes.
pub trait TopicLookup {
    /// The topic named `name`, if it exists.
    fn topic(&self, name: &str) -> Option<TopicRef>;

    /// The names of the existing topics whose whole name matches `regex`
    /// (Kafka matches the regex against the full name, RE2/J syntax). The
    /// caller validates regexes before a heartbeat reaches the engine
    /// (INVALID_REGULAR_EXPRESSION), so an invalid one matches nothing here.
    fn topics_matching(&self, regex: &str) -> BTreeSet<String>;

    /// The name of the topic with id `id`, if it exists: classic members
    /// name partitions by topic name.
    fn topic_name(&self, id: Uuid) -> Option<String>;
}

/// A map of topic name → [`TopicRef`]: the simplest [`TopicLookup`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicsImage {
    topics: BTreeMap<String, TopicRef>,
}

impl TopicsImage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a topic.
    pub fn insert(&mut self, name: impl Into<String>, id: Uuid, partitions: i32) {
        self.topics.insert(name.into(), TopicRef { id, partitions });
    }

    /// Removes a topic (deleted).
    pub fn remove(&mut self, name: &str) -> Option<TopicRef> {
        self.topics.remove(name)
    }

    /// The topics, by name.
    pub fn topics(&self) -> &BTreeMap<String, TopicRef> {
        &self.topics
    }
}

impl TopicLookup for TopicsImage {
    fn topic(&self, name: &str) -> Option<TopicRef> {
        self.topics.get(name).copied()
    }

    fn topics_matching(&self, regex: &str) -> BTreeSet<String> {
        let Ok(regex) = regex::Regex::new(&format!("^(?:{regex})$")) else {
            return BTreeSet::new();
        };
        self.topics
            .keys()
            .filter(|name| regex.is_match(name))
            .cloned()
            .collect()
    }

    fn topic_name(&self, id: Uuid) -> Option<String> {
        self.topics
            .iter()
            .find(|(_, topic)| topic.id == id)
            .map(|(name, _)| name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn subset_and_overlap() {
        let a = assignment_from([(t(1), vec![0, 1]), (t(2), vec![3])]);
        let b = assignment_from([(t(1), vec![0, 1, 2]), (t(2), vec![3, 4])]);
        assert!(is_subset(&a, &b));
        assert!(!is_subset(&b, &a));
        assert!(overlaps(&a, &b));
        assert!(!overlaps(&a, &assignment_from([(t(1), vec![5])])));
        assert_eq!(partition_count(&b), 5);
        assert!(contains(&b, t(2), 4));
        assert!(!contains(&b, t(3), 0));
    }

    #[test]
    fn assignment_from_merges_and_drops_empty_topics() {
        let a = assignment_from([(t(1), vec![1]), (t(2), vec![]), (t(1), vec![0])]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[&t(1)], BTreeSet::from([0, 1]));
    }

    #[test]
    fn regex_matches_whole_names() {
        let mut image = TopicsImage::new();
        image.insert("orders", t(1), 3);
        image.insert("orders-dlq", t(2), 1);
        image.insert("payments", t(3), 1);
        assert_eq!(
            image.topics_matching("orders.*"),
            BTreeSet::from(["orders".to_owned(), "orders-dlq".to_owned()])
        );
        assert_eq!(
            image.topics_matching("order"),
            BTreeSet::<String>::new(),
            "a regex must match the whole name"
        );
        assert!(image.topics_matching("(").is_empty());
    }
}
