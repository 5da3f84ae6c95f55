//! The Kafka listeners' accept loops.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::connection;
use crate::broker::Broker;
use crate::config::listeners::SecurityProtocol;
use crate::metrics::ListenerLabels;
use crate::net::connection_quotas::ConnectionLimits;
use crate::security::tls::TlsServer;

/// A listener as its connections see it.
#[derive(Debug)]
pub struct ServedListener {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// The TLS acceptor, on SSL and SASL_SSL listeners.
    pub tls: Option<Arc<TlsServer>>,
}

/// Accepts connections on the broker's listener `name` until `shutdown`
/// turns true, then waits for the connections to answer what they already
/// read.
pub async fn run_listener(
    broker: Arc<Broker>,
    name: &str,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let config = broker.config();
    let protocol = config
        .startup
        .listeners
        .iter()
        .find(|l| l.name == name)
        .map_or(SecurityProtocol::Plaintext, |l| l.protocol);
    let served = Arc::new(ServedListener {
        name: name.to_owned(),
        protocol,
        tls: protocol.is_tls().then(|| broker.tls()).flatten(),
    });
    let memory = broker.request_memory();
    let quotas = broker.connection_quotas();
    // As Kafka: the inter-broker listener never waits at max.connections,
    // unless it is the only one.
    let protected =
        config.startup.listeners.len() > 1 && config.startup.inter_broker_listener_name == name;
    drop(config);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, address)) => {
                    let limits = || ConnectionLimits::of(&broker.config());
                    let admitted = tokio::select! {
                        admitted = quotas.admit(address.ip(), protected, limits) => admitted,
                        _ = shutdown.changed() => break,
                    };
                    match admitted {
                        Ok(admission) => {
                            let accepted = connection::Accepted { stream, admission };
                            let labels = ListenerLabels { listener: name.to_owned() };
                            let health = &broker.metrics().health;
                            health.connection_creations.get_or_create(&labels).inc();
                            let open = health.connections.get_or_create(&labels).clone();
                            open.inc();
                            let serving = connection::serve(broker.clone(), accepted, served.clone(), memory.clone(), shutdown.clone());
                            connections.spawn(async move {
                                serving.await;
                                open.dec();
                            });
                        }
                        Err(refused) => {
                            tracing::info!(%refused, "closing a new connection");
                            drop(stream);
                        }
                    }
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
