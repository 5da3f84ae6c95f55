//! Work that may hold its thread a while (file I/O, an fsync, inflating a
//! large batch), kept off the runtime's workers.

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

/// Runs `work`, which reads or changes files, on the blocking pool, and
/// gives what it returned: a request that awaits it holds up no runtime
/// worker. A panic in `work` goes on in the caller, as if it ran there.
pub(crate) async fn on_the_blocking_pool<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}
