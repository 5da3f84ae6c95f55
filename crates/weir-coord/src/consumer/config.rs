//! The broker settings the consumer group protocol depends on, with Kafka's
//! names and defaults.

use std::ops::RangeInclusive;

use super::assignor::ServerAssignor;

/// `group.consumer.migration.policy` (KIP-848's online migration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    pub const NAMES: &'static str = "bidirectional, upgrade, downgrade, disabled";

    /// The policy named `name`, ignoring case as Kafka does.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => Some(Self::Bidirectional),
            "upgrade" => Some(Self::Upgrade),
            "downgrade" => Some(Self::Downgrade),
            "disabled" => Some(Self::Disabled),
            _ => None,
        }
    }

    /// Classic group → consumer group.
    pub fn upgrades(self) -> bool {
        matches!(self, Self::Bidirectional | Self::Upgrade)
    }

    /// Consumer group → classic group.
    pub fn downgrades(self) -> bool {
        matches!(self, Self::Bidirectional | Self::Downgrade)
    }
}

/// A heartbeat interval or session timeout out of its bounds.
#[derive(Debug, PartialEq, Eq)]
pub struct TimingError<'a> {
    pub name: &'a str,
    pub value: i32,
    /// What the value must be, e.g. "must be less than …".
    pub requirement: String,
}

impl std::fmt::Display for TimingError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.requirement)
    }
}

/// Settings of the consumer group protocol (KIP-848).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.heartbeat.interval.ms`: how often members heartbeat;
    /// sent to them in every heartbeat response.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`: a member that does not heartbeat
    /// for this long is fenced (removed from the group).
    pub session_timeout_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms` and
    /// `group.consumer.max.heartbeat.interval.ms`: the heartbeat intervals
    /// the broker and each group may be configured with.
    pub heartbeat_interval_bounds: RangeInclusive<i32>,
    /// `group.consumer.min.session.timeout.ms` and
    /// `group.consumer.max.session.timeout.ms`: likewise for session timeouts.
    pub session_timeout_bounds: RangeInclusive<i32>,
    /// `group.consumer.max.size`: the most members a group may have.
    pub max_size: usize,
    /// `group.consumer.migration.policy`: whether a classic group with
    /// members becomes a consumer group when a consumer-protocol member
    /// joins, and back when the last one leaves.
    pub migration_policy: MigrationPolicy,
    /// `group.max.size`: a consumer group larger than this is not turned
    /// back into a classic group.
    pub classic_max_size: usize,
    /// `group.consumer.assignors`: the server assignors offered; the first is
    /// the default when no member asks for one.
    pub assignors: Vec<ServerAssignor>,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            heartbeat_interval_bounds: 5_000..=15_000,
            session_timeout_bounds: 45_000..=60_000,
            max_size: i32::MAX as usize,
            migration_policy: MigrationPolicy::Bidirectional,
            classic_max_size: i32::MAX as usize,
            assignors: ServerAssignor::ALL.to_vec(),
        }
    }
}

impl ConsumerGroupConfig {
    /// Checks the heartbeat interval and session timeout as Kafka does:
    /// each within its bounds, the interval below the timeout. The names
    /// are those the two settings were given under (the broker's or a
    /// group's).
    pub fn check_timing<'a>(
        &self,
        heartbeat_name: &'a str,
        session_name: &'a str,
    ) -> Result<(), TimingError<'a>> {
        let settings = [
            (
                heartbeat_name,
                self.heartbeat_interval_ms,
                &self.heartbeat_interval_bounds,
                "heartbeat.interval.ms",
            ),
            (
                session_name,
                self.session_timeout_ms,
                &self.session_timeout_bounds,
                "session.timeout.ms",
            ),
        ];
        for (name, value, bounds, suffix) in settings {
            let requirement = if value < *bounds.start() {
                format!(
                    "must be greater than or equal to group.consumer.min.{suffix} ({})",
                    bounds.start()
                )
            } else if value > *bounds.end() {
                format!(
                    "must be less than or equal to group.consumer.max.{suffix} ({})",
                    bounds.end()
                )
            } else {
                continue;
            };
            return Err(TimingError {
                name,
                value,
                requirement,
            });
        }
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err(TimingError {
                name: heartbeat_name,
                value: self.heartbeat_interval_ms,
                requirement: format!("must be less than {session_name}"),
            });
        }
        Ok(())
    }

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
