//! Controller RPC, the server side: accepts connections on the controller
//! listener and secures them, checks each request against what its
//! sender may do (`permission.rs`), then hands it to Raft (or, for
//! forwarded commands, heartbeats and learners asking to join, to the
//! leader's side of this node), answering in order.
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
use super::permission;
use super::transport::{ControllerStream, ControllerTransport, PeerAuthorization, ANONYMOUS};
use super::types::WriteOutcome;
use crate::Authorizer;

/// Who gets in, how, and what each peer may ask.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    pub(crate) transport: Arc<dyn ControllerTransport>,
    /// `None`: no authorizer, every request of a peer let in is served.
    pub(crate) authorization: Option<PeerAuthorization>,
    /// Peers that prove no identity are cut off before a frame is read:
    /// the Kafka listeners authenticate their clients, and this listener
    /// must not be the way around that.
    pub(crate) refuse_anonymous: bool,
    pub(crate) handshake_timeout: Duration,
}

/// A peer let in: who it proved to be, and from where.
struct Peer {
    principal: String,
    addr: SocketAddr,
}

impl Admission {
    /// The connection secured, once the peer may use it at all.
    async fn admit(
        &self,
        socket: TcpStream,
        addr: SocketAddr,
    ) -> std::io::Result<(ControllerStream, Peer)> {
        socket.set_nodelay(true)?;
        let handshake = tokio::time::timeout(self.handshake_timeout, self.transport.accept(socket));
        let (stream, principal) = handshake.await.map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "the handshake timed out")
        })??;
        if self.refuse_anonymous && principal == ANONYMOUS {
            warn!(peer = %addr, "refused a controller connection that proved no identity: the Kafka listeners authenticate their clients, so the controller listener needs SASL, or SSL with ssl.client.auth=required");
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "an unauthenticated peer may not use the controller RPC",
            ));
        }
        Ok((stream, Peer { principal, addr }))
    }
}

/// The decisions of one connection, on the ACLs of the image they were
/// made from.
struct Decisions<'a> {
    authorization: Option<&'a PeerAuthorization>,
    /// The authorizer and the applied index of the image it was built
    /// from: rebuilt only when the image moves on.
    authorizer: Option<(u64, Authorizer)>,
}

impl Decisions<'_> {
    /// Whether `peer` may make `request`: `Err` names what it lacks.
    fn permit(&mut self, shared: &Shared, peer: &Peer, request: &RpcRequest) -> Result<(), String> {
        let Some(authorization) = self.authorization else {
            return Ok(());
        };
        let requirements = match request {
            RpcRequest::Submit(command) => permission::requirements(command),
            RpcRequest::Vote(_)
            | RpcRequest::AppendEntries(_)
            | RpcRequest::InstallSnapshot(_)
            | RpcRequest::Heartbeat { .. }
            | RpcRequest::ReadIndex
            | RpcRequest::JoinAsLearner { .. } => vec![vec![permission::CLUSTER_ACTION]],
        };
        let image = shared.image.borrow().clone();
        let index = image.applied_index();
        let authorizer = match &mut self.authorizer {
            Some((built_at, authorizer)) if *built_at == index => authorizer,
            slot => &mut slot.insert((index, authorization.authorizer(&image))).1,
        };
        let host = peer.addr.ip().to_string();
        let refused = requirements.iter().find(|needed| {
            !needed.iter().any(|n| {
                authorizer.authorize(&peer.principal, &host, n.operation, n.resource_type, n.name)
            })
        });
        let Some(needed) = refused else {
            return Ok(());
        };
        Err(match needed.first() {
            Some(first) => format!(
                "{} may not {} the {} {}",
                peer.principal, first.operation, first.resource_type, first.name
            ),
            None => format!("{} may not make this request", peer.principal),
        })
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
                        let served = match admission.admit(socket, peer).await {
                            Ok((stream, who)) => {
                                serve(stream, &who, &shared, &admission, body_timeout).await
                            }
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
    peer: &Peer,
    shared: &Shared,
    admission: &Admission,
    body_timeout: Duration,
) -> std::io::Result<()> {
    let raft = &shared.raft;
    let mut decisions = Decisions {
        authorization: admission.authorization.as_ref(),
        authorizer: None,
    };
    while let Some(request) = read_frame::<RpcRequest>(&mut stream, body_timeout).await? {
        if let Err(denial) = decisions.permit(shared, peer, &request) {
            warn!(peer = %peer.addr, %denial, "refused a controller request");
            if !matches!(request, RpcRequest::Submit(_)) {
                // Raft's traffic has no way to say "denied": the peer
                // sees its connection fail, as an unreachable one.
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    denial,
                ));
            }
            write_frame(
                &mut stream,
                &RpcResponse::Submit(WriteOutcome::Denied(denial)),
            )
            .await?;
            continue;
        }
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
            RpcRequest::ReadIndex => {
                let deadline = tokio::time::Instant::now() + shared.submit_timeout;
                RpcResponse::ReadIndex(shared.read_index(deadline).await)
            }
            RpcRequest::JoinAsLearner { node_id, addr } => {
                let deadline = tokio::time::Instant::now() + shared.submit_timeout;
                RpcResponse::JoinAsLearner(shared.admit_learner(node_id, addr, deadline).await)
            }
        };
        write_frame(&mut stream, &response).await?;
    }
    Ok(())
}
