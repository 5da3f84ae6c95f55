//! Transactions: the coordinator of transactional producers. Its state
//! machine is `weir_coord::txn`, its records in `__transaction_state`
//! `weir_coord::records::txn`.

pub mod add_from_leader;
pub mod coordinator;
pub mod hanging;

pub use coordinator::{TxnCoordinator, TxnRequestError, TxnView, TRANSACTION_STATE_TOPIC};
pub use weir_coord::txn::{TxnError, TxnMetadata, TxnStatus};

/// The broker settings of transactions, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSettings {
    /// `transaction.state.log.num.partitions`
    pub num_partitions: i32,
    /// `transaction.state.log.replication.factor`
    pub replication_factor: i32,
    /// `transaction.state.log.min.isr`
    pub min_isr: i32,
    /// `transaction.max.timeout.ms`: longer transaction timeouts are refused.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub abort_check_interval_ms: u64,
}

impl Default for TxnSettings {
    fn default() -> Self {
        Self {
            num_partitions: 50,
            replication_factor: 3,
            min_isr: 2,
            max_timeout_ms: 900_000,
            id_expiration_ms: 7 * 24 * 3600 * 1000,
            abort_check_interval_ms: 10_000,
        }
    }
}
