//! How controller connections are secured, and who may use them.
//!
//! The controller RPC is framed the same whatever carries it. A
//! [`ControllerTransport`] turns a TCP connection into the byte stream the
//! frames travel on: the connection as it is ([`Plaintext`]), or TLS,
//! which the broker supplies (this crate has no TLS of its own). On the
//! accepting side it also names the peer's principal, which each request
//! is authorized against when an authorizer is on ([`PeerAuthorization`]).

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::image::MetadataImage;

/// A byte stream controller frames travel on.
pub trait ControllerIo: AsyncRead + AsyncWrite + Unpin + Send + Sync + fmt::Debug {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + fmt::Debug> ControllerIo for T {}

/// A secured controller connection.
pub type ControllerStream = Box<dyn ControllerIo>;

/// What a transport's handshake yields.
pub type Handshake<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// The principal of a peer that proved no identity (Kafka's).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Secures controller connections: both ends of a link must use the same.
pub trait ControllerTransport: fmt::Debug + Send + Sync {
    /// Secures a connection this node opened to the controller at `addr`
    /// (`host:port`, as the peer is known).
    fn connect(&self, socket: TcpStream, addr: String) -> Handshake<'_, ControllerStream>;

    /// Secures a connection a peer opened, and names the peer's principal
    /// (`User:…`; [`ANONYMOUS`] when it proved no identity). An error
    /// closes the connection.
    fn accept(&self, socket: TcpStream) -> Handshake<'_, (ControllerStream, String)>;
}

/// Connections as they are: no encryption, every peer anonymous.
#[derive(Debug, Default, Clone, Copy)]
pub struct Plaintext;

impl ControllerTransport for Plaintext {
    fn connect(&self, socket: TcpStream, _addr: String) -> Handshake<'_, ControllerStream> {
        Box::pin(async move { Ok(Box::new(socket) as ControllerStream) })
    }

    fn accept(&self, socket: TcpStream) -> Handshake<'_, (ControllerStream, String)> {
        Box::pin(async move { Ok((Box::new(socket) as ControllerStream, ANONYMOUS.to_owned())) })
    }
}

/// The ACL check on controller peers, when an authorizer is on: the
/// broker's `super.users` and `allow.everyone.if.no.acl.found`, applied to
/// the ACLs of the metadata image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerAuthorization {
    /// `super.users`, as `Type:name`.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
}

impl PeerAuthorization {
    /// The authorizer of `image`'s ACLs under these settings.
    pub(crate) fn authorizer(&self, image: &MetadataImage) -> crate::Authorizer {
        image.authorizer(
            self.super_users.clone(),
            self.allow_everyone_if_no_acl_found,
        )
    }
}

/// Whether an idle connection is still open: a read that would wait
/// says so. One that returns anything (the peer's close, a TLS alert,
/// stray bytes) or fails means the connection is done with.
pub(crate) fn still_open(stream: &mut ControllerStream) -> bool {
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    let mut cx = Context::from_waker(Waker::noop());
    matches!(Pin::new(stream).poll_read(&mut cx, &mut buf), Poll::Pending)
}
