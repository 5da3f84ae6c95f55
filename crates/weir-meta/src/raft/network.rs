//! Controller RPC, the client side of Raft's own traffic: one TCP
//! connection per peer, opened on first use and again after any failure.
//! (Commands and heartbeats forwarded to the leader go through
//! `forward.rs`, on connections of their own.)
//!
//! A frame is a big-endian `u32` length and that many bytes of JSON: an
//! [`RpcRequest`] from the caller, an [`RpcResponse`] back. One request is
//! in flight per connection at a time. Any failure or timeout drops the
//! connection (a late response must never be read as the answer to the
//! next request).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::debug;

use crate::command::Command;

use super::peer_health::PeerHealth;
use super::transport::{ControllerStream, ControllerTransport};
use super::types::{ControllerNode, JoinOutcome, NodeId, TypeConfig, WriteOutcome};
use super::HeartbeatReply;

/// The largest frame either side accepts.
pub(crate) const MAX_FRAME_LEN: usize = 64 << 20;

/// A request from one controller to another.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) enum RpcRequest {
    Vote(VoteRequest<NodeId>),
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A command for the leader to propose (never forwarded further).
    Submit(Command),
    /// A broker heartbeat for the leader to record.
    Heartbeat {
        broker_id: i32,
        incarnation: uuid::Uuid,
    },
    /// What the leader has committed (Raft's ReadIndex): a node about to
    /// check a change against its image first applies up to it.
    ReadIndex,
    /// A node that is not a voter asks the leader to make it a learner
    /// reachable at `addr` (`host:port`), or to update its address.
    JoinAsLearner {
        node_id: NodeId,
        addr: String,
    },
}

/// The answer to an [`RpcRequest`] of the same name.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) enum RpcResponse {
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Submit(WriteOutcome),
    /// `None`: the node is not the leader.
    Heartbeat(Option<HeartbeatReply>),
    JoinAsLearner(JoinOutcome),
    /// `None`: the node is not the leader, or could not confirm it.
    ReadIndex(Option<u64>),
}

/// Writes one frame.
pub(crate) async fn write_frame<T: Serialize>(
    stream: &mut (impl AsyncWrite + Unpin + ?Sized),
    message: &T,
) -> io::Result<()> {
    let body = serde_json::to_vec(message).map_err(io::Error::other)?;
    if body.len() > MAX_FRAME_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a {}-byte controller frame exceeds the {MAX_FRAME_LEN}-byte limit",
                body.len()
            ),
        ));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await?;
    stream.flush().await
}

/// Reads one frame; `None` when the peer closed the connection between
/// frames. Once a frame has started, the rest of it must arrive within
/// `body_timeout`.
pub(crate) async fn read_frame<T: DeserializeOwned>(
    stream: &mut (impl AsyncRead + Unpin + ?Sized),
    body_timeout: Duration,
) -> io::Result<Option<T>> {
    read_frame_within(stream, body_timeout, MAX_FRAME_LEN).await
}

/// [`read_frame`], refusing a frame longer than `max_len`.
pub(crate) async fn read_frame_within<T: DeserializeOwned>(
    stream: &mut (impl AsyncRead + Unpin + ?Sized),
    body_timeout: Duration,
    max_len: usize,
) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max_len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a controller frame of {len} bytes exceeds the {max_len}-byte limit"),
        ));
    }
    let mut body = vec![0u8; len];
    tokio::time::timeout(body_timeout, stream.read_exact(&mut body))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "controller frame cut short"))??;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Creates a [`PeerClient`] for each peer openraft talks to.
#[derive(Clone, Debug)]
pub(crate) struct Network {
    /// This node's id (named in timeout errors).
    pub(crate) node_id: NodeId,
    /// Which peers answer, shared by every client of each.
    pub(crate) health: Arc<PeerHealth>,
    /// How long connecting, the handshake included, may take.
    pub(crate) connect_timeout: Duration,
    pub(crate) transport: Arc<dyn ControllerTransport>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &ControllerNode) -> PeerClient {
        PeerClient {
            node_id: self.node_id,
            target,
            addr: node.addr.clone(),
            connect_timeout: self.connect_timeout,
            transport: self.transport.clone(),
            conn: None,
            health: self.health.clone(),
        }
    }
}

/// The connection to one peer.
#[derive(Debug)]
pub(crate) struct PeerClient {
    node_id: NodeId,
    target: NodeId,
    addr: String,
    connect_timeout: Duration,
    transport: Arc<dyn ControllerTransport>,
    conn: Option<ControllerStream>,
    health: Arc<PeerHealth>,
}

/// Why a call failed, before it is turned into openraft's error.
enum CallError {
    Connect(io::Error),
    Io(io::Error),
    Timeout,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Connect(e) => write!(f, "cannot connect: {e}"),
            CallError::Io(e) => e.fmt(f),
            CallError::Timeout => f.write_str("no answer in time"),
        }
    }
}

impl PeerClient {
    async fn call(&mut self, request: RpcRequest, ttl: Duration) -> Result<RpcResponse, CallError> {
        let result = tokio::time::timeout(ttl, self.call_inner(&request, ttl)).await;
        let result = match result {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout),
        };
        match &result {
            Ok(_) => self.health.answered(self.target, &self.addr),
            Err(error) => {
                self.conn = None;
                self.health.failed(self.target, &self.addr, error);
            }
        }
        result
    }

    async fn call_inner(
        &mut self,
        request: &RpcRequest,
        ttl: Duration,
    ) -> Result<RpcResponse, CallError> {
        if self.conn.is_none() {
            let connected = tokio::time::timeout(self.connect_timeout, self.connect()).await;
            let stream = match connected {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return Err(CallError::Connect(e)),
                Err(_) => {
                    return Err(CallError::Connect(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("connecting to {} timed out", self.addr),
                    )))
                }
            };
            debug!(target_node = self.target, addr = %self.addr, "controller connection opened");
            self.conn = Some(stream);
        }
        let Some(stream) = self.conn.as_mut() else {
            return Err(CallError::Io(io::Error::other("no connection")));
        };
        write_frame(stream, request).await.map_err(CallError::Io)?;
        match read_frame::<RpcResponse>(stream, ttl).await {
            Ok(Some(response)) => Ok(response),
            Ok(None) => Err(CallError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("controller {} closed the connection", self.addr),
            ))),
            Err(e) => Err(CallError::Io(e)),
        }
    }

    /// A connection to the peer, secured.
    async fn connect(&self) -> io::Result<ControllerStream> {
        let socket = TcpStream::connect(&self.addr).await?;
        socket.set_nodelay(true)?;
        self.transport.connect(socket, self.addr.clone()).await
    }

    fn rpc_error<E: std::error::Error>(
        &self,
        action: RPCTypes,
        ttl: Duration,
        e: CallError,
    ) -> RPCError<NodeId, ControllerNode, E> {
        match e {
            CallError::Connect(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
            CallError::Timeout => RPCError::Timeout(Timeout {
                action,
                id: self.node_id,
                target: self.target,
                timeout: ttl,
            }),
        }
    }

    fn mismatch<E: std::error::Error>(
        &self,
        got: &RpcResponse,
    ) -> RPCError<NodeId, ControllerNode, E> {
        let e = io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "controller {} answered with the wrong response: {got:?}",
                self.addr
            ),
        );
        RPCError::Network(NetworkError::new(&e))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, ControllerNode, RaftError<NodeId>>>
    {
        let ttl = option.hard_ttl();
        match self.call(RpcRequest::AppendEntries(rpc), ttl).await {
            Ok(RpcResponse::AppendEntries(Ok(r))) => Ok(r),
            Ok(RpcResponse::AppendEntries(Err(e))) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(other) => Err(self.mismatch(&other)),
            Err(e) => Err(self.rpc_error(RPCTypes::AppendEntries, ttl, e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, ControllerNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let ttl = option.hard_ttl();
        match self.call(RpcRequest::InstallSnapshot(rpc), ttl).await {
            Ok(RpcResponse::InstallSnapshot(Ok(r))) => Ok(r),
            Ok(RpcResponse::InstallSnapshot(Err(e))) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(other) => Err(self.mismatch(&other)),
            Err(e) => Err(self.rpc_error(RPCTypes::InstallSnapshot, ttl, e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, ControllerNode, RaftError<NodeId>>> {
        let ttl = option.hard_ttl();
        match self.call(RpcRequest::Vote(rpc), ttl).await {
            Ok(RpcResponse::Vote(Ok(r))) => Ok(r),
            Ok(RpcResponse::Vote(Err(e))) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(other) => Err(self.mismatch(&other)),
            Err(e) => Err(self.rpc_error(RPCTypes::Vote, ttl, e)),
        }
    }
}
