//! Controller RPC, the server side: accepts connections on the controller
//! listener and hands each request to Raft, answering in order.
//!
//! The accept task owns every connection task: aborting it (on shutdown)
//! closes them all.

use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, warn};

use super::network::{read_frame, write_frame, RpcRequest, RpcResponse};
use super::types::Raft;

/// Starts serving controller RPC on `listener`.
pub(crate) fn spawn(listener: TcpListener, raft: Raft, body_timeout: Duration) -> JoinHandle<()> {
    tokio::spawn(accept_loop(listener, raft, body_timeout))
}

async fn accept_loop(listener: TcpListener, raft: Raft, body_timeout: Duration) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    debug!(%peer, "controller connection accepted");
                    let raft = raft.clone();
                    connections.spawn(async move {
                        if let Err(e) = serve(stream, raft, body_timeout).await {
                            debug!(%peer, error = %e, "controller connection closed");
                        }
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: wait, then go on.
                    warn!(error = %e, "accepting a controller connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next() => {}
        }
    }
}

async fn serve(mut stream: TcpStream, raft: Raft, body_timeout: Duration) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    while let Some(request) = read_frame::<RpcRequest>(&mut stream, body_timeout).await? {
        let response = match request {
            RpcRequest::Vote(rpc) => RpcResponse::Vote(raft.vote(rpc).await),
            RpcRequest::AppendEntries(rpc) => {
                RpcResponse::AppendEntries(raft.append_entries(rpc).await)
            }
            RpcRequest::InstallSnapshot(rpc) => {
                RpcResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
        };
        write_frame(&mut stream, &response).await?;
    }
    Ok(())
}
