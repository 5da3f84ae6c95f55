//! The Kafka listener: accept loop and connections.

mod channel;
mod connection;
mod frame;
mod outgoing;

pub(crate) use channel::Channel;
pub(crate) use outgoing::{Chunk, Outgoing};

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::broker::Broker;

/// Accepts connections until `shutdown` turns true, then waits for the
/// connections to answer what they already read.
pub async fn run_listener(
    broker: Arc<Broker>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let global_budget = Arc::new(Semaphore::new(broker.config().queued_max_request_bytes));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection::serve(broker.clone(), stream, global_budget.clone(), shutdown.clone()));
                }
                Err(error) => {
                    // Out of descriptors: the listener stays, and takes
                    // connections again once some are closed.
                    // ENFILE and EMFILE on Linux.
                    if matches!(error.raw_os_error(), Some(23 | 24)) {
                        tracing::error!(%error, "cannot accept a connection: out of file descriptors; raise the open-file limit (ulimit -n)");
                    } else {
                        tracing::warn!(%error, "accept failed");
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}
