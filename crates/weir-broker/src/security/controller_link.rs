//! The security of the controller listener: how controllers, and brokers
//! that are not controllers, secure the Raft link when
//! `listener.security.protocol.map` maps `CONTROLLER` to `SSL`, `SASL_SSL`
//! or `SASL_PLAINTEXT`.
//!
//! Over TLS, accepting, it uses the Kafka listeners' key and trust stores
//! (the same [`TlsServer`], reloaded with them) and names the peer by its
//! certificate, mapped by `ssl.principal.mapping.rules`; with an
//! authorizer on, weir-meta authorizes each request against that
//! principal. Connecting, it presents the key store as its client
//! certificate and checks the peer's against the trust store.
//!
//! With `SASL_PLAINTEXT` or `SASL_SSL`, every controller connection also
//! runs a SCRAM exchange (`sasl.mechanism.controller.protocol`, this node's
//! user from `sasl.jaas.config`), verified against the cluster's SCRAM
//! users (and, before the quorum holds them, the node's `--add-scram`
//! users); the peer's principal is then its SASL user.
//!
//! The controller listener never grants more than the Kafka listeners do:
//! when every Kafka listener makes its clients prove who they are, a peer
//! that proves no identity is refused here too, and a node that must talk
//! to other controllers without proving its own identity does not start.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use weir_meta::{ControllerStream, ControllerTransport, Handshake};

use crate::config::listeners::SecurityProtocol;
use crate::config::{BrokerConfig, ConfigError};
use crate::security::tls::TlsServer;

/// The transport of the controller link, as `config` asks: plaintext, or
/// TLS with `tls` (built from the same settings) for accepting.
pub(crate) fn controller_transport(
    config: &BrokerConfig,
    tls: Option<Arc<TlsServer>>,
) -> Result<Arc<dyn ControllerTransport>, ConfigError> {
    let refuse = |reason: String| ConfigError {
        name: "listener.security.protocol.map".into(),
        value: format!("CONTROLLER:{}", config.startup.controller_protocol),
        reason,
    };
    let alone = config.startup.is_controller && config.startup.controllers.len() <= 1;
    if refuses_anonymous_peers(config) && !alone && !authenticates_peers(config) {
        return Err(refuse(
            "every Kafka listener authenticates its clients, but controller connections would \
             not: map CONTROLLER to SASL_SSL or SASL_PLAINTEXT (with \
             sasl.mechanism.controller.protocol and this node's user in sasl.jaas.config), or to \
             SSL with ssl.client.auth=required; with an authorizer on, put the nodes' principals \
             in super.users"
                .to_owned(),
        ));
    }
    // SASL, if any, runs over this (see `controller_sasl`).
    if !config.startup.controller_protocol.is_tls() {
        return Ok(Arc::new(weir_meta::Plaintext));
    }
    let server = tls.ok_or_else(|| {
        refuse(format!(
            "a {} controller listener needs a key store: set ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain)",
            config.startup.controller_protocol
        ))
    })?;
    let client = config
        .controller_client_tls()
        .map_err(|error| refuse(format!("cannot connect to the other controllers: {error}")))?;
    Ok(Arc::new(TlsTransport { server, client }))
}

/// The SCRAM settings of a SASL controller listener, `None` for the others.
pub(crate) fn controller_sasl(
    config: &BrokerConfig,
) -> Result<Option<weir_meta::ControllerSasl>, ConfigError> {
    if !config.startup.controller_protocol.is_sasl() {
        return Ok(None);
    }
    let mechanism_name = config
        .given_value("sasl.mechanism.controller.protocol")
        .unwrap_or_else(|| "SCRAM-SHA-512".to_owned());
    let refuse = |name: &str, value: String, reason: String| ConfigError {
        name: name.into(),
        value,
        reason,
    };
    let Some(mechanism) = weir_meta::ScramMechanism::from_name(&mechanism_name) else {
        return Err(refuse(
            "sasl.mechanism.controller.protocol",
            mechanism_name,
            "the controller listener speaks SCRAM-SHA-256 or SCRAM-SHA-512".to_owned(),
        ));
    };
    let Some(jaas) = config.given_value("sasl.jaas.config") else {
        return Err(refuse(
            "sasl.jaas.config",
            String::new(),
            "a SASL controller listener needs this node's own credentials, e.g. \
             org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"controller\" password=\"...\"; (and the user created with --add-scram)"
                .to_owned(),
        ));
    };
    let properties = std::collections::BTreeMap::from([
        ("security.protocol".to_owned(), "SASL_PLAINTEXT".to_owned()),
        ("sasl.mechanism".to_owned(), mechanism.name().to_owned()),
        ("sasl.jaas.config".to_owned(), jaas),
    ]);
    let login = weir_client::SecurityConfig::from_properties(&properties)
        .ok()
        .and_then(|security| security.sasl)
        .ok_or_else(|| {
            // Never the credentials themselves.
            refuse(
                "sasl.jaas.config",
                String::new(),
                "cannot read this node's user and password from it".to_owned(),
            )
        })?;
    Ok(Some(weir_meta::ControllerSasl {
        mechanism,
        username: login.username,
        password: login.password,
        bootstrap_users: config.startup.initial_scram.clone(),
    }))
}

/// Whether a controller peer that proves no identity is refused: when no
/// Kafka listener admits an anonymous client (each is SASL, or TLS that
/// requires a client certificate).
pub(crate) fn refuses_anonymous_peers(config: &BrokerConfig) -> bool {
    !config.startup.listeners.is_empty()
        && config.startup.listeners.iter().all(|listener| {
            listener.protocol.is_sasl() || requires_certificate(config, listener.protocol)
        })
}

/// Whether controller peers prove who they are (SASL, or a certificate).
fn authenticates_peers(config: &BrokerConfig) -> bool {
    config.startup.controller_protocol.is_sasl()
        || requires_certificate(config, config.startup.controller_protocol)
}

fn requires_certificate(config: &BrokerConfig, protocol: SecurityProtocol) -> bool {
    protocol == SecurityProtocol::Ssl
        && config.security.tls.client_auth == crate::security::tls::ClientAuth::Required
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

/// The controller's settings come from the broker's: here, where the
/// controller link's protection is decided.
impl BrokerConfig {
    /// The settings of this node's controller; `tls` secures the
    /// controller listener when it is SSL.
    pub fn controller_settings(
        &self,
        tls: Option<Arc<crate::security::tls::TlsServer>>,
    ) -> Result<weir_meta::ControllerConfig, ConfigError> {
        let security = &self.security;
        Ok(weir_meta::ControllerConfig {
            broker_session_timeout: Duration::from_millis(self.broker_session_timeout_ms),
            leader_imbalance_check_interval: self
                .auto_leader_rebalance_enable
                .then(|| Duration::from_secs(self.leader_imbalance_check_interval_seconds)),
            transport: controller_transport(self, tls)?,
            peer_authorization: security
                .authorizer_enabled
                .then(|| weir_meta::PeerAuthorization {
                    super_users: security.super_users.clone(),
                    allow_everyone_if_no_acl_found: security.allow_everyone_if_no_acl_found,
                }),
            refuse_anonymous: refuses_anonymous_peers(self),
            sasl: controller_sasl(self)?,
            ..weir_meta::ControllerConfig::default()
        })
    }
}
