//! What a partition leader knows of its followers, as a pure engine: their
//! log ends, when each was last caught up, the ISR, and the high watermark
//! that follows from them. The caller feeds it appends, follower fetches
//! and clock ticks, and carries out the ISR changes it proposes.
//!
//! The high watermark stands still while the ISR is smaller than the
//! topic's `min.insync.replicas` (capped at the replica count): Kafka 4's
//! strict min-ISR rule (KIP-966), which is what lets a replica that left
//! an ISR that small lead again cleanly, as an eligible leader replica: it
//! holds every record below the high watermark.

use std::collections::BTreeMap;

/// One follower, as its fetches show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Follower {
    /// The offset it asked for last: it holds everything below.
    log_end: u64,
    /// When it last asked for the leader's log end or beyond.
    last_caught_up_ms: i64,
    /// The log start offset its last fetch reported.
    log_start: u64,
}

/// An in-sync follower that holds an offset a consumer asks for: one it
/// may be sent to read from (KIP-392).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadableFollower {
    pub id: i32,
    pub log_end: u64,
    /// How long ago it last reached the leader's log end.
    pub since_caught_up_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderState {
    leader: i32,
    /// The ISR as the metadata has it, the leader included.
    isr: Vec<i32>,
    /// The metadata's partition epoch for that ISR: it moves with every
    /// change of the ISR or the leader.
    partition_epoch: i32,
    /// An ISR sent to the controller and not yet seen in the metadata;
    /// nothing else is proposed meanwhile.
    proposed: Option<Vec<i32>>,
    followers: BTreeMap<i32, Follower>,
    high_watermark: u64,
    /// The log end when this leadership began: a follower must reach it
    /// to join the ISR, so that it holds every record of earlier epochs.
    epoch_start_offset: u64,
    /// The topic's `min.insync.replicas`: below it, the high watermark
    /// stands still.
    min_isr: usize,
}

impl LeaderState {
    /// A new leadership over `replicas` with `isr`, starting from the
    /// local log end and the high watermark this replica knew, for a topic
    /// whose `min.insync.replicas` is `min_isr`. Followers get a full lag
    /// period before they can be dropped.
    // Every argument is one fact of the metadata or the log at the start.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        leader: i32,
        replicas: &[i32],
        isr: &[i32],
        partition_epoch: i32,
        log_end: u64,
        high_watermark: u64,
        now_ms: i64,
        min_isr: usize,
    ) -> Self {
        let followers = replicas
            .iter()
            .filter(|r| **r != leader)
            .map(|r| {
                (
                    *r,
                    Follower {
                        log_end: 0,
                        last_caught_up_ms: now_ms,
                        log_start: 0,
                    },
                )
            })
            .collect();
        let mut state = Self {
            leader,
            isr: isr.to_vec(),
            partition_epoch,
            proposed: None,
            followers,
            high_watermark: high_watermark.min(log_end),
            epoch_start_offset: log_end,
            min_isr,
        };
        state.advance(log_end);
        state
    }

    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }

    pub fn isr(&self) -> &[i32] {
        &self.isr
    }

    /// The replicas changed (a reassignment adds or drops some): new
    /// followers start with a full lag period, dropped ones are forgotten.
    pub fn set_replicas(&mut self, replicas: &[i32], now_ms: i64) {
        let leader = self.leader;
        self.followers.retain(|id, _| replicas.contains(id));
        for id in replicas.iter().filter(|r| **r != leader) {
            self.followers.entry(*id).or_insert(Follower {
                log_end: 0,
                last_caught_up_ms: now_ms,
                log_start: 0,
            });
        }
    }

    /// The metadata's ISR, as the leader takes it at every metadata
    /// change. A new partition epoch is what a proposal was waiting for:
    /// it was applied, or it will be refused as based on an older one.
    /// The same epoch again (the metadata moved for another reason)
    /// answers nothing: a proposal in flight stays pending, and its new
    /// member keeps holding the high watermark back, for the controller
    /// may still let it in.
    /// The replica set's size, the ISR's, and `min.insync.replicas`.
    pub fn health(&self) -> (usize, usize, usize) {
        (self.followers.len() + 1, self.isr.len(), self.min_isr)
    }

    pub fn set_isr(&mut self, isr: &[i32], partition_epoch: i32, log_end: u64) -> bool {
        if partition_epoch != self.partition_epoch || self.isr != isr {
            self.isr = isr.to_vec();
            self.partition_epoch = partition_epoch;
            self.proposed = None;
        }
        self.advance(log_end)
    }

    /// The topic's `min.insync.replicas`, as the leader takes it at every
    /// metadata change; returns whether the high watermark moved.
    pub fn set_min_isr(&mut self, min_isr: usize, log_end: u64) -> bool {
        self.min_isr = min_isr;
        self.advance(log_end)
    }

    /// The controller refused a proposal; a later one may be made.
    pub fn proposal_failed(&mut self) {
        self.proposed = None;
    }

    /// The leader appended; returns whether the high watermark moved.
    pub fn on_append(&mut self, log_end: u64) -> bool {
        self.advance(log_end)
    }

    /// A follower asked for records from `fetch_offset`. Returns whether
    /// the high watermark moved, and an ISR to propose if the follower has
    /// caught up and is not in it.
    pub fn on_follower_fetch(
        &mut self,
        follower: i32,
        fetch_offset: u64,
        log_end: u64,
        now_ms: i64,
    ) -> (bool, Option<Vec<i32>>) {
        let Some(progress) = self.followers.get_mut(&follower) else {
            return (false, None);
        };
        progress.log_end = fetch_offset.min(log_end);
        if fetch_offset >= log_end {
            progress.last_caught_up_ms = now_ms;
        }
        let moved = self.advance(log_end);
        let caught_up = progress_reached(
            self.followers[&follower].log_end,
            self.high_watermark,
            self.epoch_start_offset,
        );
        let proposal = (caught_up && !self.isr.contains(&follower) && self.proposed.is_none())
            .then(|| {
                let mut isr = self.isr.clone();
                isr.push(follower);
                isr
            });
        if let Some(isr) = &proposal {
            self.proposed = Some(isr.clone());
        }
        (moved, proposal)
    }

    /// A follower's fetch reported its log start offset.
    pub fn on_follower_log_start(&mut self, follower: i32, log_start: u64) {
        if let Some(progress) = self.followers.get_mut(&follower) {
            progress.log_start = log_start;
        }
    }

    /// The followers a consumer reading from `fetch_offset` may be sent to
    /// (Kafka's `findPreferredReadReplica`): in the ISR, with the offset
    /// between their log start and log end. A follower out of the ISR may
    /// lag without bound, so it is never one.
    pub fn readable_followers(
        &self,
        fetch_offset: u64,
        now_ms: i64,
    ) -> impl Iterator<Item = ReadableFollower> + '_ {
        self.followers
            .iter()
            .filter(move |(id, f)| {
                self.isr.contains(id) && f.log_end >= fetch_offset && f.log_start <= fetch_offset
            })
            .map(move |(&id, f)| ReadableFollower {
                id,
                log_end: f.log_end,
                since_caught_up_ms: now_ms - f.last_caught_up_ms,
            })
    }

    /// The ISR without the followers not caught up for `lag_ms`, if any
    /// are (and no other proposal is pending).
    pub fn shrink(&mut self, now_ms: i64, lag_ms: i64) -> Option<Vec<i32>> {
        if self.proposed.is_some() {
            return None;
        }
        let lagging = |id: &i32| {
            self.followers
                .get(id)
                .is_some_and(|f| now_ms - f.last_caught_up_ms > lag_ms)
        };
        if !self.isr.iter().any(lagging) {
            return None;
        }
        let isr: Vec<i32> = self.isr.iter().copied().filter(|id| !lagging(id)).collect();
        self.proposed = Some(isr.clone());
        Some(isr)
    }

    /// Moves the high watermark to the smallest log end over the ISR and
    /// any proposed member (never backwards, and not at all while the ISR
    /// is under its minimum); returns whether it moved.
    fn advance(&mut self, log_end: u64) -> bool {
        let replicas = self.followers.len() + 1;
        if self.isr.len() < self.min_isr.min(replicas) {
            return false;
        }
        let members = self
            .isr
            .iter()
            .chain(self.proposed.iter().flatten())
            .filter(|id| **id != self.leader);
        let smallest = members
            .map(|id| self.followers.get(id).map_or(0, |f| f.log_end))
            .fold(log_end, u64::min);
        if smallest > self.high_watermark {
            self.high_watermark = smallest;
            true
        } else {
            false
        }
    }
}

fn progress_reached(log_end: u64, high_watermark: u64, epoch_start_offset: u64) -> bool {
    log_end >= high_watermark && log_end >= epoch_start_offset
}

#[cfg(test)]
mod strict_min_isr_tests {
    use super::*;

    #[test]
    fn the_high_watermark_stands_still_while_the_isr_is_under_its_minimum() {
        // Leader 1 over 1, 2, 3 with min.insync.replicas 2; 2 and 3 have
        // everything below 10.
        let mut s = LeaderState::new(1, &[1, 2, 3], &[1, 2, 3], 0, 10, 0, 0, 2);
        s.on_follower_fetch(2, 10, 10, 0);
        s.on_follower_fetch(3, 10, 10, 0);
        assert_eq!(s.high_watermark(), 10);
        s.set_isr(&[1], 1, 15);
        assert!(!s.on_append(20), "alone in the ISR, below its minimum");
        assert_eq!(s.high_watermark(), 10);
        s.set_isr(&[1, 2], 2, 20);
        s.on_follower_fetch(2, 20, 20, 0);
        assert_eq!(s.high_watermark(), 20, "back at the minimum");
        // A new leadership alone in the ISR (elected from the ELR) keeps
        // the high watermark it knew.
        let elected = LeaderState::new(3, &[1, 2, 3], &[3], 4, 30, 12, 0, 2);
        assert_eq!(elected.high_watermark(), 12);
        // A minimum above the replica count is capped at it.
        let mut alone = LeaderState::new(1, &[1], &[1], 0, 5, 0, 0, 3);
        assert!(alone.on_append(8));
        assert_eq!(alone.high_watermark(), 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: i64 = 30_000;

    /// Leader 1, followers 2 and 3, all in sync, log end 10.
    fn three() -> LeaderState {
        LeaderState::new(1, &[1, 2, 3], &[1, 2, 3], 0, 10, 10, 0, 1)
    }

    #[test]
    fn the_high_watermark_is_the_smallest_log_end_in_the_isr() {
        let mut s = three();
        assert_eq!(s.high_watermark(), 10, "kept from before");
        assert!(!s.on_append(15));
        assert_eq!(s.on_follower_fetch(2, 15, 15, 1), (false, None));
        assert_eq!(s.high_watermark(), 10, "3 has not fetched");
        assert_eq!(s.on_follower_fetch(3, 12, 15, 1), (true, None));
        assert_eq!(s.high_watermark(), 12);
        assert_eq!(s.on_follower_fetch(3, 15, 15, 2), (true, None));
        assert_eq!(s.high_watermark(), 15);
    }

    #[test]
    fn the_high_watermark_never_moves_backwards() {
        let mut s = three();
        s.on_follower_fetch(2, 10, 10, 1);
        s.on_follower_fetch(3, 10, 10, 1);
        // A follower that truncated and asks from further back.
        assert_eq!(s.on_follower_fetch(2, 4, 10, 2), (false, None));
        assert_eq!(s.high_watermark(), 10);
        // Dropping it from the ISR cannot lower it either.
        s.set_isr(&[1, 3], 1, 10);
        assert_eq!(s.high_watermark(), 10);
    }

    #[test]
    fn consumers_may_read_only_from_in_sync_followers_holding_their_offset() {
        let mut s = LeaderState::new(1, &[1, 2, 3, 4], &[1, 2, 3], 0, 100, 100, 0, 1);
        s.on_follower_fetch(2, 100, 100, 50);
        s.on_follower_log_start(2, 0);
        s.on_follower_fetch(3, 80, 100, 60);
        s.on_follower_log_start(3, 20);
        // 4 holds everything but is not in the ISR.
        s.on_follower_fetch(4, 100, 100, 70);
        let readable = |offset| {
            s.readable_followers(offset, 100)
                .map(|f| (f.id, f.log_end, f.since_caught_up_ms))
                .collect::<Vec<_>>()
        };
        assert_eq!(readable(50), vec![(2, 100, 50), (3, 80, 100)]);
        assert_eq!(readable(90), vec![(2, 100, 50)], "beyond 3's log end");
        assert_eq!(readable(10), vec![(2, 100, 50)], "below 3's log start");
    }

    #[test]
    fn a_lone_leader_commits_what_it_appends() {
        let mut s = LeaderState::new(1, &[1, 2], &[1], 0, 5, 0, 0, 1);
        assert_eq!(s.high_watermark(), 5);
        assert!(s.on_append(9));
        assert_eq!(s.high_watermark(), 9);
    }

    #[test]
    fn followers_that_stop_catching_up_are_dropped_after_the_lag() {
        let mut s = three();
        s.on_follower_fetch(2, 10, 10, 1_000);
        s.on_follower_fetch(3, 10, 10, 1_000);
        // 2 keeps up, 3 stops fetching.
        s.on_append(20);
        s.on_follower_fetch(2, 20, 20, 20_000);
        assert_eq!(s.shrink(25_000, LAG), None);
        s.on_follower_fetch(2, 20, 20, 31_500);
        assert_eq!(s.shrink(31_500, LAG), Some(vec![1, 2]));
        // One proposal at a time.
        assert_eq!(s.shrink(40_000, LAG), None);
        // Once the metadata has it, the high watermark follows the new ISR.
        assert!(s.set_isr(&[1, 2], 1, 20));
        assert_eq!(s.high_watermark(), 20);
    }

    #[test]
    fn a_follower_fetching_but_behind_is_dropped_too() {
        let mut s = three();
        s.on_append(100);
        // 3 fetches all the time, but never reaches the log end.
        for t in (0..40_000).step_by(500) {
            s.on_follower_fetch(2, 100, 100, t);
            s.on_follower_fetch(3, 50, 100, t);
        }
        assert_eq!(s.shrink(40_000, LAG), Some(vec![1, 2]));
    }

    #[test]
    fn a_caught_up_follower_is_proposed_for_the_isr() {
        let mut s = LeaderState::new(1, &[1, 2, 3], &[1, 2], 0, 10, 10, 0, 1);
        s.on_follower_fetch(2, 10, 10, 1);
        // Behind the high watermark: not yet.
        assert_eq!(s.on_follower_fetch(3, 6, 10, 1), (false, None));
        assert_eq!(
            s.on_follower_fetch(3, 10, 10, 2),
            (false, Some(vec![1, 2, 3]))
        );
        // Proposed once, until the metadata answers.
        assert_eq!(s.on_follower_fetch(3, 10, 10, 3), (false, None));
        s.proposal_failed();
        assert_eq!(
            s.on_follower_fetch(3, 10, 10, 4),
            (false, Some(vec![1, 2, 3]))
        );
    }

    #[test]
    fn a_joining_follower_holds_back_the_high_watermark_while_proposed() {
        let mut s = LeaderState::new(1, &[1, 2, 3], &[1, 2], 0, 10, 10, 0, 1);
        s.on_follower_fetch(2, 10, 10, 1);
        assert_eq!(s.on_follower_fetch(3, 10, 10, 1).1, Some(vec![1, 2, 3]));
        s.on_append(20);
        s.on_follower_fetch(2, 20, 20, 2);
        // 3 may already count for acks=all once the ISR holds it, so the
        // high watermark must not pass what 3 has.
        assert_eq!(s.high_watermark(), 10);
        s.on_follower_fetch(3, 20, 20, 3);
        assert_eq!(s.high_watermark(), 20);
    }

    #[test]
    fn metadata_that_leaves_the_isr_unchanged_keeps_a_proposal_pending() {
        let mut s = LeaderState::new(1, &[1, 2, 3], &[1, 2], 0, 10, 10, 0, 1);
        s.on_follower_fetch(2, 10, 10, 1);
        assert_eq!(s.on_follower_fetch(3, 10, 10, 1).1, Some(vec![1, 2, 3]));
        // Another change reaches the broker (the same ISR, said again)
        // before the controller has answered the proposal.
        s.set_isr(&[1, 2], 0, 10);
        s.on_append(20);
        s.on_follower_fetch(2, 20, 20, 2);
        assert_eq!(s.high_watermark(), 10, "3 may still join the ISR");
        // 3 moves it, and is not proposed twice.
        assert_eq!(s.on_follower_fetch(3, 15, 20, 3), (true, None));
        assert_eq!(s.high_watermark(), 15);
        // The controller accepts: 3 is in, and counts as any member.
        assert!(!s.set_isr(&[1, 2, 3], 1, 20));
        assert_eq!(s.high_watermark(), 15);
    }

    #[test]
    fn a_follower_must_reach_the_start_of_this_leadership_to_join() {
        // Leader with log end 50 but a high watermark of 30 from before.
        let mut s = LeaderState::new(1, &[1, 2], &[1], 0, 50, 30, 0, 1);
        assert_eq!(s.high_watermark(), 50, "alone in the ISR");
        let mut s2 = LeaderState::new(1, &[1, 2, 3], &[1, 3], 0, 50, 30, 0, 1);
        s2.on_follower_fetch(3, 50, 50, 1);
        assert_eq!(s2.on_follower_fetch(2, 40, 50, 1), (false, None));
        assert_eq!(s2.on_follower_fetch(2, 50, 50, 2).1, Some(vec![1, 3, 2]));
        assert!(s.on_append(51));
    }

    #[test]
    fn replicas_added_by_a_reassignment_are_followed() {
        let mut s = LeaderState::new(1, &[1, 2], &[1, 2], 0, 10, 10, 0, 1);
        assert_eq!(s.on_follower_fetch(4, 10, 10, 1), (false, None));
        s.set_replicas(&[1, 2, 4], 1);
        s.on_follower_fetch(2, 10, 10, 2);
        assert_eq!(s.on_follower_fetch(4, 10, 10, 2).1, Some(vec![1, 2, 4]));
        s.set_isr(&[1, 2, 4], 1, 10);
        // 2 leaves: it no longer holds the high watermark back.
        s.set_replicas(&[1, 4], 3);
        s.set_isr(&[1, 4], 2, 10);
        s.on_append(12);
        assert!(s.on_follower_fetch(4, 12, 12, 4).0);
        assert_eq!(s.high_watermark(), 12);
    }

    #[test]
    fn unknown_replicas_are_ignored() {
        let mut s = three();
        assert_eq!(s.on_follower_fetch(9, 10, 10, 1), (false, None));
    }

    /// One thing that can happen to a leadership of replicas 1, 2, 3.
    #[derive(Debug, Clone)]
    enum Step {
        Append(u64),
        Fetch {
            follower: i32,
            ahead_of_end: bool,
            back: u64,
        },
        Shrink,
        IsrChanged(Vec<i32>),
        ProposalFailed,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            (1u64..20).prop_map(Step::Append),
            (2..=3, any::<bool>(), 0u64..15).prop_map(|(follower, ahead_of_end, back)| {
                Step::Fetch {
                    follower,
                    ahead_of_end,
                    back,
                }
            }),
            Just(Step::Shrink),
            prop::sample::select(vec![vec![1], vec![1, 2], vec![1, 3], vec![1, 2, 3]])
                .prop_map(Step::IsrChanged),
            Just(Step::ProposalFailed),
        ]
    }

    proptest::proptest! {
        /// Whatever happens, the high watermark never decreases and never
        /// passes the leader's log end.
        #[test]
        fn the_high_watermark_never_decreases_nor_passes_the_log_end(
            steps in proptest::collection::vec(step(), 1..200)
        ) {
            let mut s = three();
            let mut log_end = 10;
            let mut held = BTreeMap::from([(2, 10u64), (3, 10u64)]);
            let mut now = 0;
            let mut partition_epoch = 0;
            for step in steps {
                now += 100;
                let before = s.high_watermark();
                match step {
                    Step::Append(n) => {
                        log_end += n;
                        s.on_append(log_end);
                    }
                    Step::Fetch { follower, ahead_of_end, back } => {
                        let offset = if ahead_of_end {
                            log_end
                        } else {
                            held[&follower].saturating_sub(back)
                        };
                        held.insert(follower, offset);
                        s.on_follower_fetch(follower, offset, log_end, now);
                    }
                    Step::Shrink => {
                        s.shrink(now, 1_000);
                    }
                    Step::IsrChanged(isr) => {
                        partition_epoch += 1;
                        s.set_isr(&isr, partition_epoch, log_end);
                    }
                    Step::ProposalFailed => s.proposal_failed(),
                }
                proptest::prop_assert!(s.high_watermark() >= before);
                proptest::prop_assert!(s.high_watermark() <= log_end);
            }
        }
    }
}
