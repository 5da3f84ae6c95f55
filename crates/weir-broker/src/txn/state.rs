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
}

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
        return Ok(InitOutcome::Ready(TxnMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id: new_producer_id(),
            producer_epoch: 0,
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
        }));
    };
    if let Some((id, epoch)) = expected.filter(|(id, _)| *id >= 0) {
        if id != current.producer_id || epoch != current.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
    }
    match current.status {
        status if status.is_preparing() => Err(TxnError::ConcurrentTransactions),
        TxnStatus::Ongoing => Ok(InitOutcome::AbortFirst(fenced_abort(current, now_ms))),
        _ => {
            let mut next = current.clone();
            if current.producer_epoch >= MAX_EPOCH {
                next.producer_id = new_producer_id();
                next.producer_epoch = 0;
            } else {
                next.producer_epoch += 1;
            }
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
/// when the transaction already holds every partition.
pub fn add_partitions(
    current: &TxnMetadata,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, i32)],
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
    next.status = TxnStatus::Ongoing;
    next.partitions.extend(partitions.iter().cloned());
    next.last_update_ms = now_ms;
    Ok(Some(next))
}

/// What an EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// A retry of an end that already completed: answer success.
    AlreadyDone,
    /// Write this Prepare state, answer, then write the markers.
    Prepare(TxnMetadata),
}

pub fn end_txn(
    current: &TxnMetadata,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    now_ms: i64,
) -> Result<EndOutcome, TxnError> {
    check_producer(current, producer_id, epoch)?;
    let (prepare, complete) = if commit {
        (TxnStatus::PrepareCommit, TxnStatus::CompleteCommit)
    } else {
        (TxnStatus::PrepareAbort, TxnStatus::CompleteAbort)
    };
    match current.status {
        TxnStatus::Ongoing => {
            let mut next = current.clone();
            next.status = prepare;
            next.last_update_ms = now_ms;
            Ok(EndOutcome::Prepare(next))
        }
        // The same end asked again while its markers are written.
        status if status == prepare => Err(TxnError::ConcurrentTransactions),
        status if status == complete => Ok(EndOutcome::AlreadyDone),
        TxnStatus::PrepareEpochFence => Err(TxnError::ConcurrentTransactions),
        _ => Err(TxnError::InvalidTxnState),
    }
}

/// The state once every marker of a Prepare state is written.
pub fn complete(current: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut next = current.clone();
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
        let next = add_partitions(&txn(TxnStatus::CompleteCommit, 2, &[]), 10, 2, &a0, 500)
            .unwrap()
            .unwrap();
        assert_eq!(next.status, TxnStatus::Ongoing);
        assert_eq!(next.start_ms, 500);
        // Already there: nothing to write.
        assert_eq!(add_partitions(&next, 10, 2, &a0, 600), Ok(None));
        let grown = add_partitions(&next, 10, 2, &[("b".to_owned(), 1)], 600)
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
                add_partitions(&current, producer_id, epoch, &a0, 1).map(|_| ()),
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
            let outcome =
                end_txn(&txn(status, 1, &[("a", 0)]), 10, 1, commit, 5).map(|o| match o {
                    AlreadyDone => None,
                    Prepare(next) => Some(next.status),
                });
            assert_eq!(outcome, expected, "{status:?} commit={commit}");
        }
        assert_eq!(
            end_txn(&txn(Ongoing, 1, &[]), 10, 0, true, 5),
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
            end_txn(&aborted, 10, 3, true, 0),
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
}
