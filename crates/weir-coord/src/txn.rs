//! The transaction state machine of one transactional id, free of I/O: each
//! request either is refused with a Kafka error, needs nothing written, or
//! names the state to write to `__transaction_state` before answering.
//!
//! ```text
//! Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing
//! Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
//! Ongoing --EndTxn(abort) / timeout / fenced--> PrepareAbort --markers--> CompleteAbort
//! any state but Prepare* --InitProducerId--> Empty, with the epoch bumped
//! ```
//!
//! A producer is identified by its producer id and epoch; every request
//! of an older epoch is fenced. A transaction that times out, or whose
//! transactional id is initialised again while it runs, is aborted under a
//! bumped epoch, so that the old producer can neither add to it nor end it.
//!
//! Producers on transactions v2 (KIP-890: EndTxn v5, partitions added by
//! their leaders) get a bumped epoch at every end: the markers carry it, so
//! a write of the ended transaction that arrives late is fenced by the
//! partition, and the EndTxn answer hands the new epoch to the producer.
//! A retried EndTxn is told apart from the next transaction's by its epoch
//! being one behind.

use std::collections::BTreeSet;

/// Kafka's `TransactionState` codes, as written in `__transaction_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum TxnStatus {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    Dead = 6,
    PrepareEpochFence = 7,
}

impl TxnStatus {
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            0 => Self::Empty,
            1 => Self::Ongoing,
            2 => Self::PrepareCommit,
            3 => Self::PrepareAbort,
            4 => Self::CompleteCommit,
            5 => Self::CompleteAbort,
            6 => Self::Dead,
            7 => Self::PrepareEpochFence,
            _ => return None,
        })
    }

    /// Kafka's name, as DescribeTransactions and ListTransactions show it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
            Self::Dead => "Dead",
            Self::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Markers are still to be written for the transaction.
    pub fn is_preparing(self) -> bool {
        matches!(
            self,
            Self::PrepareCommit | Self::PrepareAbort | Self::PrepareEpochFence
        )
    }

    /// No transaction is open: a new one may start.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            Self::Empty | Self::CompleteCommit | Self::CompleteAbort
        )
    }
}

/// What `__transaction_state` records for a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub status: TxnStatus,
    /// The partitions of the open (or ending) transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction started (-1: none open).
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The producer id before the last change (Kafka's PreviousProducerId):
    /// a retried EndTxn whose epoch bump moved to a new id carries it.
    pub previous_producer_id: i64,
    /// The producer id an ending transaction hands over to when its
    /// bumped epoch is the last (-1: none).
    pub next_producer_id: i64,
    /// The transaction protocol of the producer: 2 (KIP-890) bumps the
    /// epoch at every end, 0 does not.
    pub client_transaction_version: i16,
}

impl TxnMetadata {
    /// A transactional id never seen, at its first producer id.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id,
            producer_epoch: 0,
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
        }
    }

    /// The producer id and epoch the producer goes on with once this
    /// (Prepare) state's transaction ends.
    pub fn producer_after_end(&self) -> (i64, i16) {
        if self.next_producer_id >= 0 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }

    fn bumps_epoch_at_end(&self) -> bool {
        self.client_transaction_version >= TRANSACTIONS_V2
    }
}

/// The `transaction.version` of KIP-890's epoch bump at every end.
pub const TRANSACTIONS_V2: i16 = 2;

/// Why a request is refused; the API layer maps these to Kafka's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("the transaction is completing or another request for it is in progress; retry")]
    ConcurrentTransactions,
    #[error("the producer id does not match the transactional id's")]
    InvalidProducerIdMapping,
    #[error("a newer producer with the same transactional id has fenced this one")]
    ProducerFenced,
    #[error("the request does not fit the transaction's state")]
    InvalidTxnState,
    #[error("the transaction timeout is above transaction.max.timeout.ms or not positive")]
    InvalidTransactionTimeout,
}

/// A producer epoch past this starts over with a new producer id, as in
/// Kafka (the epoch is an i16 and -1 means none).
const MAX_EPOCH: i16 = i16::MAX - 1;

/// What an InitProducerId does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Write this state, then answer with its producer id and epoch.
    Ready(TxnMetadata),
    /// The open transaction is aborted under a bumped epoch first (write
    /// this state, then the markers); the producer is told to retry.
    AbortFirst(TxnMetadata),
}

/// InitProducerId for a transactional id: `current` is its state (None:
/// never seen), `expected` the producer id and epoch the client already
/// has (KIP-360), `new_producer_id` hands out a fresh id when needed.
pub fn init_producer_id(
    current: Option<&TxnMetadata>,
    transactional_id: &str,
    timeout_ms: i32,
    max_timeout_ms: i32,
    expected: Option<(i64, i16)>,
    new_producer_id: impl FnOnce() -> i64,
    now_ms: i64,
) -> Result<InitOutcome, TxnError> {
    if timeout_ms <= 0 || timeout_ms > max_timeout_ms {
        return Err(TxnError::InvalidTransactionTimeout);
    }
    let Some(current) = current else {
        if expected.is_some_and(|(id, _)| id >= 0) {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        return Ok(InitOutcome::Ready(TxnMetadata::new(
            transactional_id,
            new_producer_id(),
            timeout_ms,
            now_ms,
        )));
    };
    if let Some((id, epoch)) = expected.filter(|(id, _)| *id >= 0) {
        // A producer that never heard of the id its last end moved to
        // (its epoch was the last) may still take it up.
        let moved_on = id == current.previous_producer_id
            && epoch >= MAX_EPOCH
            && current.producer_epoch == 0
            && current.status.is_idle();
        if !moved_on && (id != current.producer_id || epoch != current.producer_epoch) {
            return Err(TxnError::ProducerFenced);
        }
    }
    match current.status {
        status if status.is_preparing() => Err(TxnError::ConcurrentTransactions),
        TxnStatus::Ongoing => Ok(InitOutcome::AbortFirst(fenced_abort(current, now_ms))),
        _ => {
            let mut next = current.clone();
            next.previous_producer_id = current.producer_id;
            if current.producer_epoch >= MAX_EPOCH {
                next.producer_id = new_producer_id();
                next.producer_epoch = 0;
            } else {
                next.producer_epoch += 1;
            }
            next.next_producer_id = -1;
            next.client_transaction_version = 0;
            next.timeout_ms = timeout_ms;
            next.status = TxnStatus::Empty;
            next.partitions.clear();
            next.start_ms = -1;
            next.last_update_ms = now_ms;
            Ok(InitOutcome::Ready(next))
        }
    }
}

/// The open transaction aborted under a bumped epoch, so that its producer
/// can no longer add to it, end it, or write to its partitions.
fn fenced_abort(current: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut next = current.clone();
    next.previous_producer_id = current.producer_id;
    next.next_producer_id = -1;
    next.producer_epoch = current.producer_epoch.saturating_add(1);
    next.status = TxnStatus::PrepareAbort;
    next.last_update_ms = now_ms;
    next
}

/// Checks that a request comes from the transactional id's producer.
fn check_producer(current: &TxnMetadata, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
    if producer_id != current.producer_id {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    if epoch != current.producer_epoch {
        return Err(TxnError::ProducerFenced);
    }
    Ok(())
}

/// AddPartitionsToTxn (and AddOffsetsToTxn): the state to write, or None
/// when the transaction already holds every partition. A transaction
/// opened by a partition's leader on behalf of its producer (Produce v12,
/// TxnOffsetCommit v5) is on `transaction_version` 2.
pub fn add_partitions(
    current: &TxnMetadata,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, i32)],
    transaction_version: i16,
    now_ms: i64,
) -> Result<Option<TxnMetadata>, TxnError> {
    check_producer(current, producer_id, epoch)?;
    if current.status.is_preparing() {
        return Err(TxnError::ConcurrentTransactions);
    }
    if current.status == TxnStatus::Ongoing
        && partitions.iter().all(|p| current.partitions.contains(p))
    {
        return Ok(None);
    }
    let mut next = current.clone();
    if !current.status.is_idle() && current.status != TxnStatus::Ongoing {
        return Err(TxnError::InvalidTxnState);
    }
    if current.status != TxnStatus::Ongoing {
        next.partitions.clear();
        next.start_ms = now_ms;
    }
    next.previous_producer_id = current.producer_id;
    next.client_transaction_version = transaction_version;
    next.status = TxnStatus::Ongoing;
    next.partitions.extend(partitions.iter().cloned());
    next.last_update_ms = now_ms;
    Ok(Some(next))
}

/// AddPartitionsToTxn with `verify_only` (KIP-890 part 1): the producer's
/// open transaction holds every one of `partitions`.
pub fn verify_partitions(
    current: &TxnMetadata,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, i32)],
) -> Result<(), TxnError> {
    check_producer(current, producer_id, epoch)?;
    if current.status.is_preparing() {
        return Err(TxnError::ConcurrentTransactions);
    }
    let held = current.status == TxnStatus::Ongoing
        && partitions.iter().all(|p| current.partitions.contains(p));
    if held {
        Ok(())
    } else {
        Err(TxnError::InvalidTxnState)
    }
}

/// What an EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// A retry of an end that already completed: answer success, with the
    /// producer id and epoch the producer goes on with.
    AlreadyDone { producer_id: i64, epoch: i16 },
    /// Write this Prepare state, answer, then write the markers.
    Prepare(TxnMetadata),
}

/// EndTxn from a producer on `transaction_version` (2 from EndTxn v5 on:
/// the epoch is bumped; `new_producer_id` is called when the bumped epoch
/// would be the last of the producer id).
pub fn end_txn(
    current: &TxnMetadata,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    transaction_version: i16,
    new_producer_id: impl FnOnce() -> i64,
    now_ms: i64,
) -> Result<EndOutcome, TxnError> {
    use TxnStatus::*;
    let (prepare, complete) = if commit {
        (PrepareCommit, CompleteCommit)
    } else {
        (PrepareAbort, CompleteAbort)
    };
    let bumped = current.bumps_epoch_at_end();
    // A retry of an end that bumped the epoch comes with the epoch before.
    let retry_after_bump = bumped && i32::from(current.producer_epoch) == i32::from(epoch) + 1;
    let retry_after_new_id = bumped
        && current.previous_producer_id == producer_id
        && epoch >= MAX_EPOCH
        && current.producer_epoch == 0;
    if producer_id != current.producer_id && !retry_after_new_id {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    // The next transaction's end, while this one's markers are written.
    if bumped && current.status.is_preparing() && epoch == current.producer_epoch {
        return Err(TxnError::ConcurrentTransactions);
    }
    let valid_epoch = match current.status {
        PrepareCommit | PrepareAbort if bumped => retry_after_bump,
        CompleteCommit | CompleteAbort if bumped => {
            retry_after_bump || retry_after_new_id || epoch == current.producer_epoch
        }
        _ => epoch == current.producer_epoch,
    };
    if !valid_epoch {
        return Err(TxnError::ProducerFenced);
    }
    let retry = retry_after_bump || retry_after_new_id;
    let prepared = |mut next: TxnMetadata| {
        next.previous_producer_id = current.producer_id;
        next.next_producer_id = -1;
        next.status = prepare;
        next.last_update_ms = now_ms;
        next.client_transaction_version = transaction_version;
        if transaction_version >= TRANSACTIONS_V2 {
            // The markers carry the bumped epoch; when it is the last of the
            // producer id, the producer goes on with a new id.
            if current.producer_epoch >= MAX_EPOCH {
                next.next_producer_id = new_producer_id();
            }
            next.producer_epoch = current.producer_epoch + 1;
        }
        EndOutcome::Prepare(next)
    };
    match current.status {
        Ongoing => Ok(prepared(current.clone())),
        status if status == complete && (retry || !bumped) => Ok(EndOutcome::AlreadyDone {
            producer_id: current.producer_id,
            epoch: current.producer_epoch,
        }),
        // Transactions v2 may abort a transaction nothing was added to yet
        // (a write of it may still be on its way to a leader).
        Empty | CompleteCommit | CompleteAbort
            if !commit && !retry && transaction_version >= TRANSACTIONS_V2 =>
        {
            let mut next = current.clone();
            next.partitions.clear();
            next.start_ms = now_ms;
            Ok(prepared(next))
        }
        // The same end asked again while its markers are written.
        status if status == prepare => Err(TxnError::ConcurrentTransactions),
        PrepareEpochFence => Err(TxnError::ConcurrentTransactions),
        _ => Err(TxnError::InvalidTxnState),
    }
}

/// The state once every marker of a Prepare state is written.
pub fn complete(current: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut next = current.clone();
    (next.producer_id, next.producer_epoch) = current.producer_after_end();
    next.previous_producer_id = current.producer_id;
    next.next_producer_id = -1;
    next.status = match current.status {
        TxnStatus::PrepareCommit => TxnStatus::CompleteCommit,
        _ => TxnStatus::CompleteAbort,
    };
    next.partitions.clear();
    next.start_ms = -1;
    next.last_update_ms = now_ms;
    next
}

/// An open transaction past its timeout is aborted under a bumped epoch.
pub fn timed_out(current: &TxnMetadata, now_ms: i64) -> Option<TxnMetadata> {
    let expired = current.status == TxnStatus::Ongoing
        && now_ms.saturating_sub(current.start_ms) > i64::from(current.timeout_ms);
    expired.then(|| fenced_abort(current, now_ms))
}

/// A transactional id unused for `expiration_ms` with no open transaction
/// is forgotten (a tombstone in `__transaction_state`).
pub fn expired(current: &TxnMetadata, now_ms: i64, expiration_ms: i64) -> bool {
    current.status.is_idle() && now_ms.saturating_sub(current.last_update_ms) > expiration_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_TIMEOUT: i32 = 900_000;

    fn txn(status: TxnStatus, epoch: i16, partitions: &[(&str, i32)]) -> TxnMetadata {
        TxnMetadata {
            transactional_id: "t".into(),
            producer_id: 10,
            producer_epoch: epoch,
            timeout_ms: 60_000,
            status,
            partitions: partitions
                .iter()
                .map(|(t, p)| (t.to_string(), *p))
                .collect(),
            start_ms: if status == TxnStatus::Ongoing {
                100
            } else {
                -1
            },
            last_update_ms: 100,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
        }
    }

    fn init(current: Option<&TxnMetadata>) -> Result<InitOutcome, TxnError> {
        init_producer_id(current, "t", 60_000, MAX_TIMEOUT, None, || 77, 1_000)
    }

    #[test]
    fn init_starts_at_epoch_zero_then_bumps() {
        let InitOutcome::Ready(first) = init(None).unwrap() else {
            panic!("a new id is ready at once")
        };
        assert_eq!((first.producer_id, first.producer_epoch), (77, 0));
        assert_eq!(first.status, TxnStatus::Empty);
        for status in [
            TxnStatus::Empty,
            TxnStatus::CompleteCommit,
            TxnStatus::CompleteAbort,
        ] {
            let InitOutcome::Ready(next) = init(Some(&txn(status, 4, &[]))).unwrap() else {
                panic!("{status:?}")
            };
            assert_eq!(
                (next.producer_id, next.producer_epoch),
                (10, 5),
                "{status:?}"
            );
            assert_eq!(next.status, TxnStatus::Empty);
        }
        // An exhausted epoch starts over with a new producer id.
        let InitOutcome::Ready(next) = init(Some(&txn(TxnStatus::Empty, MAX_EPOCH, &[]))).unwrap()
        else {
            panic!()
        };
        assert_eq!((next.producer_id, next.producer_epoch), (77, 0));
    }

    #[test]
    fn init_aborts_an_open_transaction_under_a_bumped_epoch() {
        let open = txn(TxnStatus::Ongoing, 4, &[("a", 0)]);
        let InitOutcome::AbortFirst(next) = init(Some(&open)).unwrap() else {
            panic!("an open transaction is aborted first")
        };
        assert_eq!(next.status, TxnStatus::PrepareAbort);
        assert_eq!(next.producer_epoch, 5);
        assert_eq!(next.partitions, open.partitions);
        for status in [TxnStatus::PrepareCommit, TxnStatus::PrepareAbort] {
            assert_eq!(
                init(Some(&txn(status, 4, &[("a", 0)]))),
                Err(TxnError::ConcurrentTransactions)
            );
        }
    }

    #[test]
    fn init_checks_the_timeout_and_the_expected_producer() {
        assert_eq!(
            init_producer_id(None, "t", MAX_TIMEOUT + 1, MAX_TIMEOUT, None, || 1, 0),
            Err(TxnError::InvalidTransactionTimeout)
        );
        assert_eq!(
            init_producer_id(None, "t", 0, MAX_TIMEOUT, None, || 1, 0),
            Err(TxnError::InvalidTransactionTimeout)
        );
        let current = txn(TxnStatus::Empty, 4, &[]);
        let with =
            |expected| init_producer_id(Some(&current), "t", 1_000, MAX_TIMEOUT, expected, || 1, 0);
        assert!(matches!(with(Some((10, 4))), Ok(InitOutcome::Ready(_))));
        assert_eq!(with(Some((10, 3))), Err(TxnError::ProducerFenced));
        assert_eq!(with(Some((11, 4))), Err(TxnError::ProducerFenced));
    }

    #[test]
    fn add_partitions_opens_and_grows_a_transaction() {
        let a0 = [("a".to_owned(), 0)];
        let next = add_partitions(&txn(TxnStatus::CompleteCommit, 2, &[]), 10, 2, &a0, 0, 500)
            .unwrap()
            .unwrap();
        assert_eq!(next.status, TxnStatus::Ongoing);
        assert_eq!(next.start_ms, 500);
        // Already there: nothing to write.
        assert_eq!(add_partitions(&next, 10, 2, &a0, 0, 600), Ok(None));
        let grown = add_partitions(&next, 10, 2, &[("b".to_owned(), 1)], 0, 600)
            .unwrap()
            .unwrap();
        assert_eq!(grown.partitions.len(), 2);
        assert_eq!(
            grown.start_ms, 500,
            "the transaction started with its first partition"
        );
    }

    #[test]
    fn add_partitions_refuses_strangers_fenced_producers_and_ending_transactions() {
        let a0 = [("a".to_owned(), 0)];
        let open = txn(TxnStatus::Ongoing, 2, &[]);
        let table = [
            (open.clone(), 11, 2, Err(TxnError::InvalidProducerIdMapping)),
            (open.clone(), 10, 1, Err(TxnError::ProducerFenced)),
            (open.clone(), 10, 3, Err(TxnError::ProducerFenced)),
            (
                txn(TxnStatus::PrepareCommit, 2, &[("a", 0)]),
                10,
                2,
                Err(TxnError::ConcurrentTransactions),
            ),
            (
                txn(TxnStatus::PrepareAbort, 2, &[("a", 0)]),
                10,
                2,
                Err(TxnError::ConcurrentTransactions),
            ),
        ];
        for (current, producer_id, epoch, expected) in table {
            assert_eq!(
                add_partitions(&current, producer_id, epoch, &a0, 0, 1).map(|_| ()),
                expected,
                "{current:?} {producer_id} {epoch}"
            );
        }
    }

    #[test]
    fn end_txn_follows_kafkas_table() {
        use EndOutcome::*;
        use TxnStatus::*;
        let table: [(TxnStatus, bool, Result<Option<TxnStatus>, TxnError>); 12] = [
            (Ongoing, true, Ok(Some(PrepareCommit))),
            (Ongoing, false, Ok(Some(PrepareAbort))),
            (PrepareCommit, true, Err(TxnError::ConcurrentTransactions)),
            (PrepareCommit, false, Err(TxnError::InvalidTxnState)),
            (PrepareAbort, false, Err(TxnError::ConcurrentTransactions)),
            (PrepareAbort, true, Err(TxnError::InvalidTxnState)),
            (CompleteCommit, true, Ok(None)),
            (CompleteCommit, false, Err(TxnError::InvalidTxnState)),
            (CompleteAbort, false, Ok(None)),
            (CompleteAbort, true, Err(TxnError::InvalidTxnState)),
            (Empty, true, Err(TxnError::InvalidTxnState)),
            (Empty, false, Err(TxnError::InvalidTxnState)),
        ];
        for (status, commit, expected) in table {
            let outcome = end_txn(&txn(status, 1, &[("a", 0)]), 10, 1, commit, 0, || 99, 5).map(
                |o| match o {
                    AlreadyDone { .. } => None,
                    Prepare(next) => Some(next.status),
                },
            );
            assert_eq!(outcome, expected, "{status:?} commit={commit}");
        }
        assert_eq!(
            end_txn(&txn(Ongoing, 1, &[]), 10, 0, true, 0, || 99, 5),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn completion_clears_the_transaction() {
        let done = complete(&txn(TxnStatus::PrepareCommit, 1, &[("a", 0)]), 9);
        assert_eq!(done.status, TxnStatus::CompleteCommit);
        assert!(done.partitions.is_empty());
        let done = complete(&txn(TxnStatus::PrepareAbort, 1, &[("a", 0)]), 9);
        assert_eq!(done.status, TxnStatus::CompleteAbort);
    }

    #[test]
    fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
        let open = txn(TxnStatus::Ongoing, 3, &[("a", 0)]);
        assert_eq!(timed_out(&open, 100 + 60_000), None);
        let aborted = timed_out(&open, 100 + 60_001).unwrap();
        assert_eq!(aborted.status, TxnStatus::PrepareAbort);
        assert_eq!(aborted.producer_epoch, 4);
        assert_eq!(
            end_txn(&aborted, 10, 3, true, 0, || 99, 0),
            Err(TxnError::ProducerFenced),
            "the old producer cannot commit what was aborted"
        );
        assert_eq!(timed_out(&txn(TxnStatus::Empty, 3, &[]), i64::MAX), None);
    }

    #[test]
    fn only_idle_ids_expire() {
        assert!(expired(&txn(TxnStatus::CompleteCommit, 1, &[]), 200, 99));
        assert!(!expired(&txn(TxnStatus::CompleteCommit, 1, &[]), 199, 99));
        assert!(!expired(&txn(TxnStatus::Ongoing, 1, &[]), i64::MAX, 99));
    }

    fn v2(status: TxnStatus, epoch: i16) -> TxnMetadata {
        let mut txn = txn(status, epoch, &[("a", 0)]);
        txn.client_transaction_version = TRANSACTIONS_V2;
        txn
    }

    #[test]
    fn transactions_v2_bump_the_epoch_at_every_end() {
        let open = v2(TxnStatus::Ongoing, 4);
        let Ok(EndOutcome::Prepare(prepared)) = end_txn(&open, 10, 4, true, 2, || 99, 7) else {
            panic!("an open transaction ends")
        };
        assert_eq!(prepared.status, TxnStatus::PrepareCommit);
        assert_eq!(
            prepared.producer_epoch, 5,
            "the markers carry the bumped epoch"
        );
        assert_eq!(prepared.producer_after_end(), (10, 5));
        let done = complete(&prepared, 8);
        assert_eq!((done.producer_id, done.producer_epoch), (10, 5));
        // The EndTxn retried: its epoch is one behind; it succeeds with the
        // new epoch, while the markers are written and after.
        assert_eq!(
            end_txn(&prepared, 10, 4, true, 2, || 99, 9),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            end_txn(&done, 10, 4, true, 2, || 99, 9),
            Ok(EndOutcome::AlreadyDone {
                producer_id: 10,
                epoch: 5
            })
        );
        // Older epochs are fenced, and the old epoch cannot add again.
        assert_eq!(
            end_txn(&done, 10, 3, true, 2, || 99, 9),
            Err(TxnError::ProducerFenced)
        );
        let a0 = [("a".to_owned(), 0)];
        assert_eq!(
            add_partitions(&done, 10, 4, &a0, 2, 9),
            Err(TxnError::ProducerFenced)
        );
        // The next transaction runs at the new epoch.
        let next = add_partitions(&done, 10, 5, &a0, 2, 10).unwrap().unwrap();
        assert_eq!(next.status, TxnStatus::Ongoing);
    }

    #[test]
    fn transactions_v1_keep_the_epoch() {
        let open = txn(TxnStatus::Ongoing, 4, &[("a", 0)]);
        let Ok(EndOutcome::Prepare(prepared)) = end_txn(&open, 10, 4, false, 0, || 99, 7) else {
            panic!()
        };
        assert_eq!(prepared.producer_epoch, 4);
        assert_eq!(complete(&prepared, 8).producer_epoch, 4);
    }

    #[test]
    fn the_last_epoch_of_a_producer_id_ends_into_a_new_one() {
        let open = v2(TxnStatus::Ongoing, MAX_EPOCH);
        let Ok(EndOutcome::Prepare(prepared)) = end_txn(&open, 10, MAX_EPOCH, true, 2, || 99, 7)
        else {
            panic!()
        };
        assert_eq!(
            (prepared.producer_id, prepared.producer_epoch),
            (10, i16::MAX),
            "the markers are the old producer id's"
        );
        assert_eq!(prepared.producer_after_end(), (99, 0));
        let done = complete(&prepared, 8);
        assert_eq!((done.producer_id, done.producer_epoch), (99, 0));
        assert_eq!(done.previous_producer_id, 10);
        assert_eq!(
            end_txn(&done, 10, MAX_EPOCH, true, 2, || 1, 9),
            Ok(EndOutcome::AlreadyDone {
                producer_id: 99,
                epoch: 0
            }),
            "a retry under the old id is recognised"
        );
    }

    #[test]
    fn transactions_v2_may_abort_an_empty_transaction() {
        let idle = v2(TxnStatus::CompleteCommit, 5);
        let Ok(EndOutcome::Prepare(prepared)) = end_txn(&idle, 10, 5, false, 2, || 99, 7) else {
            panic!("an empty abort under v2")
        };
        assert_eq!(prepared.status, TxnStatus::PrepareAbort);
        assert!(prepared.partitions.is_empty());
        assert_eq!(prepared.producer_epoch, 6);
        assert_eq!(
            end_txn(&idle, 10, 5, true, 2, || 99, 7),
            Err(TxnError::InvalidTxnState)
        );
        // Asked while the last transaction's markers are still written:
        // retried, not fenced.
        let ending = v2(TxnStatus::PrepareCommit, 6);
        assert_eq!(
            end_txn(&ending, 10, 6, false, 2, || 99, 7),
            Err(TxnError::ConcurrentTransactions)
        );
    }
}
