//! What the coordinators of the internal topics share: the runtime that
//! hosts one shard per partition led here and runs its events off the
//! runtime's workers (`runtime.rs`), the record batches they write and
//! replay (`batches.rs`), the timers of the groups they host
//! (`timers.rs`), and the narrow view of the broker they run in
//! (`environment.rs`).

pub mod batches;
mod environment;
mod runtime;
mod timers;

pub use environment::Environment;
#[cfg(test)]
#[cfg(test)]
pub(crate) use runtime::append;
pub use runtime::{
    Applied, CoordinatorError, CoordinatorRuntime, EventOutcome, Outcome, Shard, ShardContext,
    ShardTurn, COORDINATOR_WRITE_TIMEOUT,
};
pub use timers::Timers;
