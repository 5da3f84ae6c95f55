//! The controller listener over TLS: how controllers, and brokers that are
//! not controllers, secure the Raft link when `listener.security.protocol.map`
//! maps `CONTROLLER` to `SSL`.
//!
//! Accepting, it uses the Kafka listeners' key and trust stores (the same
//! [`TlsServer`], reloaded with them) and names the peer by its
//! certificate, mapped by `ssl.principal.mapping.rules`; with an
//! authorizer on, that principal needs `ClusterAction` on the cluster
//! (weir-meta checks). Connecting, it presents the key store as its client
//! certificate and checks the peer's against the trust store.
//!
//! SASL on the controller listener is not supported: the start stops with
//! a clear error rather than running the link unauthenticated.

use std::sync::Arc;

use tokio::net::TcpStream;
use weir_meta::{ControllerStream, ControllerTransport, Handshake};

use crate::config::{BrokerConfig, ConfigError};
use crate::listeners::SecurityProtocol;
use crate::tls::TlsServer;

/// The transport of the controller link, as `config` asks: plaintext, or
/// TLS with `tls` (built from the same settings) for accepting.
pub(crate) fn controller_transport(
    config: &BrokerConfig,
    tls: Option<Arc<TlsServer>>,
) -> Result<Arc<dyn ControllerTransport>, ConfigError> {
    let refuse = |reason: String| ConfigError {
        name: "listener.security.protocol.map".into(),
        value: format!("CONTROLLER:{}", config.controller_protocol),
        reason,
    };
    match config.controller_protocol {
        SecurityProtocol::Plaintext => Ok(Arc::new(weir_meta::Plaintext)),
        SecurityProtocol::Ssl => {
            let server = tls.ok_or_else(|| {
                refuse("an SSL controller listener needs a key store: set ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain)".to_owned())
            })?;
            let client = config
                .controller_client_tls()
                .map_err(|error| refuse(format!("cannot connect to the other controllers: {error}")))?;
            Ok(Arc::new(TlsTransport { server, client }))
        }
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => Err(refuse(
            "SASL on the controller listener is not supported; use SSL (with ssl.client.auth=required and the nodes' principals in super.users) or PLAINTEXT".to_owned(),
        )),
    }
}

/// TLS both ways, with client certificates.
#[derive(Debug)]
struct TlsTransport {
    server: Arc<TlsServer>,
    /// Read again at each connection, so rotated certificates are used
    /// without a restart (connections between controllers are few and
    /// long-lived).
    client: weir_client::TlsConfig,
}

fn invalid(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, error.to_string())
}

impl ControllerTransport for TlsTransport {
    fn connect(&self, socket: TcpStream, addr: String) -> Handshake<'_, ControllerStream> {
        Box::pin(async move {
            let tls = self.client.clone();
            let config = tokio::task::spawn_blocking(move || weir_client::tls_client_config(&tls))
                .await
                .map_err(std::io::Error::other)?
                .map_err(invalid)?;
            let name = weir_client::tls_server_name(&addr)
                .ok_or_else(|| invalid(format!("{addr}: no host name to check")))?;
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, socket)
                .await?;
            Ok(Box::new(stream) as ControllerStream)
        })
    }

    fn accept(&self, socket: TcpStream) -> Handshake<'_, (ControllerStream, String)> {
        Box::pin(async move {
            let stream = self.server.acceptor().accept(socket).await?;
            let principal = self
                .server
                .peer_principal(stream.get_ref().1)
                .map_err(invalid)?;
            Ok((Box::new(stream) as ControllerStream, principal))
        })
    }
}
