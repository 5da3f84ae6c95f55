//! Controller RPC to the leader on behalf of a caller of this node:
//! forwarded commands and broker heartbeats.
//!
//! These calls use connections of their own, not Raft's, so that a command
//! waiting for its commit never delays replication. Heartbeats reuse idle
//! connections. A forwarded command always opens a fresh one: a reused
//! connection may turn out to have been closed by the peer only once the
//! request is written, and then whether the leader read it cannot be told,
//! while a failure on a fresh connection before the request is written
//! whole means the leader never saw it.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;
use tracing::debug;

use super::network::{read_frame, write_frame, RpcRequest, RpcResponse};
use super::transport::{still_open, ControllerStream, ControllerTransport};
use super::HeartbeatReply;

/// Idle connections kept, over all addresses.
const MAX_IDLE: usize = 8;

/// Why a forwarded call got no answer.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The request never reached the peer whole: it did nothing.
    NotSent(io::Error),
    /// The request was sent, and then the connection failed: the peer may
    /// or may not have acted on it.
    NoAnswer(io::Error),
    /// The deadline passed after the request was sent.
    Timeout,
}

/// Connections to leaders, for forwarded calls.
#[derive(Debug)]
pub(crate) struct Forwarder {
    transport: Arc<dyn ControllerTransport>,
    connect_timeout: Duration,
    body_timeout: Duration,
    idle: Mutex<Vec<(String, ControllerStream)>>,
}

impl Forwarder {
    pub(crate) fn new(
        transport: Arc<dyn ControllerTransport>,
        connect_timeout: Duration,
        body_timeout: Duration,
    ) -> Forwarder {
        Forwarder {
            transport,
            connect_timeout,
            body_timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<(String, ControllerStream)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `request` to the controller at `addr` and waits for its
    /// answer until `deadline`. `reuse` allows an idle connection (only
    /// for requests that are safe to repeat).
    pub(crate) async fn call(
        &self,
        addr: &str,
        request: &RpcRequest,
        deadline: Instant,
        reuse: bool,
    ) -> Result<RpcResponse, CallError> {
        let reused = if reuse { self.take_idle(addr) } else { None };
        let mut stream = match reused {
            Some(stream) => stream,
            None => self.connect(addr, deadline).await?,
        };
        match tokio::time::timeout_at(deadline, write_frame(&mut stream, request)).await {
            Ok(Ok(())) => {}
            // write_all stopped before handing over the whole frame, and
            // the peer acts only on whole frames.
            Ok(Err(e)) => return Err(CallError::NotSent(e)),
            Err(_) => {
                return Err(CallError::NotSent(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("writing to controller {addr} timed out"),
                )))
            }
        }
        let response =
            match tokio::time::timeout_at(deadline, read_frame(&mut stream, self.body_timeout))
                .await
            {
                Err(_) => return Err(CallError::Timeout),
                Ok(Ok(Some(response))) => response,
                Ok(Ok(None)) => {
                    return Err(CallError::NoAnswer(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("controller {addr} closed the connection"),
                    )))
                }
                Ok(Err(e)) => return Err(CallError::NoAnswer(e)),
            };
        let mut idle = self.idle();
        if idle.len() < MAX_IDLE {
            idle.push((addr.to_owned(), stream));
        }
        Ok(response)
    }

    /// An idle connection to `addr` that the peer has not closed.
    fn take_idle(&self, addr: &str) -> Option<ControllerStream> {
        let mut idle = self.idle();
        while let Some(at) = idle.iter().position(|(a, _)| a == addr) {
            let (_, mut stream) = idle.swap_remove(at);
            if still_open(&mut stream) {
                return Some(stream);
            }
            debug!(addr, "dropping a closed controller connection");
        }
        None
    }

    async fn connect(&self, addr: &str, deadline: Instant) -> Result<ControllerStream, CallError> {
        let limit = deadline.min(Instant::now() + self.connect_timeout);
        let connect = async {
            let socket = TcpStream::connect(addr).await?;
            socket.set_nodelay(true)?;
            self.transport.connect(socket, addr.to_owned()).await
        };
        match tokio::time::timeout_at(limit, connect).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(CallError::NotSent(e)),
            Err(_) => Err(CallError::NotSent(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to controller {addr} timed out"),
            ))),
        }
    }
}

/// One broker heartbeat on its way to the active controller.
pub(crate) struct HeartbeatAttempt<'a> {
    pub(crate) request: RpcRequest,
    pub(crate) forwarder: &'a Forwarder,
    pub(crate) attempt_timeout: Duration,
}

impl HeartbeatAttempt<'_> {
    /// Delivers the heartbeat to the leader `leader` names (`Some(None)`:
    /// this node, answered by `local`), looking the leader up again after
    /// every failure, until `deadline`. A heartbeat may be repeated, so any
    /// failure is retried, and a forwarded attempt gives up after
    /// `attempt_timeout`: a leader that does not answer may have been cut
    /// off and replaced.
    pub(crate) async fn until(
        &self,
        deadline: Instant,
        leader: impl Fn() -> Option<Option<String>>,
        local: impl Fn() -> Option<HeartbeatReply>,
    ) -> Option<HeartbeatReply> {
        loop {
            match leader() {
                Some(None) => {
                    if let Some(reply) = local() {
                        return Some(reply);
                    }
                }
                Some(Some(addr)) => {
                    let attempt = deadline.min(Instant::now() + self.attempt_timeout);
                    match self
                        .forwarder
                        .call(&addr, &self.request, attempt, true)
                        .await
                    {
                        Ok(RpcResponse::Heartbeat(Some(reply))) => return Some(reply),
                        Ok(RpcResponse::Heartbeat(None)) => {}
                        Ok(other) => debug!(%addr, ?other, "odd heartbeat answer"),
                        Err(e) => debug!(%addr, error = ?e, "heartbeat not forwarded"),
                    }
                }
                None => {}
            }
            if !super::pause_before_retry(deadline).await {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::net::TcpListener;

    use super::*;
    use crate::raft::HeartbeatReply;

    const LONG: Duration = Duration::from_secs(10);

    fn heartbeat() -> RpcRequest {
        RpcRequest::Heartbeat {
            broker_id: 1,
            incarnation: uuid::Uuid::nil(),
        }
    }

    fn forwarder() -> Forwarder {
        Forwarder::new(
            Arc::new(crate::raft::Plaintext),
            Duration::from_secs(2),
            Duration::from_secs(2),
        )
    }

    /// How a fake leader treats each connection it accepts.
    #[derive(Clone, Copy)]
    enum Peer {
        /// Answers every request `Alive`.
        Answer,
        /// Answers one request, then closes the connection.
        AnswerOnceThenClose,
        /// Reads a request and closes without answering.
        ReadThenClose,
        /// Reads a request and never answers.
        ReadThenHang,
    }

    /// A fake leader; returns its address and a count of the connections
    /// it accepted.
    async fn peer(behaviour: Peer) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    while let Ok(Some(_)) = read_frame::<RpcRequest>(&mut stream, LONG).await {
                        match behaviour {
                            Peer::ReadThenClose => return,
                            Peer::ReadThenHang => std::future::pending::<()>().await,
                            Peer::Answer | Peer::AnswerOnceThenClose => {
                                let alive = RpcResponse::Heartbeat(Some(HeartbeatReply::Alive));
                                write_frame(&mut stream, &alive).await.unwrap();
                            }
                        }
                        if let Peer::AnswerOnceThenClose = behaviour {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    #[tokio::test]
    async fn failures_say_whether_the_request_was_sent() {
        // Nobody listening: not sent.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = closed.local_addr().unwrap().to_string();
        drop(closed);
        let deadline = Instant::now() + LONG;
        let got = forwarder().call(&addr, &heartbeat(), deadline, false).await;
        assert!(matches!(got, Err(CallError::NotSent(_))), "{got:?}");

        // Read, then the connection closed: sent, no answer.
        let (addr, _) = peer(Peer::ReadThenClose).await;
        let got = forwarder().call(&addr, &heartbeat(), deadline, false).await;
        assert!(matches!(got, Err(CallError::NoAnswer(_))), "{got:?}");

        // Read, then silence until the deadline.
        let (addr, _) = peer(Peer::ReadThenHang).await;
        let soon = Instant::now() + Duration::from_millis(200);
        let got = forwarder().call(&addr, &heartbeat(), soon, false).await;
        assert!(matches!(got, Err(CallError::Timeout)), "{got:?}");
    }

    #[tokio::test]
    async fn idle_connections_are_reused_only_while_open() {
        let deadline = Instant::now() + LONG;
        let alive = |r: Result<RpcResponse, CallError>| {
            matches!(r, Ok(RpcResponse::Heartbeat(Some(HeartbeatReply::Alive))))
        };

        let (addr, accepted) = peer(Peer::Answer).await;
        let f = forwarder();
        for _ in 0..3 {
            assert!(alive(f.call(&addr, &heartbeat(), deadline, true).await));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection, reused");
        // Without reuse (a command): a connection of its own.
        assert!(alive(f.call(&addr, &heartbeat(), deadline, false).await));
        assert_eq!(accepted.load(Ordering::SeqCst), 2);

        // The peer closes after each answer: the idle connection is found
        // closed and replaced, so no call fails.
        let (addr, accepted) = peer(Peer::AnswerOnceThenClose).await;
        let f = forwarder();
        for round in 1..=3 {
            assert!(alive(f.call(&addr, &heartbeat(), deadline, true).await));
            // Let the close reach this side before the next call.
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(accepted.load(Ordering::SeqCst), round);
        }
    }

    #[tokio::test]
    async fn a_heartbeat_stuck_on_a_silent_leader_goes_on_to_the_new_one() {
        // The leader this node knew reads the heartbeat and never answers
        // (cut off); a new one is known a second later.
        let (silent, _) = peer(Peer::ReadThenHang).await;
        let (new_leader, _) = peer(Peer::Answer).await;
        let switch = Instant::now() + Duration::from_secs(1);
        let leader = || {
            let addr = if Instant::now() < switch {
                &silent
            } else {
                &new_leader
            };
            Some(Some(addr.clone()))
        };
        let f = forwarder();
        let attempt = HeartbeatAttempt {
            request: heartbeat(),
            forwarder: &f,
            attempt_timeout: Duration::from_millis(250),
        };
        // The session a new leader grants: the heartbeat must reach it
        // within this, not wait out the whole call on the old leader.
        let session = Instant::now() + Duration::from_secs(4);
        let reply = attempt.until(session, leader, || None).await;
        assert_eq!(reply, Some(HeartbeatReply::Alive));
    }
}
