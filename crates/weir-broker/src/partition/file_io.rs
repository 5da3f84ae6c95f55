//! File I/O that is not an append or a fetch's read (lookups by time,
//! record deletion, log-directory work, the share-partition leader's
//! reads), kept off the runtime's workers.

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
