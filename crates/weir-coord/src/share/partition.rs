//! One share-partition (KIP-932): which records of a topic partition a
//! share group has delivered, to whom, how often, and what became of them,
//! as a pure state machine (Kafka's SharePartition without its I/O).
//!
//! The records from the share-partition start offset (SPSO) up to its end
//! are in flight, each Available, Acquired (by one member, until its lock
//! expires), Acknowledged or Archived. A fetch acquires Available records,
//! oldest first, and new ones from the log past the end, as long as no more
//! than `max_in_flight` records are in flight. An acknowledgement accepts,
//! releases or rejects what its member acquired. A record released, or
//! whose lock expired, is Available again unless it has been delivered
//! `delivery_count_limit` times: then it is Archived. The start offset moves
//! over every Acknowledged or Archived record at its head, so everything
//! below it was acknowledged or archived.
//!
//! With a dead-letter topic (KIP-1191), a record archived because it was
//! rejected or reached the limit is Archiving until its dead letter is
//! written, and the start offset waits for it: a dead letter is never lost
//! to a failover, since the state says which are still to write.
//!
//! Two Weir extensions decide *when* an Available record may be acquired:
//! a release backoff that grows with the delivery count
//! (`weir.share.release.backoff.ms`, capped by `…max.ms`), and a record's
//! own delivery time (the `weir-deliver-at` header). Neither holds back the
//! records behind it.
//!
//! Every change the group must not forget is collected for persistence
//! (Kafka's ShareUpdate records): state batches of Available (with their
//! delivery count), Acknowledged and Archived records and the start offset.
//! Acquisitions are not persisted: a new leader makes every record that was
//! Acquired Available again, with the delivery count it last persisted.
//! Records archived because they were rejected or reached the delivery limit
//! are also reported as dead letters, for the group's dead-letter topic.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// The delivery state of an in-flight record, with Kafka's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    Available = 0,
    Acquired = 1,
    Acknowledged = 2,
    /// Undeliverable, its dead letter not yet written (KIP-1191).
    Archiving = 3,
    Archived = 4,
}

impl RecordState {
    pub fn id(self) -> i8 {
        self as i8
    }

    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(Self::Available),
            1 => Some(Self::Acquired),
            2 => Some(Self::Acknowledged),
            3 => Some(Self::Archiving),
            4 => Some(Self::Archived),
            _ => None,
        }
    }

    /// Acknowledged or Archived: nothing more happens to the record.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Acknowledged | Self::Archived)
    }
}

/// How a member acknowledges records (ShareAcknowledge's AcknowledgeTypes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcknowledgeType {
    /// The offsets hold no record for the consumer (a compacted gap, a
    /// control record): archived.
    Gap = 0,
    /// Processed: acknowledged.
    Accept = 1,
    /// Not processed, may be delivered again: available (or archived at the
    /// delivery limit).
    Release = 2,
    /// Unprocessable: archived (and dead-lettered).
    Reject = 3,
}

impl AcknowledgeType {
    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(Self::Gap),
            1 => Some(Self::Accept),
            2 => Some(Self::Release),
            3 => Some(Self::Reject),
            _ => None,
        }
    }
}

/// The settings of a share-partition, from the group's configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartitionConfig {
    /// `share.record.lock.duration.ms`: how long an acquired record stays
    /// with its member.
    pub record_lock_duration_ms: u64,
    /// `share.delivery.count.limit`: deliveries before a record is archived.
    pub delivery_count_limit: u16,
    /// `group.share.partition.max.record.locks`: the most records in flight.
    pub max_in_flight: usize,
    /// `weir.share.release.backoff.ms`: the wait before a released (or
    /// lock-expired) record is available again after its first delivery,
    /// doubling with each further delivery; 0 for none (Kafka's behaviour).
    pub release_backoff_ms: u64,
    /// `weir.share.release.backoff.max.ms`: the longest such wait.
    pub release_backoff_max_ms: u64,
    /// Whether the group has a dead-letter topic
    /// (`errors.deadletterqueue.topic.name`): an undeliverable record is
    /// then Archiving until its dead letter is written.
    pub dead_letter_topic: bool,
}

impl Default for SharePartitionConfig {
    fn default() -> Self {
        Self {
            record_lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_in_flight: 2_000,
            release_backoff_ms: 0,
            release_backoff_max_ms: 60_000,
            dead_letter_topic: false,
        }
    }
}

impl SharePartitionConfig {
    /// The wait before a record delivered `delivery_count` times is
    /// available again.
    pub fn backoff_ms(&self, delivery_count: u16) -> u64 {
        if self.release_backoff_ms == 0 || delivery_count == 0 {
            return 0;
        }
        let doublings = u32::from(delivery_count - 1).min(32);
        self.release_backoff_ms
            .saturating_mul(1u64 << doublings)
            .min(self.release_backoff_max_ms.max(self.release_backoff_ms))
    }
}

/// A record of the log as a fetch reads it for acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRecord {
    pub offset: i64,
    /// The last offset of the batch holding it: acquisition takes batches
    /// whole.
    pub batch_last_offset: i64,
    /// Its `weir-deliver-at` header (epoch milliseconds), if it has one.
    pub deliver_at_ms: Option<u64>,
}

/// Offsets acquired together, with the delivery count of this delivery
/// (ShareFetch's AcquiredRecords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: u16,
}

/// A run of consecutive offsets in one persisted state (Kafka's
/// StateBatch): Available (not yet or no longer acquired), Acknowledged or
/// Archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub state: RecordState,
    pub delivery_count: u16,
}

/// What a share-partition must persist: its start offset and the state of
/// the records in flight (a ShareSnapshot), or what changed (a ShareUpdate).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PersistedState {
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

/// Why a record went to the dead-letter topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadLetterReason {
    /// A member rejected it.
    Rejected,
    /// It was delivered `share.delivery.count.limit` times without being
    /// accepted.
    DeliveryLimit,
}

impl DeadLetterReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "REJECTED",
            Self::DeliveryLimit => "DELIVERY_COUNT_LIMIT",
        }
    }
}

/// A record archived as undeliverable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetter {
    pub offset: i64,
    pub delivery_count: u16,
    pub reason: DeadLetterReason,
}

/// Why an acknowledgement was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// An offset is not acquired by this member (never was, its lock
    /// expired, or it was already acknowledged): INVALID_RECORD_STATE.
    #[error("offset {0} is not acquired by this member")]
    InvalidRecordState(i64),
    /// The batches overlap, run backwards, or use an unknown type:
    /// INVALID_REQUEST.
    #[error("invalid acknowledgement batches")]
    InvalidRequest,
}

impl ShareError {
    pub fn code(&self) -> i16 {
        match self {
            ShareError::InvalidRecordState(_) => 121,
            ShareError::InvalidRequest => 42,
        }
    }
}

const NO_OWNER: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InFlight {
    state: RecordState,
    delivery_count: u16,
    /// Acquired: the index of its member in `members`.
    owner: u32,
    /// Acquired: when its lock expires. Available: when it may be acquired
    /// (backoff, delivery time); 0 for at once.
    until_ms: u64,
}

/// One share-partition; see the module documentation.
#[derive(Debug, Clone)]
pub struct SharePartition {
    config: SharePartitionConfig,
    start_offset: i64,
    /// The records from `start_offset` on, one per offset, up to the end.
    records: VecDeque<InFlight>,
    /// Member ids, interned: records name their owner by index.
    members: Vec<String>,
    member_index: HashMap<String, u32>,
    /// (lock expiry, first offset, last offset) of acquisitions, oldest
    /// first: one entry per acquired range, not per record. Records that
    /// moved on are skipped when met.
    locks: BinaryHeap<Reverse<(u64, i64, i64)>>,
    /// What changed since [`take_changes`](Self::take_changes), by offset.
    changed: Vec<i64>,
    start_changed: bool,
    dead_letters: Vec<DeadLetter>,
    /// Records archived (delivered too often, rejected, gapped, or gone
    /// from the log) since [`take_archived`](Self::take_archived).
    archived: u64,
}

/// How many records in flight are in each state, and the first available
/// one (see [`SharePartition::in_flight`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InFlightCounts {
    pub available: usize,
    pub acquired: usize,
    /// Waiting for their dead letter to be written.
    pub archiving: usize,
    pub first_available: Option<i64>,
}

impl SharePartition {
    /// A share-partition with nothing delivered yet, starting at
    /// `start_offset` (from `share.auto.offset.reset`).
    pub fn new(config: SharePartitionConfig, start_offset: i64) -> Self {
        Self {
            config,
            start_offset,
            records: VecDeque::new(),
            members: Vec::new(),
            member_index: HashMap::new(),
            locks: BinaryHeap::new(),
            changed: Vec::new(),
            start_changed: false,
            dead_letters: Vec::new(),
            archived: 0,
        }
    }

    /// A share-partition as persisted: records in flight keep their state
    /// and delivery count; what was acquired when it was persisted is
    /// Available (its member's lock did not survive).
    pub fn load(config: SharePartitionConfig, persisted: &PersistedState) -> Self {
        let mut partition = Self::new(config, persisted.start_offset);
        for batch in &persisted.batches {
            for offset in batch.first_offset.max(persisted.start_offset)..=batch.last_offset {
                let index = (offset - persisted.start_offset) as usize;
                while partition.records.len() <= index {
                    // Offsets between batches were never delivered.
                    partition.records.push_back(InFlight {
                        state: RecordState::Available,
                        delivery_count: 0,
                        owner: NO_OWNER,
                        until_ms: 0,
                    });
                }
                let state = match batch.state {
                    RecordState::Acquired => RecordState::Available,
                    state => state,
                };
                partition.records[index] = InFlight {
                    state,
                    delivery_count: batch.delivery_count,
                    owner: NO_OWNER,
                    until_ms: 0,
                };
            }
        }
        partition.advance_start();
        partition.changed.clear();
        partition.start_changed = false;
        partition
    }

    pub fn config(&self) -> &SharePartitionConfig {
        &self.config
    }

    /// New settings, for what happens from now on.
    pub fn set_config(&mut self, config: SharePartitionConfig) {
        self.config = config;
    }

    /// The share-partition start offset: every record below it was
    /// acknowledged or archived.
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// One past the last record in flight: where new records are read.
    pub fn end_offset(&self) -> i64 {
        self.start_offset + self.records.len() as i64
    }

    /// The records in flight by state (the records past
    /// [`end_offset`](Self::end_offset) are available too, not yet read).
    pub fn in_flight(&self) -> InFlightCounts {
        let mut counts = InFlightCounts::default();
        for (index, r) in self.records.iter().enumerate() {
            match r.state {
                RecordState::Available => {
                    counts.available += 1;
                    counts
                        .first_available
                        .get_or_insert(self.start_offset + index as i64);
                }
                RecordState::Acquired => counts.acquired += 1,
                RecordState::Archiving => counts.archiving += 1,
                RecordState::Acknowledged | RecordState::Archived => {}
            }
        }
        counts
    }

    /// How many records were archived since the last call.
    pub fn take_archived(&mut self) -> u64 {
        std::mem::take(&mut self.archived)
    }

    /// The state and delivery count of `offset`, if it is in flight.
    pub fn record(&self, offset: i64) -> Option<(RecordState, u16)> {
        self.slot(offset).map(|index| {
            (
                self.records[index].state,
                self.records[index].delivery_count,
            )
        })
    }

    /// How many records in flight are in each state: (available, acquired,
    /// acknowledged, archived or archiving).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let mut counts = (0, 0, 0, 0);
        for record in &self.records {
            match record.state {
                RecordState::Available => counts.0 += 1,
                RecordState::Acquired => counts.1 += 1,
                RecordState::Acknowledged => counts.2 += 1,
                RecordState::Archiving | RecordState::Archived => counts.3 += 1,
            }
        }
        counts
    }

    /// Where a fetch for this share-partition reads the log: the first
    /// record that may be acquired at `now_ms`, or the end if more may be
    /// put in flight; `None` when nothing can be acquired now.
    pub fn fetch_offset(&self, now_ms: u64) -> Option<i64> {
        let ready = self
            .records
            .iter()
            .position(|r| r.state == RecordState::Available && r.until_ms <= now_ms);
        match ready {
            Some(index) => Some(self.start_offset + index as i64),
            None => (self.records.len() < self.config.max_in_flight).then(|| self.end_offset()),
        }
    }

    /// When an Available record held back (backoff, delivery time) becomes
    /// acquirable, if any is.
    pub fn next_available_ms(&self) -> Option<u64> {
        self.records
            .iter()
            .filter(|r| r.state == RecordState::Available && r.until_ms > 0)
            .map(|r| r.until_ms)
            .min()
    }

    /// When the oldest lock expires, if any record is acquired.
    pub fn next_lock_expiry_ms(&mut self) -> Option<u64> {
        while let Some(&Reverse((at, first, last))) = self.locks.peek() {
            match (first..=last).find(|&offset| self.is_locked_until(offset, at)) {
                Some(locked) => {
                    // What was passed over is not looked at again.
                    if let Some(mut oldest) = self.locks.peek_mut() {
                        oldest.0 .1 = locked;
                    }
                    return Some(at);
                }
                None => {
                    self.locks.pop();
                }
            }
        }
        None
    }

    /// Acquires for `member` the records of `log` (read from
    /// [`fetch_offset`](Self::fetch_offset) on, in offset order) that may be
    /// acquired at `now_ms`, putting new records in flight while fewer than
    /// `max_in_flight` are. `max_records` is a soft limit, as in Kafka's
    /// default `share.acquire.mode` (batch_optimized): the rest of the batch
    /// holding the `max_records`-th record is acquired too, so a client
    /// that reads whole batches gets each batch once. Offsets the
    /// log skips (compacted away, control records) past the end are
    /// archived. Returns the acquired offsets in ranges of one delivery
    /// count.
    pub fn acquire(
        &mut self,
        member: &str,
        now_ms: u64,
        log: impl IntoIterator<Item = LogRecord>,
        max_records: usize,
    ) -> Vec<AcquiredRange> {
        let owner = self.intern(member);
        let lock_until = now_ms + self.config.record_lock_duration_ms;
        let mut acquired: Vec<AcquiredRange> = Vec::new();
        let mut taken = 0;
        // Once `max_records` are taken: the last offset of their batch.
        let mut last_of_batch = i64::MIN;
        for record in log {
            if taken >= max_records && record.offset > last_of_batch {
                break;
            }
            if record.offset < self.start_offset {
                continue;
            }
            let end = self.end_offset();
            if record.offset >= end {
                if self.records.len() >= self.config.max_in_flight {
                    break;
                }
                // Offsets the log does not hold: nothing to deliver.
                for gap in end..record.offset {
                    self.records.push_back(InFlight {
                        state: RecordState::Archived,
                        delivery_count: 0,
                        owner: NO_OWNER,
                        until_ms: 0,
                    });
                    self.changed.push(gap);
                }
                self.records.push_back(InFlight {
                    state: RecordState::Available,
                    delivery_count: 0,
                    owner: NO_OWNER,
                    until_ms: record.deliver_at_ms.unwrap_or(0),
                });
            }
            let index = self.slot(record.offset).expect("in flight");
            let slot = &mut self.records[index];
            if slot.state != RecordState::Available || slot.until_ms > now_ms {
                continue;
            }
            slot.state = RecordState::Acquired;
            slot.delivery_count = slot.delivery_count.saturating_add(1);
            slot.owner = owner;
            slot.until_ms = lock_until;
            let delivery_count = slot.delivery_count;
            // Persisted as available with its count: a failover redelivers
            // it, and still counts this delivery.
            self.changed.push(record.offset);
            taken += 1;
            if taken == max_records {
                last_of_batch = record.batch_last_offset;
            }
            match acquired.last_mut() {
                Some(last)
                    if last.last_offset + 1 == record.offset
                        && last.delivery_count == delivery_count =>
                {
                    last.last_offset = record.offset;
                }
                _ => acquired.push(AcquiredRange {
                    first_offset: record.offset,
                    last_offset: record.offset,
                    delivery_count,
                }),
            }
        }
        for range in &acquired {
            self.locks
                .push(Reverse((lock_until, range.first_offset, range.last_offset)));
        }
        self.advance_start();
        acquired
    }

    /// Applies `member`'s acknowledgements, (first offset, last offset,
    /// type) each: all of them, or none if one names an offset the member
    /// has not acquired.
    pub fn acknowledge(
        &mut self,
        member: &str,
        now_ms: u64,
        batches: &[(i64, i64, AcknowledgeType)],
    ) -> Result<(), ShareError> {
        let owner = self.member_index.get(member).copied();
        let mut previous_last: Option<i64> = None;
        for &(first, last, _) in batches {
            if first > last || previous_last.is_some_and(|p| first <= p) {
                return Err(ShareError::InvalidRequest);
            }
            previous_last = Some(last);
            for offset in first..=last {
                let held = self.slot(offset).is_some_and(|index| {
                    let r = &self.records[index];
                    r.state == RecordState::Acquired && Some(r.owner) == owner
                });
                if !held {
                    return Err(ShareError::InvalidRecordState(offset));
                }
            }
        }
        for &(first, last, kind) in batches {
            for offset in first..=last {
                match kind {
                    AcknowledgeType::Accept => self.settle(offset, RecordState::Acknowledged, None),
                    AcknowledgeType::Gap => self.settle(offset, RecordState::Archived, None),
                    AcknowledgeType::Reject => self.settle(
                        offset,
                        RecordState::Archived,
                        Some(DeadLetterReason::Rejected),
                    ),
                    AcknowledgeType::Release => self.make_available(offset, now_ms),
                }
            }
        }
        self.advance_start();
        Ok(())
    }

    /// Everything `member` has acquired is available again (it left the
    /// group or closed its share session).
    pub fn release_member(&mut self, member: &str, now_ms: u64) {
        let Some(&owner) = self.member_index.get(member) else {
            return;
        };
        for index in 0..self.records.len() {
            let r = self.records[index];
            if r.state == RecordState::Acquired && r.owner == owner {
                self.make_available(self.start_offset + index as i64, now_ms);
            }
        }
        self.advance_start();
    }

    /// Locks that expired by `now_ms` end: their records are available
    /// again, or archived at the delivery limit.
    pub fn expire_locks(&mut self, now_ms: u64) {
        while let Some(&Reverse((at, first, last))) = self.locks.peek() {
            if at > now_ms {
                break;
            }
            self.locks.pop();
            for offset in first..=last {
                if self.is_locked_until(offset, at) {
                    self.make_available(offset, now_ms);
                }
            }
        }
        self.advance_start();
    }

    /// The dead letter of `offset` is written: the record is Archived.
    /// False if it was not waiting for one (written before, or gone).
    pub fn dead_letter_written(&mut self, offset: i64) -> bool {
        let Some(index) = self.slot(offset) else {
            return false;
        };
        if self.records[index].state != RecordState::Archiving {
            return false;
        }
        self.records[index].state = RecordState::Archived;
        self.changed.push(offset);
        self.advance_start();
        true
    }

    /// Whether `offset` waits for its dead letter to be written.
    pub fn awaits_dead_letter(&self, offset: i64) -> bool {
        self.slot(offset)
            .is_some_and(|index| self.records[index].state == RecordState::Archiving)
    }

    /// Every record waiting for its dead letter, e.g. after a load: the
    /// dead letters to write (again, unless already written).
    pub fn pending_dead_letters(&self) -> Vec<DeadLetter> {
        (0..self.records.len())
            .filter(|&index| self.records[index].state == RecordState::Archiving)
            .map(|index| {
                let delivery_count = self.records[index].delivery_count;
                DeadLetter {
                    offset: self.start_offset + index as i64,
                    delivery_count,
                    reason: if delivery_count >= self.config.delivery_count_limit {
                        DeadLetterReason::DeliveryLimit
                    } else {
                        DeadLetterReason::Rejected
                    },
                }
            })
            .collect()
    }

    /// The log's start offset moved to `log_start_offset` (retention,
    /// DeleteRecords): records below it are gone, archived.
    pub fn on_log_start(&mut self, log_start_offset: i64) {
        if log_start_offset <= self.start_offset {
            return;
        }
        let end = self.end_offset();
        for offset in self.start_offset..log_start_offset.min(end) {
            // Gone from the log: nothing left to deliver, or to dead-letter.
            let index = self.slot(offset).expect("in flight");
            if !self.records[index].state.is_terminal() {
                self.records[index].state = RecordState::Archived;
                self.records[index].owner = NO_OWNER;
                self.archived += 1;
            }
        }
        if log_start_offset > end {
            self.records.clear();
            self.start_offset = log_start_offset;
            self.start_changed = true;
        }
        self.advance_start();
    }

    /// Moves the start offset to `offset` (AlterShareGroupOffsets, a reset
    /// of an empty group): everything in flight is forgotten.
    pub fn reset(&mut self, offset: i64) {
        self.records.clear();
        self.locks.clear();
        self.changed.clear();
        self.start_offset = offset;
        self.start_changed = true;
    }

    /// The whole state to persist (a ShareSnapshot).
    pub fn snapshot(&self) -> PersistedState {
        PersistedState {
            start_offset: self.start_offset,
            batches: self.batches(self.start_offset..self.end_offset()),
        }
    }

    /// What changed since the last call (a ShareUpdate), `None` if
    /// nothing did; and the records that became dead letters.
    pub fn take_changes(&mut self) -> (Option<PersistedState>, Vec<DeadLetter>) {
        let dead_letters = std::mem::take(&mut self.dead_letters);
        if self.changed.is_empty() && !self.start_changed {
            return (None, dead_letters);
        }
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        let mut batches: Vec<StateBatch> = Vec::new();
        for offset in changed {
            let Some(index) = self.slot(offset) else {
                continue; // below the start now: the start offset says it
            };
            let r = self.records[index];
            let state = match r.state {
                // An acquired record persists as what it would be after a
                // failover: available.
                RecordState::Acquired => RecordState::Available,
                state => state,
            };
            push_batch(&mut batches, offset, state, r.delivery_count);
        }
        self.start_changed = false;
        (
            Some(PersistedState {
                start_offset: self.start_offset,
                batches,
            }),
            dead_letters,
        )
    }

    // ---- internals ----

    fn slot(&self, offset: i64) -> Option<usize> {
        let index = offset.checked_sub(self.start_offset)?;
        (index >= 0 && (index as usize) < self.records.len()).then_some(index as usize)
    }

    fn intern(&mut self, member: &str) -> u32 {
        if let Some(&index) = self.member_index.get(member) {
            return index;
        }
        let index = self.members.len() as u32;
        self.members.push(member.to_owned());
        self.member_index.insert(member.to_owned(), index);
        index
    }

    fn is_locked_until(&self, offset: i64, at: u64) -> bool {
        self.slot(offset).is_some_and(|index| {
            let r = &self.records[index];
            r.state == RecordState::Acquired && r.until_ms == at
        })
    }

    /// An acquired record becomes Available (after its backoff), or
    /// Archived as a dead letter once delivered as often as allowed.
    fn make_available(&mut self, offset: i64, now_ms: u64) {
        let index = self.slot(offset).expect("in flight");
        let count = self.records[index].delivery_count;
        if count >= self.config.delivery_count_limit {
            self.settle(
                offset,
                RecordState::Archived,
                Some(DeadLetterReason::DeliveryLimit),
            );
            return;
        }
        let backoff = self.config.backoff_ms(count);
        let r = &mut self.records[index];
        r.state = RecordState::Available;
        r.owner = NO_OWNER;
        r.until_ms = if backoff == 0 { 0 } else { now_ms + backoff };
        self.changed.push(offset);
    }

    /// A record reaches `state`. An undeliverable one (`dead`) of a group
    /// with a dead-letter topic is Archiving instead, until its dead letter
    /// is written ([`dead_letter_written`](Self::dead_letter_written)).
    fn settle(&mut self, offset: i64, state: RecordState, dead: Option<DeadLetterReason>) {
        let index = self.slot(offset).expect("in flight");
        let dead_letter_topic = self.config.dead_letter_topic;
        let r = &mut self.records[index];
        r.owner = NO_OWNER;
        r.until_ms = 0;
        r.state = state;
        if state == RecordState::Archived {
            self.archived += 1;
        }
        if let Some(reason) = dead.filter(|_| dead_letter_topic) {
            r.state = RecordState::Archiving;
            self.dead_letters.push(DeadLetter {
                offset,
                delivery_count: r.delivery_count,
                reason,
            });
        }
        self.changed.push(offset);
    }

    /// Drops the acknowledged and archived records at the head.
    fn advance_start(&mut self) {
        while self.records.front().is_some_and(|r| r.state.is_terminal()) {
            self.records.pop_front();
            self.start_offset += 1;
            self.start_changed = true;
        }
    }

    fn batches(&self, offsets: std::ops::Range<i64>) -> Vec<StateBatch> {
        let mut batches = Vec::new();
        for offset in offsets {
            let r = self.records[self.slot(offset).expect("in flight")];
            let state = match r.state {
                RecordState::Acquired => RecordState::Available,
                state => state,
            };
            push_batch(&mut batches, offset, state, r.delivery_count);
        }
        batches
    }
}

/// Adds one offset to `batches`, extending the last batch when it is the
/// next offset in the same state and delivery count.
fn push_batch(batches: &mut Vec<StateBatch>, offset: i64, state: RecordState, delivery_count: u16) {
    match batches.last_mut() {
        Some(last)
            if last.last_offset + 1 == offset
                && last.state == state
                && last.delivery_count == delivery_count =>
        {
            last.last_offset = offset;
        }
        _ => batches.push(StateBatch {
            first_offset: offset,
            last_offset: offset,
            state,
            delivery_count,
        }),
    }
}

/// The header with which a record of a share group asks to be delivered no
/// earlier than a time (epoch milliseconds, in decimal).
pub const DELIVER_AT_HEADER: &str = "weir-deliver-at";

/// Whether `header`'s batch belongs to one of the `aborted` transactions:
/// a transactional batch of its producer between its first batch and its
/// abort marker.
fn is_aborted(header: &weir_log::batch::BatchHeader, aborted: &[weir_log::AbortedTxn]) -> bool {
    header.is_transactional()
        && aborted.iter().any(|txn| {
            let at = header.base_offset() as u64;
            txn.producer_id == header.producer_id()
                && txn.first_offset <= at
                && at < txn.last_offset
        })
}

/// The records of `log` (whole batches as the log holds them, read from a
/// share-partition's fetch offset) as acquisition sees them: each data
/// record's offset and its `weir-deliver-at` time. Control batches hold
/// nothing to deliver and are left out (acquisition archives their
/// offsets), and so are the batches of the `aborted` transactions (for
/// `share.isolation.level=read_committed`); a header that is not a decimal
/// time is ignored.
pub fn log_records(
    log: &[u8],
    aborted: &[weir_log::AbortedTxn],
) -> Result<Vec<LogRecord>, weir_log::records::RecordsError> {
    use weir_log::batch::{Batch, BatchHeader};
    let mut records = Vec::new();
    let mut position = 0;
    while position < log.len() {
        // Batches as the log holds them, checked when appended: their CRC
        // is not computed again (a fetch does not either).
        let rest = &log[position..];
        let Ok(header) = BatchHeader::parse(rest, position) else {
            break;
        };
        let size = header.total_size();
        if size > rest.len() {
            break; // a partial batch at the end of a read
        }
        let batch = Batch {
            header,
            bytes: &rest[..size],
        };
        position += size;
        if batch.header.is_control() || is_aborted(&batch.header, aborted) {
            continue;
        }
        for (offset, deliver_at) in
            weir_log::records::offsets_with_header(batch, DELIVER_AT_HEADER)?
        {
            let deliver_at_ms = deliver_at
                .as_deref()
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            records.push(LogRecord {
                offset,
                batch_last_offset: batch.header.last_offset(),
                deliver_at_ms,
            });
        }
    }
    Ok(records)
}
