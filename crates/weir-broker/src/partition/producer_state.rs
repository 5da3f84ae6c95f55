//! Idempotent-producer state of one partition: for each producer id, its
//! epoch and the last five batches it wrote, so that a retried batch is
//! answered with its original offset instead of being appended twice; and
//! the epoch of the transaction coordinator that last wrote it a marker.
//! (Which producers have a transaction open, and since which offset, the
//! log itself knows: `Log::open_transaction`.)

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

/// How many recent batches are remembered per producer (Kafka's
/// `max.in.flight.requests.per.connection` limit for idempotence).
pub const CACHED_BATCHES: usize = 5;

/// A batch already in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: u64,
    pub last_offset: u64,
    pub timestamp: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
    /// The epoch of the transaction coordinator that wrote this producer's
    /// last marker (-1: none). Snapshots from before transactions lack it.
    #[serde(default = "no_coordinator_epoch")]
    pub coordinator_epoch: i32,
    /// The timestamp of the producer's last batch or marker, which
    /// `producer.id.expiration.ms` counts from (Kafka's `lastTimestamp`).
    /// Snapshots from before expiry lack it: then the cached batches say.
    #[serde(default = "no_timestamp")]
    pub last_timestamp: i64,
}

fn no_timestamp() -> i64 {
    i64::MIN
}

fn no_coordinator_epoch() -> i32 {
    -1
}

impl Default for ProducerEntry {
    fn default() -> Self {
        Self {
            epoch: 0,
            batches: VecDeque::new(),
            coordinator_epoch: no_coordinator_epoch(),
            last_timestamp: no_timestamp(),
        }
    }
}

/// Whether a transaction marker may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerCheck {
    Write,
    /// The marker's producer epoch is older than the producer's: it
    /// belongs to a transaction that has ended, and must not end a later
    /// one.
    FencedEpoch {
        current: i16,
        got: i16,
    },
    /// A coordinator older than the one that wrote the producer's last
    /// marker (a zombie after a coordinator failover).
    FencedCoordinator {
        current: i32,
        got: i32,
    },
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// Already in the log: acknowledge with the original offsets.
    Duplicate(BatchMetadata),
    /// Sequence gap or a new epoch not starting at 0.
    OutOfOrder { expected: i32, got: i32 },
    /// The producer's epoch is older than the one seen.
    FencedEpoch { current: i16, got: i16 },
}

/// An incoming batch as far as idempotence cares.
#[derive(Debug, Clone, Copy)]
pub struct IncomingBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
}

/// What a partition knows of one producer (see [`ProducerStates::active`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence written, -1 if none since the epoch began.
    pub last_sequence: i32,
    /// The time of its last batch or marker, -1 if unknown.
    pub last_timestamp: i64,
    /// The epoch of the coordinator of its last marker, -1 if none.
    pub coordinator_epoch: i32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStates {
    /// Decides, as Kafka does, whether a batch is new, a retry, or invalid.
    pub fn check(&self, batch: &IncomingBatch) -> SequenceCheck {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            // Unknown producer (new, or its state expired): any sequence.
            return SequenceCheck::Append;
        };
        if batch.epoch < entry.epoch {
            return SequenceCheck::FencedEpoch {
                current: entry.epoch,
                got: batch.epoch,
            };
        }
        // A new epoch, or one freshly bumped, starts at sequence 0.
        let expected = match entry.batches.back() {
            _ if batch.epoch > entry.epoch => 0,
            None => 0,
            Some(last) if last.last_seq == i32::MAX => 0,
            Some(last) => last.last_seq + 1,
        };
        if batch.epoch == entry.epoch {
            if let Some(dup) = entry
                .batches
                .iter()
                .find(|b| b.first_seq == batch.first_seq && b.last_seq == batch.last_seq)
            {
                return SequenceCheck::Duplicate(*dup);
            }
        }
        if batch.first_seq == expected {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrder {
                expected,
                got: batch.first_seq,
            }
        }
    }

    /// Records a batch that was appended (or replayed from the log).
    pub fn record(&mut self, batch: &IncomingBatch, metadata: BatchMetadata) {
        let entry = self.producers.entry(batch.producer_id).or_default();
        if batch.epoch != entry.epoch {
            entry.epoch = batch.epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == CACHED_BATCHES {
            entry.batches.pop_front();
        }
        entry.last_timestamp = entry.last_timestamp.max(metadata.timestamp);
        entry.batches.push_back(metadata);
    }

    /// Decides, as Kafka does, whether a marker of `producer_id` at
    /// `epoch` from a coordinator at `coordinator_epoch` may be written. A
    /// producer this partition has not seen may be written a marker (it
    /// changes nothing).
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> MarkerCheck {
        let Some(entry) = self.producers.get(&producer_id) else {
            return MarkerCheck::Write;
        };
        if epoch < entry.epoch {
            MarkerCheck::FencedEpoch {
                current: entry.epoch,
                got: epoch,
            }
        } else if coordinator_epoch < entry.coordinator_epoch {
            MarkerCheck::FencedCoordinator {
                current: entry.coordinator_epoch,
                got: coordinator_epoch,
            }
        } else {
            MarkerCheck::Write
        }
    }

    /// Records a marker that was appended (or replayed from the log): the
    /// producer takes its epoch (a newer one clears the cached batches:
    /// sequences start again at 0), and the coordinator epoch.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        timestamp: i64,
    ) {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch,
                ..ProducerEntry::default()
            });
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = entry.coordinator_epoch.max(coordinator_epoch);
        entry.last_timestamp = entry.last_timestamp.max(timestamp);
    }

    /// Forgets the producers that wrote nothing for `expiration_ms`
    /// (Kafka's `producer.id.expiration.ms`), but those with a transaction
    /// open; returns how many went. A producer forgotten is treated as new:
    /// its next batch may start at any sequence.
    pub fn expire(
        &mut self,
        now_ms: i64,
        expiration_ms: i64,
        in_transaction: impl Fn(i64) -> bool,
    ) -> usize {
        let before = self.producers.len();
        self.producers.retain(|&producer_id, entry| {
            let last = entry.batches.back().map_or(entry.last_timestamp, |b| {
                b.timestamp.max(entry.last_timestamp)
            });
            now_ms.saturating_sub(last) < expiration_ms || in_transaction(producer_id)
        });
        before - self.producers.len()
    }

    /// The producer's epoch and the epoch of the last coordinator that
    /// wrote it a marker, if this partition knows it.
    pub fn epochs(&self, producer_id: i64) -> Option<(i16, i32)> {
        self.producers
            .get(&producer_id)
            .map(|entry| (entry.epoch, entry.coordinator_epoch))
    }

    /// Notes a new epoch for a producer (InitProducerId bumped it).
    pub fn bump_epoch(&mut self, producer_id: i64, epoch: i16) {
        let entry = self.producers.entry(producer_id).or_default();
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
    }

    /// The producers this partition remembers, as DescribeProducers shows
    /// them (Kafka's `ProducerStateEntry`), by producer id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut active: Vec<ActiveProducer> = self
            .producers
            .iter()
            .map(|(&producer_id, entry)| {
                let last = entry.batches.back();
                let last_timestamp = last.map_or(entry.last_timestamp, |b| {
                    b.timestamp.max(entry.last_timestamp)
                });
                ActiveProducer {
                    producer_id,
                    epoch: entry.epoch,
                    last_sequence: last.map_or(-1, |b| b.last_seq),
                    // Snapshots from before expiry know no time: -1 as
                    // Kafka's "no timestamp".
                    last_timestamp: if last_timestamp == i64::MIN {
                        -1
                    } else {
                        last_timestamp
                    },
                    coordinator_epoch: entry.coordinator_epoch,
                }
            })
            .collect();
        active.sort_by_key(|p| p.producer_id);
        active
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, first_seq: i32, last_seq: i32) -> IncomingBatch {
        IncomingBatch {
            producer_id: 7,
            epoch,
            first_seq,
            last_seq,
        }
    }

    fn meta(first_seq: i32, last_seq: i32, base_offset: u64) -> BatchMetadata {
        BatchMetadata {
            first_seq,
            last_seq,
            base_offset,
            last_offset: base_offset + (last_seq - first_seq) as u64,
            timestamp: 0,
        }
    }

    /// Appends batches of `len` records starting at sequence 0.
    fn with_batches(count: i32, len: i32) -> ProducerStates {
        let mut states = ProducerStates::default();
        for i in 0..count {
            let (first, last) = (i * len, i * len + len - 1);
            assert_eq!(states.check(&batch(0, first, last)), SequenceCheck::Append);
            states.record(&batch(0, first, last), meta(first, last, first as u64 * 10));
        }
        states
    }

    #[test]
    fn sequence_rules() {
        let states = with_batches(7, 2); // sequences 0..=13
        let table = [
            // (epoch, first, last, expected)
            (0, 14, 15, SequenceCheck::Append),
            (
                0,
                16,
                17,
                SequenceCheck::OutOfOrder {
                    expected: 14,
                    got: 16,
                },
            ),
            (0, 12, 13, SequenceCheck::Duplicate(meta(12, 13, 120))),
            (0, 4, 5, SequenceCheck::Duplicate(meta(4, 5, 40))),
            // Older than the last five: not recognised as a duplicate.
            (
                0,
                2,
                3,
                SequenceCheck::OutOfOrder {
                    expected: 14,
                    got: 2,
                },
            ),
            (1, 0, 3, SequenceCheck::Append),
            (
                1,
                5,
                6,
                SequenceCheck::OutOfOrder {
                    expected: 0,
                    got: 5,
                },
            ),
            (
                -1,
                14,
                15,
                SequenceCheck::FencedEpoch {
                    current: 0,
                    got: -1,
                },
            ),
        ];
        for (epoch, first, last, expected) in table {
            assert_eq!(
                states.check(&batch(epoch, first, last)),
                expected,
                "epoch {epoch} seq {first}..={last}"
            );
        }
    }

    #[test]
    fn unknown_producers_may_start_anywhere() {
        let states = ProducerStates::default();
        assert_eq!(states.check(&batch(3, 500, 510)), SequenceCheck::Append);
    }

    #[test]
    fn sequences_wrap_after_i32_max() {
        let mut states = ProducerStates::default();
        states.record(
            &batch(0, i32::MAX - 1, i32::MAX),
            meta(i32::MAX - 1, i32::MAX, 0),
        );
        assert_eq!(states.check(&batch(0, 0, 4)), SequenceCheck::Append);
    }

    #[test]
    fn markers_from_older_epochs_and_older_coordinators_are_fenced() {
        let mut states = with_batches(2, 1);
        assert_eq!(states.check_marker(7, 0, 3), MarkerCheck::Write);
        assert_eq!(
            states.check_marker(99, 0, 0),
            MarkerCheck::Write,
            "unknown producer"
        );
        // The coordinator ended the transaction with a bumped epoch.
        states.record_marker(7, 1, 3, 0);
        assert_eq!(
            states.check_marker(7, 0, 3),
            MarkerCheck::FencedEpoch { current: 1, got: 0 },
            "a delayed marker of the earlier transaction"
        );
        assert_eq!(
            states.check_marker(7, 1, 2),
            MarkerCheck::FencedCoordinator { current: 3, got: 2 }
        );
        assert_eq!(states.check_marker(7, 2, 4), MarkerCheck::Write);
        // Data of the old epoch is fenced too; the new one starts at 0.
        assert_eq!(
            states.check(&batch(0, 2, 2)),
            SequenceCheck::FencedEpoch { current: 1, got: 0 }
        );
        assert_eq!(states.check(&batch(1, 0, 0)), SequenceCheck::Append);
        // A marker at the same epoch keeps the cached batches.
        states.record(&batch(1, 0, 0), meta(0, 0, 50));
        states.record_marker(7, 1, 3, 0);
        assert_eq!(
            states.check(&batch(1, 0, 0)),
            SequenceCheck::Duplicate(meta(0, 0, 50))
        );
    }

    #[test]
    fn snapshots_from_before_transactions_still_load() {
        let old = r#"{"producers":{"7":{"epoch":2,"batches":[]}}}"#;
        let states: ProducerStates = serde_json::from_str(old).unwrap();
        assert_eq!(states.check_marker(7, 2, 0), MarkerCheck::Write);
        assert_eq!(
            states.check_marker(7, 1, 0),
            MarkerCheck::FencedEpoch { current: 2, got: 1 }
        );
        let round_trip: ProducerStates =
            serde_json::from_str(&serde_json::to_string(&states).unwrap()).unwrap();
        assert_eq!(round_trip.check_marker(7, 2, -1), MarkerCheck::Write);
    }

    #[test]
    fn active_producers_show_their_last_batch_and_marker() {
        let mut states = with_batches(3, 2); // producer 7, sequences 0..=5
        states.record_marker(9, 2, 4, 7_000);
        let at = |timestamp| BatchMetadata {
            timestamp,
            ..meta(6, 7, 60)
        };
        states.record(&batch(0, 6, 7), at(5_000));
        assert_eq!(
            states.active(),
            vec![
                ActiveProducer {
                    producer_id: 7,
                    epoch: 0,
                    last_sequence: 7,
                    last_timestamp: 5_000,
                    coordinator_epoch: -1,
                },
                // Only a marker: no sequence yet.
                ActiveProducer {
                    producer_id: 9,
                    epoch: 2,
                    last_sequence: -1,
                    last_timestamp: 7_000,
                    coordinator_epoch: 4,
                },
            ]
        );
        let old = r#"{"producers":{"7":{"epoch":2,"batches":[]}}}"#;
        let loaded: ProducerStates = serde_json::from_str(old).unwrap();
        assert_eq!(loaded.active()[0].last_timestamp, -1);
    }

    #[test]
    fn an_epoch_bump_clears_the_cache() {
        let mut states = with_batches(2, 1);
        states.bump_epoch(7, 1);
        assert_eq!(
            states.check(&batch(0, 2, 2)),
            SequenceCheck::FencedEpoch { current: 1, got: 0 }
        );
        assert_eq!(states.check(&batch(1, 0, 0)), SequenceCheck::Append);
    }

    #[test]
    fn producers_idle_past_the_expiration_go_unless_in_a_transaction() {
        let mut states = ProducerStates::default();
        let at = |timestamp| BatchMetadata {
            timestamp,
            ..meta(0, 0, 0)
        };
        states.record(
            &IncomingBatch {
                producer_id: 1,
                ..batch(0, 0, 0)
            },
            at(1_000),
        );
        states.record(
            &IncomingBatch {
                producer_id: 2,
                ..batch(0, 0, 0)
            },
            at(1_000),
        );
        states.record(
            &IncomingBatch {
                producer_id: 3,
                ..batch(0, 0, 0)
            },
            at(5_000),
        );
        states.record_marker(4, 0, 0, 1_000);
        // Producer 2 has a transaction open; 3 wrote recently.
        assert_eq!(states.expire(10_000, 6_000, |id| id == 2), 2);
        assert!(states.epochs(1).is_none() && states.epochs(4).is_none());
        assert!(states.epochs(2).is_some() && states.epochs(3).is_some());
        // A forgotten producer is a new one: any sequence goes.
        assert_eq!(
            states.check(&IncomingBatch {
                producer_id: 1,
                ..batch(0, 42, 42)
            }),
            SequenceCheck::Append
        );
        assert_eq!(states.expire(10_999, 6_000, |id| id == 2), 0);
        // Its transaction over, producer 2 goes too.
        assert_eq!(states.expire(11_000, 6_000, |_| false), 2);
        assert!(states.is_empty());
    }
}
