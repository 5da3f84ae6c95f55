//! Controller RPC, the server side: accepts connections on the controller
//! listener, secures them and checks the peer may use them, then hands
//! each request to Raft (or, for forwarded commands, heartbeats and
//! learners asking to join, to the leader's side of this node), answering
//! in order.
//!
//! The accept task owns every connection task: aborting it (on shutdown)
//! closes them all.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, warn};

use super::leader::Shared;
use super::network::{read_frame, write_frame, RpcRequest, RpcResponse};
use super::transport::{ControllerStream, ControllerTransport, PeerAuthorization};

/// Who gets in, and how.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    pub(crate) transport: Arc<dyn ControllerTransport>,
    /// `None`: no authorizer, any peer that completes the handshake.
    pub(crate) authorization: Option<PeerAuthorization>,
    pub(crate) handshake_timeout: Duration,
}

impl Admission {
    /// The connection secured, once the peer is known to be allowed in.
    async fn admit(
        &self,
        socket: TcpStream,
        peer: SocketAddr,
        shared: &Shared,
    ) -> std::io::Result<ControllerStream> {
        socket.set_nodelay(true)?;
        let handshake = tokio::time::timeout(self.handshake_timeout, self.transport.accept(socket));
        let (stream, principal) = handshake.await.map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "the handshake timed out")
        })??;
        if let Some(authorization) = &self.authorization {
            let image = shared.image.borrow().clone();
            if !authorization.allows(&image, &principal, &peer.ip().to_string()) {
                warn!(%peer, principal, "refused a controller connection: the principal lacks ClusterAction on the cluster");
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{principal} may not use the controller RPC"),
                ));
            }
        }
        Ok(stream)
    }
}

/// Starts serving controller RPC on `listener`.
pub(crate) fn spawn(
    listener: TcpListener,
    shared: Arc<Shared>,
    admission: Admission,
    body_timeout: Duration,
) -> JoinHandle<()> {
    tokio::spawn(accept_loop(
        listener,
        shared,
        Arc::new(admission),
        body_timeout,
    ))
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    admission: Arc<Admission>,
    body_timeout: Duration,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    debug!(%peer, "controller connection accepted");
                    let shared = shared.clone();
                    let admission = admission.clone();
                    connections.spawn(async move {
                        let served = match admission.admit(socket, peer, &shared).await {
                            Ok(stream) => serve(stream, &shared, body_timeout).await,
                            Err(e) => Err(e),
                        };
                        if let Err(e) = served {
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

async fn serve(
    mut stream: ControllerStream,
    shared: &Shared,
    body_timeout: Duration,
) -> std::io::Result<()> {
    let raft = &shared.raft;
    while let Some(request) = read_frame::<RpcRequest>(&mut stream, body_timeout).await? {
        let response = match request {
            RpcRequest::Vote(rpc) => RpcResponse::Vote(raft.vote(rpc).await),
            RpcRequest::AppendEntries(rpc) => {
                RpcResponse::AppendEntries(raft.append_entries(rpc).await)
            }
            RpcRequest::InstallSnapshot(rpc) => {
                RpcResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
            // Proposed here or refused: a forwarded command is never
            // forwarded again (the sender retries with the leader it
            // learns of), so it cannot bounce between nodes.
            RpcRequest::Submit(cmd) => {
                let deadline = tokio::time::Instant::now() + shared.submit_timeout;
                RpcResponse::Submit(shared.write(cmd, deadline).await)
            }
            RpcRequest::Heartbeat {
                broker_id,
                incarnation,
            } => RpcResponse::Heartbeat(shared.heartbeat(broker_id, incarnation)),
            RpcRequest::JoinAsLearner { node_id, addr } => {
                let deadline = tokio::time::Instant::now() + shared.submit_timeout;
                RpcResponse::JoinAsLearner(shared.admit_learner(node_id, addr, deadline).await)
            }
        };
        write_frame(&mut stream, &response).await?;
    }
    Ok(())
}
