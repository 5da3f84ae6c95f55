//! Transactions: the coordinator of transactional producers. Its state
//! machine is `weir_coord::txn`, its records in `__transaction_state`
//! `weir_coord::records::txn`.

pub mod add_from_leader;
pub mod coordinator;
pub mod hanging;

pub use coordinator::{TxnCoordinator, TxnRequestError, TxnView, TRANSACTION_STATE_TOPIC};
pub use weir_coord::txn::{TxnError, TxnMetadata, TxnStatus};
