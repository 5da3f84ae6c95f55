//! A change of one partition's ISR and leader, with eligible leader
//! replicas (KIP-966): Kafka's `PartitionChangeBuilder`.
//!
//! With the feature `eligible.leader.replicas.version` at 1 the ISR may
//! become empty, and the replicas that leave it while it is smaller than
//! the topic's `min.insync.replicas` wait in the ELR. The high watermark
//! does not advance while the ISR is that small (the strict min-ISR rule),
//! so they hold every committed record: when the ISR is empty, an unfenced
//! ELR member may lead cleanly and becomes the ISR alone. The rules, in
//! Kafka's order:
//!
//! 1. ELR: if the target ISR holds at least `min.insync.replicas`, the ELR
//!    is cleared; otherwise it becomes the old ELR plus the old ISR, minus
//!    the target ISR and a replica that restarted uncleanly (it may have
//!    lost records it had not synced).
//! 2. Election: the current leader stays if still valid (in the target ISR,
//!    or in the ELR when the ISR is empty, and acceptable); else the first
//!    valid replica in replica order; else, with ISR and ELR both empty,
//!    the last known leader if acceptable (unclean: it may lack what it
//!    had not synced); else, for an unclean election, the first acceptable
//!    replica; else no leader. A leader from the ELR moves from it into the
//!    ISR, alone; an unclean leader is the ISR alone and clears the ELR.
//! 3. Without the feature the ISR never becomes empty: its last member
//!    stays, as in Kafka 3.
//! 4. Last known leader: when the ISR becomes empty it records the leader
//!    the partition had; once the partition has a leader it is cleared.

use std::collections::BTreeSet;

use crate::model::PartitionInfo;

/// The topic-level inputs of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rules {
    /// `eligible.leader.replicas.version` is at least 1.
    pub(crate) elr: bool,
    /// The topic's effective `min.insync.replicas`, capped at its
    /// replication factor (Kafka's `getTopicEffectiveMinIsr`).
    pub(crate) min_isr: usize,
}

/// Whether a leader may be chosen outside the ISR and ELR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Election {
    /// From the ISR, or the ELR when the ISR is empty (and the last known
    /// leader when both are).
    Online,
    /// As `Online`, then any acceptable replica, alone in the ISR.
    Unclean,
}

/// One change: the ISR it aims at, who may lead, and how.
pub(crate) struct Change<'a> {
    /// The wanted ISR, before the election adjusts it.
    pub(crate) target_isr: Vec<i32>,
    /// Whether a broker may lead (registered, unfenced, not leaving).
    pub(crate) acceptable: &'a dyn Fn(i32) -> bool,
    /// The election type.
    pub(crate) election: Election,
    /// A broker whose new process could not prove a clean stop: it leaves
    /// the ELR and may not lead.
    pub(crate) unclean_shutdown: Option<i32>,
}

/// The partition after `change`, and whether it differs from `p`. The
/// leader epoch goes up once if the leader changes, the partition epoch
/// once if anything does.
pub(crate) fn changed(p: &PartitionInfo, change: &Change<'_>, rules: Rules) -> PartitionInfo {
    let acceptable =
        |r: i32| r >= 0 && Some(r) != change.unclean_shutdown && (change.acceptable)(r);
    let mut isr = change.target_isr.clone();
    let mut elr = p.elr.clone();
    if rules.elr {
        if isr.len() >= rules.min_isr {
            elr.clear();
        } else {
            let candidates: BTreeSet<i32> = elr
                .iter()
                .chain(&p.isr)
                .copied()
                .filter(|r| !isr.contains(r) && Some(*r) != change.unclean_shutdown)
                .collect();
            elr = candidates.into_iter().collect();
        }
    }

    let valid =
        |r: i32| (isr.contains(&r) || (isr.is_empty() && elr.contains(&r))) && acceptable(r);
    let mut unclean = false;
    let leader = if valid(p.leader) {
        p.leader
    } else if let Some(&r) = p.replicas.iter().find(|r| valid(**r)) {
        r
    } else if let Some(r) = last_known_leader(p, rules, &isr, &elr).filter(|r| acceptable(*r)) {
        unclean = true;
        r
    } else if let Some(&r) = p
        .replicas
        .iter()
        .find(|r| change.election == Election::Unclean && acceptable(**r))
    {
        unclean = true;
        r
    } else {
        -1
    };
    if leader != p.leader && elr.contains(&leader) {
        isr = vec![leader];
        elr.retain(|r| *r != leader);
    }
    if unclean || !rules.elr {
        elr.clear();
    }
    let isr = if unclean {
        vec![leader]
    } else if !isr.is_empty() || rules.elr {
        isr
    } else {
        p.isr.clone()
    };

    let mut last_known = p.last_known_elr.clone();
    if !rules.elr {
        last_known.clear();
    } else if isr.is_empty() && !p.isr.is_empty() && p.leader != -1 {
        // The first time the partition is left without an ISR.
        last_known = vec![p.leader];
    } else if leader != -1 {
        last_known.clear();
    }

    let mut next = p.clone();
    if leader != p.leader {
        next.leader = leader;
        next.leader_epoch = p.leader_epoch.saturating_add(1);
    }
    next.isr = isr;
    next.elr = elr;
    next.last_known_elr = last_known;
    if next != *p {
        next.partition_epoch = p.partition_epoch.saturating_add(1);
    }
    next
}

/// Applies `change` to `p`; true if anything changed.
pub(crate) fn apply(p: &mut PartitionInfo, change: &Change<'_>, rules: Rules) -> bool {
    let next = changed(p, change, rules);
    let differs = next != *p;
    *p = next;
    differs
}

/// The last known leader, if it may be tried: the feature is on, ISR and
/// ELR are empty, and it is the only one recorded.
fn last_known_leader(p: &PartitionInfo, rules: Rules, isr: &[i32], elr: &[i32]) -> Option<i32> {
    match p.last_known_elr.as_slice() {
        [leader] if rules.elr && isr.is_empty() && elr.is_empty() => Some(*leader),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(leader: i32, isr: &[i32], elr: &[i32], last_known: &[i32]) -> PartitionInfo {
        PartitionInfo {
            partition: 0,
            leader,
            leader_epoch: 5,
            partition_epoch: 9,
            replicas: vec![1, 2, 3],
            adding: Vec::new(),
            removing: Vec::new(),
            isr: isr.to_vec(),
            elr: elr.to_vec(),
            last_known_elr: last_known.to_vec(),
        }
    }

    /// One row: the partition before, the change, the rules, and the
    /// (leader, isr, elr, last known ELR) after.
    struct Row {
        name: &'static str,
        before: PartitionInfo,
        target_isr: &'static [i32],
        live: &'static [i32],
        election: Election,
        unclean_shutdown: Option<i32>,
        elr: bool,
        after: (i32, &'static [i32], &'static [i32], &'static [i32]),
    }

    const ELR_ON: bool = true;
    const ELR_OFF: bool = false;

    #[test]
    fn the_transitions_of_eligible_leader_replicas_follow_kafka() {
        use Election::{Online, Unclean};
        let rows = [
            Row {
                name: "a shrink that keeps min.insync.replicas leaves the ELR empty",
                before: partition(1, &[1, 2, 3], &[], &[]),
                target_isr: &[1, 2],
                live: &[1, 2],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (1, &[1, 2], &[], &[]),
            },
            Row {
                name: "a shrink below min.insync.replicas puts the leaving replica in the ELR",
                before: partition(1, &[1, 2], &[], &[]),
                target_isr: &[1],
                live: &[1],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (1, &[1], &[2], &[]),
            },
            Row {
                name: "the last member leaves the ISR for the ELR and the partition records its leader",
                before: partition(1, &[1], &[2], &[]),
                target_isr: &[],
                live: &[],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (-1, &[], &[1, 2], &[1]),
            },
            Row {
                name: "with the ISR empty an unfenced ELR member leads alone in the ISR",
                before: partition(-1, &[], &[1, 2], &[1]),
                target_isr: &[],
                live: &[2],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (2, &[2], &[1], &[]),
            },
            Row {
                name: "the ISR back at min.insync.replicas clears the ELR",
                before: partition(2, &[2], &[1], &[]),
                target_isr: &[2, 3],
                live: &[2, 3],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (2, &[2, 3], &[], &[]),
            },
            Row {
                name: "an ELR member that rejoins the ISR leaves the ELR",
                before: partition(2, &[2], &[1, 3], &[]),
                target_isr: &[2, 3],
                live: &[2, 3],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (2, &[2, 3], &[], &[]),
            },
            Row {
                name: "an unclean restart takes the broker out of the ELR",
                before: partition(-1, &[], &[1, 2], &[1]),
                target_isr: &[],
                live: &[1],
                election: Online,
                unclean_shutdown: Some(2),
                elr: ELR_ON,
                after: (1, &[1], &[], &[]),
            },
            Row {
                name: "with ISR and ELR empty the last known leader leads again once back",
                before: partition(-1, &[], &[], &[1]),
                target_isr: &[],
                live: &[1, 3],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (1, &[1], &[], &[]),
            },
            Row {
                name: "a replica outside ISR and ELR never leads without unclean election",
                before: partition(-1, &[], &[1], &[1]),
                target_isr: &[],
                live: &[3],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (-1, &[], &[1], &[1]),
            },
            Row {
                name: "an unclean election clears the ELR",
                before: partition(-1, &[], &[1], &[1]),
                target_isr: &[],
                live: &[3],
                election: Unclean,
                unclean_shutdown: None,
                elr: ELR_ON,
                after: (3, &[3], &[], &[]),
            },
            Row {
                name: "without the feature the last member stays in the ISR (Kafka 3)",
                before: partition(1, &[1], &[], &[]),
                target_isr: &[],
                live: &[2, 3],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_OFF,
                after: (-1, &[1], &[], &[]),
            },
            Row {
                name: "without the feature a shrink below min.insync.replicas makes no ELR",
                before: partition(1, &[1, 2], &[], &[]),
                target_isr: &[1],
                live: &[1],
                election: Online,
                unclean_shutdown: None,
                elr: ELR_OFF,
                after: (1, &[1], &[], &[]),
            },
        ];
        for row in rows {
            let live = |r: i32| row.live.contains(&r);
            let change = Change {
                target_isr: row.target_isr.to_vec(),
                acceptable: &live,
                election: row.election,
                unclean_shutdown: row.unclean_shutdown,
            };
            let rules = Rules {
                elr: row.elr,
                min_isr: 2,
            };
            let after = changed(&row.before, &change, rules);
            let (leader, isr, elr, last_known) = row.after;
            assert_eq!(
                (
                    after.leader,
                    after.isr.as_slice(),
                    after.elr.as_slice(),
                    after.last_known_elr.as_slice()
                ),
                (leader, isr, elr, last_known),
                "{}",
                row.name
            );
        }
    }

    #[test]
    fn epochs_go_up_once_per_change_and_not_at_all_without_one() {
        let before = partition(1, &[1, 2], &[], &[]);
        let none = |_: i32| true;
        let rules = Rules {
            elr: true,
            min_isr: 2,
        };
        let same = Change {
            target_isr: vec![1, 2],
            acceptable: &none,
            election: Election::Online,
            unclean_shutdown: None,
        };
        assert_eq!(changed(&before, &same, rules), before);
        let only_3 = |r: i32| r == 3 || r == 2;
        let leader_gone = Change {
            target_isr: vec![2],
            acceptable: &only_3,
            election: Election::Online,
            unclean_shutdown: None,
        };
        let after = changed(&before, &leader_gone, rules);
        assert_eq!((after.leader, after.leader_epoch), (2, 6));
        assert_eq!(after.partition_epoch, 10);
        assert_eq!(after.elr, [1]);
    }
}
