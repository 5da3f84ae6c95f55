//! Server-side assignors (KIP-848): given the members' subscriptions and their
//! current target assignment, compute the group's next target assignment.
//!
//! An assignor is a pure function of a [`GroupSpec`]; the engine runs it only
//! when the group epoch moves past the assignment epoch, never per heartbeat.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::range;
use super::topics::Assignment;
use super::uniform;

/// The assignors the broker offers, by Kafka's names
/// (`group.consumer.assignors`; a member picks one with `ServerAssignor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServerAssignor {
    /// `uniform`: balanced and sticky, for any mix of subscriptions.
    Uniform,
    /// `range`: per topic, contiguous ranges of partitions in member order,
    /// so topics with the same partition count are co-partitioned.
    Range,
}

impl ServerAssignor {
    /// Every assignor, in Kafka's default `group.consumer.assignors` order.
    pub const ALL: [ServerAssignor; 2] = [ServerAssignor::Uniform, ServerAssignor::Range];

    /// Kafka's name of the assignor.
    pub fn name(self) -> &'static str {
        match self {
            ServerAssignor::Uniform => "uniform",
            ServerAssignor::Range => "range",
        }
    }

    /// The assignor named `name` (Kafka's short names; the Java class names
    /// of the config are accepted too).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => {
                Some(ServerAssignor::Uniform)
            }
            "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => {
                Some(ServerAssignor::Range)
            }
            _ => None,
        }
    }

    /// Computes the target assignment of every member of `spec`: each member
    /// of the spec is in the result, with an empty assignment if it gets
    /// nothing. Subscribed topics missing from `spec.topics` are ignored.
    pub fn assign(self, spec: &GroupSpec) -> BTreeMap<String, Assignment> {
        match self {
            ServerAssignor::Uniform => uniform::assign(spec),
            ServerAssignor::Range => range::assign(spec),
        }
    }
}

impl std::fmt::Display for ServerAssignor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The input of an assignor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSpec {
    /// Member id → what the assignor needs of the member.
    pub members: BTreeMap<String, MemberSpec>,
    /// The topics the group subscribes to, by id.
    pub topics: BTreeMap<Uuid, TopicSpec>,
}

/// One member in a [`GroupSpec`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberSpec {
    /// `group.instance.id` of a static member: the range assignor orders
    /// static members by it so that they keep their ranges across restarts.
    pub instance_id: Option<String>,
    /// `client.rack`. No assignor uses racks yet (nor does Kafka's since 4.0);
    /// it is carried so that one can.
    pub rack_id: Option<String>,
    pub subscribed_topics: BTreeSet<Uuid>,
    /// The member's current target assignment, which sticky assignors keep
    /// as much of as they can.
    pub assignment: Assignment,
}

/// One topic in a [`GroupSpec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
}

impl GroupSpec {
    /// The partition count of `topic`, if the spec has it.
    pub(super) fn partitions(&self, topic: &Uuid) -> Option<usize> {
        self.topics
            .get(topic)
            .map(|t| usize::try_from(t.partitions).unwrap_or(0))
    }
}
