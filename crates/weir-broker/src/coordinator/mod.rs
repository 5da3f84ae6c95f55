//! What the coordinators of the internal topics share: the runtime that
//! hosts one shard per partition led here and runs its events off the
//! runtime's workers (`runtime.rs`), and the record batches they write and
//! replay (`batches.rs`).

pub mod batches;
mod runtime;

pub(crate) use runtime::append;
pub use runtime::{
    Applied, CoordinatorError, CoordinatorRuntime, EventOutcome, Outcome, Shard, ShardContext,
    COORDINATOR_WRITE_TIMEOUT,
};
