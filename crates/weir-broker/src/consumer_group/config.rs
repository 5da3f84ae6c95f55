//! The broker settings the consumer group protocol depends on, with Kafka's
//! names and defaults.

use super::assignor::ServerAssignor;

/// Settings of the consumer group protocol (KIP-848).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.heartbeat.interval.ms`: how often members heartbeat;
    /// sent to them in every heartbeat response.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`: a member that does not heartbeat
    /// for this long is fenced (removed from the group).
    pub session_timeout_ms: i32,
    /// `group.consumer.max.size`: the most members a group may have.
    pub max_size: usize,
    /// `group.consumer.assignors`: the server assignors offered; the first is
    /// the default when no member asks for one.
    pub assignors: Vec<ServerAssignor>,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            max_size: i32::MAX as usize,
            assignors: ServerAssignor::ALL.to_vec(),
        }
    }
}

impl ConsumerGroupConfig {
    /// The assignor used when no member asks for one.
    pub fn default_assignor(&self) -> ServerAssignor {
        self.assignors
            .first()
            .copied()
            .unwrap_or(ServerAssignor::Uniform)
    }

    /// The offered assignor named `name`.
    pub fn assignor(&self, name: &str) -> Option<ServerAssignor> {
        ServerAssignor::from_name(name).filter(|a| self.assignors.contains(a))
    }
}
