//! The states of a classic group and the transitions Kafka allows between them.

/// Where a classic group is in its membership protocol.
///
/// ```text
///            first join                 all members joined           leader's SyncGroup
///  Empty ──────────────► PreparingRebalance ────────────► CompletingRebalance ──────────► Stable
///    ▲                     │   ▲    ▲                            │                       │
///    └─ no member left ────┘   │    └──── join / leave / expiry ─┘                       │
///                              └───────────── join / leave / expiry ─────────────────────┘
///  any state ── unloaded / deleted ──► Dead
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members (the group may still hold offsets, or pending members that were
    /// asked for a member id).
    Empty,
    /// Members are (re)joining; JoinGroup requests are parked until the join phase ends.
    PreparingRebalance,
    /// A generation is formed and the group waits for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment for the current generation.
    Stable,
    /// The group is gone from this coordinator; nothing changes it any more.
    Dead,
}

impl GroupState {
    /// Kafka's name of the state, as DescribeGroups and ListGroups report it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Whether Kafka allows a transition from `self` to `to`.
    pub fn can_transition_to(self, to: GroupState) -> bool {
        use GroupState::*;
        match to {
            Empty => self == PreparingRebalance,
            PreparingRebalance => matches!(self, Stable | CompletingRebalance | Empty),
            CompletingRebalance => self == PreparingRebalance,
            Stable => self == CompletingRebalance,
            Dead => true,
        }
    }
}

impl std::fmt::Display for GroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
