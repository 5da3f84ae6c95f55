//! Tests of the share-partition state machine (tables of the transitions,
//! and random schedules of members checked against named invariants) and
//! of share group membership.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

mod membership;

fn log(offsets: std::ops::Range<i64>) -> Vec<LogRecord> {
    offsets
        .map(|offset| LogRecord {
            offset,
            batch_last_offset: offset,
            deliver_at_ms: None,
        })
        .collect()
}

fn range(first: i64, last: i64, delivery_count: u16) -> AcquiredRange {
    AcquiredRange {
        first_offset: first,
        last_offset: last,
        delivery_count,
    }
}

fn config() -> SharePartitionConfig {
    SharePartitionConfig {
        record_lock_duration_ms: 1_000,
        delivery_count_limit: 3,
        max_in_flight: 10,
        ..SharePartitionConfig::default()
    }
}

#[test]
fn members_acquire_disjoint_records_and_acknowledged_ones_move_the_start() {
    let mut sp = SharePartition::new(config(), 0);
    assert_eq!(sp.fetch_offset(0), Some(0));
    assert_eq!(sp.acquire("a", 0, log(0..4), 2), vec![range(0, 1, 1)]);
    // b reads the log from the same place and gets what a did not take.
    assert_eq!(sp.acquire("b", 0, log(0..4), 10), vec![range(2, 3, 1)]);
    assert_eq!(sp.counts(), (0, 4, 0, 0));
    sp.acknowledge("b", 0, &[(2, 3, AcknowledgeType::Accept)])
        .unwrap();
    assert_eq!(sp.start_offset(), 0, "0 and 1 are still acquired");
    sp.acknowledge("a", 0, &[(0, 1, AcknowledgeType::Accept)])
        .unwrap();
    assert_eq!((sp.start_offset(), sp.end_offset()), (4, 4));
    assert_eq!(sp.counts(), (0, 0, 0, 0));
}

#[test]
fn only_the_member_holding_a_record_acknowledges_it_and_only_once() {
    let mut sp = SharePartition::new(config(), 0);
    sp.acquire("a", 0, log(0..3), 10);
    assert_eq!(
        sp.acknowledge("b", 0, &[(0, 0, AcknowledgeType::Accept)]),
        Err(ShareError::InvalidRecordState(0))
    );
    // All or nothing: 5 was never acquired, so 0-2 stay acquired.
    assert_eq!(
        sp.acknowledge(
            "a",
            0,
            &[
                (0, 2, AcknowledgeType::Accept),
                (5, 5, AcknowledgeType::Accept)
            ]
        ),
        Err(ShareError::InvalidRecordState(5))
    );
    assert_eq!(sp.record(0), Some((RecordState::Acquired, 1)));
    assert_eq!(
        sp.acknowledge(
            "a",
            0,
            &[
                (1, 2, AcknowledgeType::Accept),
                (0, 1, AcknowledgeType::Accept)
            ]
        ),
        Err(ShareError::InvalidRequest)
    );
    sp.acknowledge("a", 0, &[(0, 0, AcknowledgeType::Accept)])
        .unwrap();
    assert_eq!(
        sp.acknowledge("a", 0, &[(0, 0, AcknowledgeType::Accept)]),
        Err(ShareError::InvalidRecordState(0)),
        "acknowledged once"
    );
}

#[test]
fn an_expired_lock_makes_the_record_available_to_another_member() {
    let mut sp = SharePartition::new(config(), 0);
    sp.acquire("a", 0, log(0..2), 10);
    assert_eq!(sp.next_lock_expiry_ms(), Some(1_000));
    sp.expire_locks(999);
    assert_eq!(sp.fetch_offset(999), Some(2), "nothing to redeliver yet");
    sp.expire_locks(1_000);
    assert_eq!(sp.fetch_offset(1_000), Some(0));
    assert_eq!(sp.acquire("b", 1_000, log(0..2), 10), vec![range(0, 1, 2)]);
    // a's late acknowledgement is refused: the records are b's now.
    assert_eq!(
        sp.acknowledge("a", 1_001, &[(0, 1, AcknowledgeType::Accept)]),
        Err(ShareError::InvalidRecordState(0))
    );
    sp.acknowledge("b", 1_001, &[(0, 1, AcknowledgeType::Accept)])
        .unwrap();
    assert_eq!(sp.start_offset(), 2);
}

#[test]
fn a_record_delivered_as_often_as_allowed_is_a_dead_letter_and_so_is_a_rejected_one() {
    for dead_letter_topic in [false, true] {
        let mut sp = SharePartition::new(
            SharePartitionConfig {
                dead_letter_topic,
                ..config()
            },
            0,
        );
        for delivery in 1..=3u16 {
            assert_eq!(
                sp.acquire("a", 0, log(0..1), 10),
                vec![range(0, 0, delivery)]
            );
            sp.acknowledge("a", 0, &[(0, 0, AcknowledgeType::Release)])
                .unwrap();
        }
        let archived = if dead_letter_topic {
            RecordState::Archiving
        } else {
            RecordState::Archived
        };
        assert_eq!(
            sp.record(0).map(|r| r.0).unwrap_or(RecordState::Archived),
            archived
        );
        sp.acquire("a", 0, log(1..3), 10);
        sp.acknowledge(
            "a",
            0,
            &[
                (1, 1, AcknowledgeType::Reject),
                (2, 2, AcknowledgeType::Gap),
            ],
        )
        .unwrap();
        let (changes, dead) = sp.take_changes();
        if !dead_letter_topic {
            // Without a dead-letter topic, undeliverable records are
            // simply archived.
            assert!(dead.is_empty());
            assert_eq!(changes.unwrap().start_offset, 3);
            continue;
        }
        assert_eq!(
            dead,
            vec![
                DeadLetter {
                    offset: 0,
                    delivery_count: 3,
                    reason: DeadLetterReason::DeliveryLimit
                },
                DeadLetter {
                    offset: 1,
                    delivery_count: 1,
                    reason: DeadLetterReason::Rejected
                },
            ],
            "a gap is archived, not dead-lettered"
        );
        assert_eq!(changes.unwrap().start_offset, 0);
        assert!(sp.dead_letter_written(0) && sp.dead_letter_written(1));
        assert_eq!(sp.start_offset(), 3);
    }
}

#[test]
fn with_a_dead_letter_topic_the_start_offset_waits_for_each_dead_letter() {
    let mut sp = SharePartition::new(
        SharePartitionConfig {
            dead_letter_topic: true,
            ..config()
        },
        0,
    );
    sp.acquire("a", 0, log(0..3), 10);
    sp.acknowledge(
        "a",
        0,
        &[
            (0, 0, AcknowledgeType::Reject),
            (1, 2, AcknowledgeType::Accept),
        ],
    )
    .unwrap();
    assert_eq!(sp.record(0), Some((RecordState::Archiving, 1)));
    assert_eq!(
        sp.start_offset(),
        0,
        "the dead letter of 0 is not written yet"
    );
    let (_, dead) = sp.take_changes();
    assert_eq!(dead.len(), 1);
    // A failover now: the loaded partition still has it to write.
    let loaded = SharePartition::load(sp.config().clone(), &sp.snapshot());
    assert_eq!(
        loaded.pending_dead_letters(),
        vec![DeadLetter {
            offset: 0,
            delivery_count: 1,
            reason: DeadLetterReason::Rejected
        }]
    );
    assert!(sp.dead_letter_written(0));
    assert!(!sp.dead_letter_written(0), "written once");
    assert_eq!(sp.start_offset(), 3);
}

#[test]
fn no_more_than_max_in_flight_records_are_in_flight() {
    let mut sp = SharePartition::new(config(), 0);
    assert_eq!(sp.acquire("a", 0, log(0..20), 100), vec![range(0, 9, 1)]);
    assert_eq!(sp.fetch_offset(0), None, "full, and nothing available");
    sp.acknowledge("a", 0, &[(0, 4, AcknowledgeType::Accept)])
        .unwrap();
    assert_eq!(sp.fetch_offset(0), Some(10));
    assert_eq!(sp.acquire("b", 0, log(10..20), 100), vec![range(10, 14, 1)]);
}

#[test]
fn a_released_record_waits_a_backoff_that_doubles_with_each_delivery() {
    let mut sp = SharePartition::new(
        SharePartitionConfig {
            release_backoff_ms: 100,
            release_backoff_max_ms: 250,
            delivery_count_limit: 10,
            ..config()
        },
        0,
    );
    let mut now = 0;
    for (delivery, backoff) in [(1u16, 100u64), (2, 200), (3, 250), (4, 250)] {
        assert_eq!(
            sp.acquire("a", now, log(0..2), 1),
            vec![range(0, 0, delivery)]
        );
        sp.acknowledge("a", now, &[(0, 0, AcknowledgeType::Release)])
            .unwrap();
        // Meanwhile the next record is not held back.
        assert_eq!(sp.fetch_offset(now), Some(1));
        assert!(sp.acquire("b", now + backoff - 1, log(0..1), 1).is_empty());
        assert_eq!(sp.next_available_ms(), Some(now + backoff));
        now += backoff;
    }
}

#[test]
fn a_record_with_a_delivery_time_waits_for_it_without_holding_back_the_rest() {
    let mut sp = SharePartition::new(config(), 0);
    let records = [
        LogRecord {
            offset: 0,
            batch_last_offset: 0,
            deliver_at_ms: Some(5_000),
        },
        LogRecord {
            offset: 1,
            batch_last_offset: 1,
            deliver_at_ms: None,
        },
    ];
    assert_eq!(sp.acquire("a", 0, records, 10), vec![range(1, 1, 1)]);
    assert_eq!(sp.next_available_ms(), Some(5_000));
    assert_eq!(sp.fetch_offset(4_999), Some(2));
    assert_eq!(sp.fetch_offset(5_000), Some(0));
    assert_eq!(sp.acquire("a", 5_000, records, 10), vec![range(0, 0, 1)]);
}

#[test]
fn a_loaded_partition_redelivers_what_was_in_flight_and_nothing_settled() {
    let mut sp = SharePartition::new(config(), 0);
    sp.acquire("a", 0, log(0..5), 10);
    sp.acknowledge(
        "a",
        0,
        &[
            (1, 1, AcknowledgeType::Accept),
            (3, 3, AcknowledgeType::Release),
        ],
    )
    .unwrap();
    let snapshot = sp.snapshot();
    assert_eq!(snapshot.start_offset, 0);
    let loaded = SharePartition::load(config(), &snapshot);
    assert_eq!(loaded.start_offset(), 0);
    assert_eq!(loaded.record(0), Some((RecordState::Available, 1)));
    assert_eq!(loaded.record(1), Some((RecordState::Acknowledged, 1)));
    assert_eq!(loaded.record(3), Some((RecordState::Available, 1)));
    assert_eq!(loaded.end_offset(), 5);
    // Updates carry the same: replaying them over the snapshot agrees.
    let (update, _) = sp.take_changes();
    assert!(update.is_some());
}

#[test]
fn records_below_the_log_start_are_archived() {
    let mut sp = SharePartition::new(config(), 0);
    sp.acquire("a", 0, log(0..4), 10);
    sp.on_log_start(2);
    assert_eq!(sp.start_offset(), 2);
    assert_eq!(
        sp.acknowledge("a", 0, &[(0, 0, AcknowledgeType::Accept)]),
        Err(ShareError::InvalidRecordState(0))
    );
    sp.on_log_start(10);
    assert_eq!((sp.start_offset(), sp.end_offset()), (10, 10));
}

#[test]
fn max_records_is_a_soft_limit_reached_at_the_end_of_a_batch() {
    let mut sp = SharePartition::new(config(), 0);
    // Two batches, 0..=3 and 4..=7.
    let log: Vec<LogRecord> = (0..8)
        .map(|offset| LogRecord {
            offset,
            batch_last_offset: if offset < 4 { 3 } else { 7 },
            deliver_at_ms: None,
        })
        .collect();
    assert_eq!(sp.acquire("a", 0, log.clone(), 2), vec![range(0, 3, 1)]);
    assert_eq!(sp.acquire("b", 0, log.clone(), 0), vec![]);
    assert_eq!(sp.acquire("b", 0, log.clone(), 1), vec![range(4, 7, 1)]);
    // Reached at a batch's last record, the limit holds exactly.
    let mut exact = SharePartition::new(config(), 0);
    assert_eq!(exact.acquire("a", 0, log, 4), vec![range(0, 3, 1)]);
}

#[test]
fn the_log_skipping_offsets_archives_them() {
    let mut sp = SharePartition::new(config(), 0);
    let compacted = [0, 3].map(|offset| LogRecord {
        offset,
        batch_last_offset: offset,
        deliver_at_ms: None,
    });
    assert_eq!(
        sp.acquire("a", 0, compacted, 10),
        vec![range(0, 0, 1), range(3, 3, 1)]
    );
    assert_eq!(sp.record(1), Some((RecordState::Archived, 0)));
    sp.acknowledge(
        "a",
        0,
        &[
            (0, 0, AcknowledgeType::Accept),
            (3, 3, AcknowledgeType::Accept),
        ],
    )
    .unwrap();
    assert_eq!(sp.start_offset(), 4);
}

#[test]
fn read_committed_acquisition_leaves_out_aborted_transactions() {
    use weir_log::testing::BatchBuilder;
    use weir_log::AbortedTxn;
    let rebase = |mut batch: Vec<u8>, base: i64| {
        batch[..8].copy_from_slice(&base.to_be_bytes());
        batch
    };
    // Offsets 0-1 of producer 7 (aborted, marker at 4), 2-3 of producer 8
    // (committed), 5 of producer 7 after its abort.
    let mut log = rebase(
        BatchBuilder::new(2)
            .producer(7, 0, 0)
            .transactional()
            .build(),
        0,
    );
    log.extend(rebase(
        BatchBuilder::new(2)
            .producer(8, 0, 0)
            .transactional()
            .build(),
        2,
    ));
    log.extend(rebase(
        BatchBuilder::new(1)
            .producer(7, 0, 2)
            .transactional()
            .build(),
        5,
    ));
    let aborted = [AbortedTxn {
        producer_id: 7,
        first_offset: 0,
        last_offset: 4,
        last_stable_offset: 5,
    }];
    let offsets = |aborted: &[AbortedTxn]| -> Vec<i64> {
        log_records(&log, aborted)
            .unwrap()
            .iter()
            .map(|r| r.offset)
            .collect()
    };
    assert_eq!(offsets(&[]), vec![0, 1, 2, 3, 5]);
    assert_eq!(offsets(&aborted), vec![2, 3, 5]);
}

#[test]
fn acquisition_reads_each_records_delivery_time_from_its_header() {
    use weir_log::testing::KeyedBatch;
    let mut log = KeyedBatch::new()
        .record(Some(b"a"), Some(b"1"))
        .header(DELIVER_AT_HEADER, b"1700000005000")
        .record(Some(b"b"), Some(b"2"))
        .record(Some(b"c"), Some(b"3"))
        .header(DELIVER_AT_HEADER, b"soon")
        .build();
    log.extend(&log.clone()[..10]); // a partial batch at the end of a read
    assert_eq!(
        log_records(&log, &[]).unwrap(),
        vec![
            LogRecord {
                offset: 0,
                batch_last_offset: 2,
                deliver_at_ms: Some(1_700_000_005_000)
            },
            LogRecord {
                offset: 1,
                batch_last_offset: 2,
                deliver_at_ms: None
            },
            LogRecord {
                offset: 2,
                batch_last_offset: 2,
                deliver_at_ms: None
            },
        ]
    );
}

// ---- random schedules ----

#[derive(Debug, Clone)]
enum Step {
    Acquire {
        member: usize,
        max: usize,
    },
    /// The member acknowledges the `pick`-th run of what it holds.
    Acknowledge {
        member: usize,
        pick: usize,
        kind: u8,
    },
    /// An acknowledgement of arbitrary offsets (may be refused).
    Stray {
        member: usize,
        first: i64,
        len: i64,
    },
    Leave {
        member: usize,
    },
    Advance {
        ms: u64,
    },
    Reload,
    /// The dead letters reported so far are written.
    DeadLettersWritten,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3usize, 1..6usize).prop_map(|(member, max)| Step::Acquire { member, max }),
        4 => (0..3usize, 0..4usize, 0..4u8).prop_map(|(member, pick, kind)| Step::Acknowledge { member, pick, kind }),
        1 => (0..3usize, 0..30i64, 1..4i64).prop_map(|(member, first, len)| Step::Stray { member, first, len }),
        1 => (0..3usize).prop_map(|member| Step::Leave { member }),
        2 => (0..1_500u64).prop_map(|ms| Step::Advance { ms }),
        1 => Just(Step::Reload),
        2 => Just(Step::DeadLettersWritten),
    ]
}

const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];
const LOG_END: i64 = 40;
/// Records per batch of the schedules' log.
const BATCH: i64 = 3;

/// The schedules' log from `from`, in batches of `BATCH` records.
fn batched_log(from: i64) -> Vec<LogRecord> {
    (from..LOG_END)
        .map(|offset| LogRecord {
            offset,
            batch_last_offset: ((offset / BATCH + 1) * BATCH - 1).min(LOG_END - 1),
            deliver_at_ms: None,
        })
        .collect()
}

proptest! {
    /// Invariants, after every step:
    /// - `acknowledged_at_most_once`: an Accept succeeds at most once per
    ///   offset, and a settled record never goes back in flight;
    /// - `in_flight_within_the_limit`: never more than `max_in_flight`;
    /// - `records_within_the_soft_limit`: an acquisition takes at most
    ///   `max_records`, or more only to finish the batch that reached it;
    /// - `below_the_start_is_settled`: every offset below the start offset
    ///   was acknowledged or archived (by the model's account);
    /// - `one_holder`: what a member holds, by the model, is acquired;
    /// - `delivery_within_the_limit`: no record is delivered more often
    ///   than `delivery_count_limit`;
    /// - `reload_keeps_the_settled`: a share-partition loaded from its
    ///   snapshot has the same start offset, settled records, and records
    ///   owing a dead letter;
    /// - `dead_letters_once`: each undeliverable record is reported as a
    ///   dead letter once, and is settled only once it is written.
    #[test]
    fn share_partition_invariants(steps in prop::collection::vec(step(), 1..80)) {
        let config = SharePartitionConfig { release_backoff_ms: 10, dead_letter_topic: true, ..config() };
        let mut sp = SharePartition::new(config.clone(), 0);
        let mut now = 0u64;
        // The model: what each member holds, what was accepted, what settled.
        let mut held: Vec<BTreeSet<i64>> = vec![BTreeSet::new(); MEMBERS.len()];
        let mut accepted: BTreeSet<i64> = BTreeSet::new();
        let mut settled: BTreeSet<i64> = BTreeSet::new();
        let mut deliveries: BTreeMap<i64, u16> = BTreeMap::new();
        let mut locked_until: BTreeMap<i64, u64> = BTreeMap::new();
        // Undeliverable records whose dead letter is owed, and those written.
        let mut owed: BTreeSet<i64> = BTreeSet::new();
        let mut reported: Vec<DeadLetter> = Vec::new();
        for step in steps {
            match step {
                Step::Acquire { member, max } => {
                    let Some(from) = sp.fetch_offset(now) else { continue };
                    let got = sp.acquire(MEMBERS[member], now, batched_log(from), max);
                    let taken: Vec<i64> = got.iter().flat_map(|r| r.first_offset..=r.last_offset).collect();
                    if taken.len() > max {
                        let batch_of = |offset: i64| offset / BATCH;
                        let last = *taken.last().unwrap();
                        prop_assert_eq!(batch_of(taken[max - 1]), batch_of(last), "{:?} past the batch of the {}th", taken, max);
                    }
                    for r in got {
                        for offset in r.first_offset..=r.last_offset {
                            prop_assert!(!settled.contains(&offset), "settled {offset} delivered again");
                            for (other, theirs) in held.iter().enumerate() {
                                prop_assert!(!theirs.contains(&offset), "{offset} acquired while {other} holds it");
                            }
                            held[member].insert(offset);
                            locked_until.insert(offset, now + config.record_lock_duration_ms);
                            let count = deliveries.entry(offset).or_default();
                            *count += 1;
                            prop_assert_eq!(*count, r.delivery_count);
                            prop_assert!(*count <= config.delivery_count_limit);
                        }
                    }
                }
                Step::Acknowledge { member, pick, kind } => {
                    let runs = runs(&held[member]);
                    let Some(&(first, last)) = runs.get(pick % runs.len().max(1)) else { continue };
                    let kind = AcknowledgeType::from_id(kind as i8).unwrap();
                    sp.acknowledge(MEMBERS[member], now, &[(first, last, kind)]).unwrap();
                    for offset in first..=last {
                        held[member].remove(&offset);
                        match kind {
                            AcknowledgeType::Accept => {
                                prop_assert!(accepted.insert(offset), "{offset} accepted twice");
                                settled.insert(offset);
                            }
                            AcknowledgeType::Gap => {
                                settled.insert(offset);
                            }
                            AcknowledgeType::Reject => {
                                owed.insert(offset);
                            }
                            AcknowledgeType::Release => {
                                if deliveries[&offset] >= config.delivery_count_limit {
                                    owed.insert(offset);
                                }
                            }
                        }
                    }
                }
                Step::Stray { member, first, len } => {
                    let last = first + len - 1;
                    let mine = (first..=last).all(|o| held[member].contains(&o));
                    let result = sp.acknowledge(MEMBERS[member], now, &[(first, last, AcknowledgeType::Accept)]);
                    prop_assert_eq!(result.is_ok(), mine, "stray ack of {}-{}", first, last);
                    if mine {
                        for offset in first..=last {
                            held[member].remove(&offset);
                            prop_assert!(accepted.insert(offset), "{offset} accepted twice");
                            settled.insert(offset);
                        }
                    }
                }
                Step::Leave { member } => {
                    sp.release_member(MEMBERS[member], now);
                    for offset in std::mem::take(&mut held[member]) {
                        if deliveries[&offset] >= config.delivery_count_limit {
                            owed.insert(offset);
                        }
                    }
                }
                Step::Advance { ms } => {
                    now += ms;
                    sp.expire_locks(now);
                    for theirs in held.iter_mut() {
                        let expired: Vec<i64> = theirs
                            .iter()
                            .copied()
                            .filter(|o| locked_until[o] <= now)
                            .collect();
                        for offset in expired {
                            theirs.remove(&offset);
                            if deliveries[&offset] >= config.delivery_count_limit {
                                owed.insert(offset);
                            }
                        }
                    }
                }
                Step::Reload => {
                    let loaded = SharePartition::load(config.clone(), &sp.snapshot());
                    prop_assert_eq!(loaded.start_offset(), sp.start_offset());
                    for offset in loaded.start_offset()..loaded.end_offset() {
                        let (state, _) = loaded.record(offset).unwrap();
                        prop_assert_eq!(state.is_terminal(), settled.contains(&offset));
                        prop_assert_eq!(state == RecordState::Archiving, owed.contains(&offset));
                    }
                }
                Step::DeadLettersWritten => {
                    for dead in reported.drain(..) {
                        prop_assert!(owed.remove(&dead.offset), "dead letter {} not owed", dead.offset);
                        prop_assert!(sp.dead_letter_written(dead.offset));
                        settled.insert(dead.offset);
                    }
                }
            }
            let (available, acquired, acknowledged, archived) = sp.counts();
            prop_assert!(available + acquired + acknowledged + archived <= config.max_in_flight);
            for offset in 0..sp.start_offset() {
                prop_assert!(settled.contains(&offset), "{offset} below the start but not settled");
            }
            for (member, theirs) in held.iter().enumerate() {
                for offset in theirs {
                    prop_assert_eq!(sp.record(*offset).map(|r| r.0), Some(RecordState::Acquired),
                        "{} holds {}", member, offset);
                }
            }
            let (_, dead) = sp.take_changes();
            for letter in &dead {
                prop_assert!(owed.contains(&letter.offset), "dead letter {} not owed", letter.offset);
                prop_assert!(!reported.iter().any(|r| r.offset == letter.offset), "dead letter {} reported twice", letter.offset);
            }
            reported.extend(dead);
        }
    }
}

/// The runs of consecutive offsets in `offsets`.
fn runs(offsets: &BTreeSet<i64>) -> Vec<(i64, i64)> {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &offset in offsets {
        match runs.last_mut() {
            Some(last) if last.1 + 1 == offset => last.1 = offset,
            _ => runs.push((offset, offset)),
        }
    }
    runs
}
