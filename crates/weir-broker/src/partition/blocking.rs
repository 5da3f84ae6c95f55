//! Work a request handler must do in place but that may hold its thread a
//! while (an fsync, inflating a large batch).

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `work` where the runtime's other tasks need not wait for it: on a
/// worker of a multi-threaded runtime, the worker hands its tasks to
/// another thread meanwhile. The caller stays where it is, so a
/// connection's requests keep their order. Elsewhere `work` just runs.
pub(crate) fn without_holding_up_the_worker<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
