//! SCRAM on the controller link (Kafka's `SASL_PLAINTEXT` / `SASL_SSL`
//! controller listener with `sasl.mechanism.controller.protocol`): a
//! [`ControllerTransport`] that runs a SCRAM exchange over the connection
//! another transport secured, before any RPC frame.
//!
//! The exchange travels in the RPC's own frames: the client's first
//! message with the mechanism it chose, the server's first message, the
//! client's proof, the server's signature (or a refusal, after which the
//! connection closes). The accepting side verifies against the SCRAM
//! credentials of the metadata image; a user the image does not have yet
//! is looked up among the node's start-up users (`--add-scram`), since
//! voters must authenticate one another before their quorum can commit
//! anything — Kafka's `kafka-storage format --add-scram` gives every
//! controller those users for the same reason.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio::sync::watch;
use weir_auth::{ScramClient, ScramMechanism, ScramServer};

use super::network::{read_frame_within, write_frame};
use super::transport::{ControllerStream, ControllerTransport, Handshake};
use crate::image::MetadataImage;
use crate::scram::ScramUpsertion;

/// The largest exchange frame read: a peer that has not authenticated
/// holds no more memory than this.
const MAX_SASL_FRAME_LEN: usize = 8 << 10;

/// How this node authenticates, and whom it accepts.
#[derive(Debug, Clone)]
pub struct ControllerSasl {
    /// The mechanism this node logs in with.
    pub mechanism: ScramMechanism,
    /// This node's user.
    pub username: String,
    /// Its password.
    pub password: String,
    /// Users this node was started with, accepted while the image does not
    /// hold the user.
    pub bootstrap_users: Vec<ScramUpsertion>,
}

/// One frame of the exchange.
#[derive(Serialize, Deserialize, Debug)]
enum SaslFrame {
    ClientFirst {
        mechanism: String,
        message: Vec<u8>,
    },
    ServerFirst(Vec<u8>),
    ClientFinal(Vec<u8>),
    ServerFinal(Vec<u8>),
    /// The exchange failed; the connection closes.
    Failed(String),
}

/// SCRAM over `inner`.
pub(crate) struct SaslTransport {
    inner: Arc<dyn ControllerTransport>,
    sasl: ControllerSasl,
    image: watch::Receiver<Arc<MetadataImage>>,
    /// How long each frame of the exchange may take to arrive.
    frame_timeout: Duration,
}

impl std::fmt::Debug for SaslTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslTransport")
            .field("inner", &self.inner)
            .field("mechanism", &self.sasl.mechanism)
            .field("username", &self.sasl.username)
            .finish_non_exhaustive()
    }
}

impl SaslTransport {
    pub(crate) fn new(
        inner: Arc<dyn ControllerTransport>,
        sasl: ControllerSasl,
        image: watch::Receiver<Arc<MetadataImage>>,
        frame_timeout: Duration,
    ) -> Self {
        Self {
            inner,
            sasl,
            image,
            frame_timeout,
        }
    }

    async fn receive(&self, stream: &mut ControllerStream) -> io::Result<SaslFrame> {
        read_frame_within::<SaslFrame>(stream, self.frame_timeout, MAX_SASL_FRAME_LEN)
            .await?
            .ok_or_else(|| refused("the peer closed the connection during SASL authentication"))
    }

    /// The client's side: proves this node's identity, and checks the
    /// server's.
    async fn log_in(&self, stream: &mut ControllerStream) -> io::Result<()> {
        let sasl = &self.sasl;
        let mut client = ScramClient::new(sasl.mechanism, &sasl.username, &sasl.password);
        let first = SaslFrame::ClientFirst {
            mechanism: sasl.mechanism.name().to_owned(),
            message: client.client_first(),
        };
        write_frame(stream, &first).await?;
        let server_first = match self.receive(stream).await? {
            SaslFrame::ServerFirst(message) => message,
            other => return Err(unexpected(other)),
        };
        let proof = client
            .receive_server_first(&server_first)
            .map_err(|e| refused(format!("SCRAM: {e}")))?;
        write_frame(stream, &SaslFrame::ClientFinal(proof)).await?;
        match self.receive(stream).await? {
            SaslFrame::ServerFinal(message) => client
                .receive_server_final(&message)
                .map_err(|e| refused(format!("SCRAM: the controller's signature: {e}"))),
            other => Err(unexpected(other)),
        }
    }

    /// The server's side: the peer's principal once it has proved it.
    async fn verify(&self, stream: &mut ControllerStream) -> io::Result<String> {
        let (mechanism, message) = match self.receive(stream).await? {
            SaslFrame::ClientFirst { mechanism, message } => (mechanism, message),
            other => return Err(unexpected(other)),
        };
        let Some(mechanism) = ScramMechanism::from_name(&mechanism) else {
            return fail(stream, format!("unsupported SASL mechanism {mechanism:?}")).await;
        };
        let mut server = ScramServer::new(mechanism);
        let user = match server.receive_client_first(&message) {
            Ok(user) => user.to_owned(),
            Err(e) => return fail(stream, format!("SCRAM: {e}")).await,
        };
        let credential = {
            let image = self.image.borrow();
            image
                .scram_credential(&user, mechanism)
                .cloned()
                .or_else(|| {
                    let from_start = self.sasl.bootstrap_users.iter();
                    from_start
                        .filter(|u| image.scram_user(&u.user).is_none())
                        .find(|u| u.user == user && u.mechanism == mechanism)
                        .map(|u| u.credential.clone())
                })
        };
        let server_first = server.server_first(credential.as_ref());
        write_frame(stream, &SaslFrame::ServerFirst(server_first)).await?;
        let proof = match self.receive(stream).await? {
            SaslFrame::ClientFinal(proof) => proof,
            other => return Err(unexpected(other)),
        };
        match server.receive_client_final(&proof) {
            Ok(server_final) => {
                write_frame(stream, &SaslFrame::ServerFinal(server_final)).await?;
                Ok(format!("User:{user}"))
            }
            // The same answer whether the user or the password was wrong.
            Err(_) => fail(stream, "authentication failed".to_owned()).await,
        }
    }
}

impl ControllerTransport for SaslTransport {
    fn connect(&self, socket: TcpStream, addr: String) -> Handshake<'_, ControllerStream> {
        Box::pin(async move {
            let mut stream = self.inner.connect(socket, addr).await?;
            self.log_in(&mut stream).await?;
            Ok(stream)
        })
    }

    fn accept(&self, socket: TcpStream) -> Handshake<'_, (ControllerStream, String)> {
        Box::pin(async move {
            // A SASL principal replaces whatever the inner transport named.
            let (mut stream, _) = self.inner.accept(socket).await?;
            let principal = self.verify(&mut stream).await?;
            Ok((stream, principal))
        })
    }
}

fn refused(reason: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, reason.into())
}

fn unexpected(frame: SaslFrame) -> io::Error {
    match frame {
        SaslFrame::Failed(reason) => refused(format!("SASL authentication failed: {reason}")),
        _ => refused("the peer broke the SASL exchange"),
    }
}

async fn fail<T>(stream: &mut ControllerStream, reason: String) -> io::Result<T> {
    let _ = write_frame(stream, &SaslFrame::Failed(reason.clone())).await;
    Err(refused(reason))
}
