//! Kafka's listeners: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map` and `inter.broker.listener.name`. A
//! listener has a name, a security protocol, the address it is bound to and
//! the address clients are told; Metadata answers each client with the
//! addresses of the listener it connected to.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use crate::config::ConfigError;

/// How a listener's connections are secured (Kafka's `SecurityProtocol`):
/// the client's own, so that both sides read Kafka's names alike.
pub use weir_client::SecurityProtocol;

/// Kafka's default `listener.security.protocol.map`: each protocol's name
/// maps to itself.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";

/// The name of the controller listener (`controller.listener.names`).
pub const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// One Kafka listener of this broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener name, upper case (`PLAINTEXT`, `INTERNAL`, …).
    pub name: String,
    pub protocol: SecurityProtocol,
    /// The address bound (its port resolved once bound, if 0 was asked).
    pub bind: SocketAddr,
    /// The host clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: u16,
}

impl Listener {
    /// The `--listen` shorthand: one PLAINTEXT listener.
    pub fn plaintext(bind: SocketAddr, advertised: Option<(String, u16)>) -> Self {
        let (advertised_host, advertised_port) =
            advertised.unwrap_or_else(|| (bind.ip().to_string(), bind.port()));
        Self {
            name: "PLAINTEXT".to_owned(),
            protocol: SecurityProtocol::Plaintext,
            bind,
            advertised_host,
            advertised_port,
        }
    }
}

/// A listener as configured, before it is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// The host to bind; empty for every interface.
    pub host: String,
    pub port: u16,
    /// From `advertised.listeners`, if it names this listener.
    pub advertised: Option<(String, u16)>,
}

impl ListenerSpec {
    /// The socket address to bind.
    pub fn bind_addr(&self) -> Result<SocketAddr, ConfigError> {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        (host, self.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| ConfigError {
                name: "listeners".into(),
                value: format!("{}://{}:{}", self.name, self.host, self.port),
                reason: format!("cannot resolve host {host:?}"),
            })
    }

    /// The listener once bound at `bound`. Without an advertised address
    /// clients are told the bound one; a wildcard address is no address to
    /// tell, so it becomes this machine's host name, as Kafka does for an
    /// empty host.
    pub fn bound(&self, bound: SocketAddr) -> Listener {
        let (advertised_host, advertised_port) = self.advertised.clone().unwrap_or_else(|| {
            let host = if bound.ip().is_unspecified() {
                local_host_name()
            } else if self.host.is_empty() || self.host.parse::<IpAddr>().is_ok() {
                bound.ip().to_string()
            } else {
                self.host.clone()
            };
            (host, bound.port())
        });
        Listener {
            name: self.name.clone(),
            protocol: self.protocol,
            bind: bound,
            advertised_host,
            advertised_port,
        }
    }
}

fn local_host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

fn error(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        name: name.to_owned(),
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// `NAME:PROTOCOL,…`, as `listener.security.protocol.map`.
pub fn parse_protocol_map(value: &str) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let name = "listener.security.protocol.map";
    let mut map = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (listener, protocol) = entry
            .split_once(':')
            .ok_or_else(|| error(name, value, format!("{entry:?} is not NAME:PROTOCOL")))?;
        let protocol = SecurityProtocol::from_name(protocol).ok_or_else(|| {
            error(
                name,
                value,
                format!(
                    "unknown security protocol {protocol:?}; use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
                ),
            )
        })?;
        if map
            .insert(listener.trim().to_ascii_uppercase(), protocol)
            .is_some()
        {
            return Err(error(name, value, format!("{listener} is mapped twice")));
        }
    }
    Ok(map)
}

/// `NAME://HOST:PORT,…`, as `listeners` and `advertised.listeners` (an
/// IPv6 host in brackets); names upper-cased.
pub fn parse_endpoints(
    config: &str,
    value: &str,
) -> Result<Vec<(String, String, u16)>, ConfigError> {
    let mut endpoints: Vec<(String, String, u16)> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, address) = entry
            .split_once("://")
            .ok_or_else(|| error(config, value, format!("{entry:?} is not NAME://HOST:PORT")))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| error(config, value, format!("{entry:?} has no port")))?;
        let port = port
            .parse()
            .map_err(|_| error(config, value, format!("{entry:?}: invalid port {port:?}")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = name.trim().to_ascii_uppercase();
        if name.is_empty() {
            return Err(error(
                config,
                value,
                format!("{entry:?} has no listener name"),
            ));
        }
        if endpoints.iter().any(|(n, _, _)| *n == name) {
            return Err(error(
                config,
                value,
                format!("each listener must have a different name; {name} appears twice"),
            ));
        }
        endpoints.push((name, host.to_owned(), port));
    }
    Ok(endpoints)
}

/// The Kafka listeners (controller listeners left out) as configured:
/// each name's protocol from the map, its advertised address, if any.
pub fn parse_listeners(
    listeners: &str,
    advertised: Option<&str>,
    protocol_map: &str,
) -> Result<Vec<ListenerSpec>, ConfigError> {
    let map = parse_protocol_map(protocol_map)?;
    let advertised = match advertised {
        Some(value) => parse_endpoints("advertised.listeners", value)?,
        None => Vec::new(),
    };
    let mut specs = Vec::new();
    for (name, host, port) in parse_endpoints("listeners", listeners)? {
        if name == CONTROLLER_LISTENER {
            continue;
        }
        let protocol = *map.get(&name).ok_or_else(|| {
            error(
                "listeners",
                listeners,
                format!(
                    "no security protocol defined for listener {name}; add {name}:PROTOCOL to \
                     listener.security.protocol.map"
                ),
            )
        })?;
        let advertised = advertised
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, host, port)| (host.clone(), *port));
        specs.push(ListenerSpec {
            name,
            protocol,
            host,
            port,
            advertised,
        });
    }
    // A CONTROLLER entry is Kafka's advertised controller endpoint (KIP-853),
    // which a static quorum does without.
    if let Some((name, _, _)) = advertised
        .iter()
        .filter(|(name, _, _)| name != CONTROLLER_LISTENER)
        .find(|(name, _, _)| !specs.iter().any(|spec| spec.name == *name))
    {
        return Err(error(
            "advertised.listeners",
            &format!("{advertised:?}"),
            format!("{name} is not one of the listeners"),
        ));
    }
    if specs.is_empty() {
        return Err(error(
            "listeners",
            listeners,
            "give at least one listener for clients",
        ));
    }
    Ok(specs)
}

/// The controller listener's security protocol: `CONTROLLER` in the
/// protocol map, PLAINTEXT when the map does not name it.
pub fn controller_protocol(protocol_map: &str) -> Result<SecurityProtocol, ConfigError> {
    Ok(parse_protocol_map(protocol_map)?
        .get(CONTROLLER_LISTENER)
        .copied()
        .unwrap_or(SecurityProtocol::Plaintext))
}

/// The controller listener's address in `listeners`, if it names one.
pub fn controller_listener(listeners: &str) -> Result<Option<SocketAddr>, ConfigError> {
    parse_endpoints("listeners", listeners)?
        .into_iter()
        .find(|(name, _, _)| name == CONTROLLER_LISTENER)
        .map(|(_, host, port)| {
            ListenerSpec {
                name: CONTROLLER_LISTENER.to_owned(),
                protocol: SecurityProtocol::Plaintext,
                host,
                port,
                advertised: None,
            }
            .bind_addr()
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_take_their_protocols_from_the_map() {
        let specs = parse_listeners(
            "PLAINTEXT://127.0.0.1:9092,sasl_ssl://0.0.0.0:9094,CONTROLLER://127.0.0.1:9093",
            Some("SASL_SSL://broker1.example:19094"),
            DEFAULT_PROTOCOL_MAP,
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(specs[0].advertised, None);
        assert_eq!(specs[1].name, "SASL_SSL");
        assert_eq!(specs[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(
            specs[1].advertised,
            Some(("broker1.example".to_owned(), 19094))
        );
        let bound = specs[0].bound("127.0.0.1:40000".parse().unwrap());
        assert_eq!(
            (bound.advertised_host.as_str(), bound.advertised_port),
            ("127.0.0.1", 40000)
        );
    }

    #[test]
    fn custom_names_need_a_mapping() {
        let error =
            parse_listeners("INTERNAL://127.0.0.1:9092", None, DEFAULT_PROTOCOL_MAP).unwrap_err();
        assert!(error.reason.contains("INTERNAL:PROTOCOL"), "{error}");
        let specs = parse_listeners(
            "INTERNAL://127.0.0.1:9092,EXTERNAL://[::1]:9094",
            None,
            "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        )
        .unwrap();
        assert_eq!(specs[1].host, "::1");
        assert_eq!(specs[1].protocol, SecurityProtocol::SaslSsl);
    }

    #[test]
    fn bad_listener_lists_are_refused() {
        for (listeners, advertised, map) in [
            ("PLAINTEXT://127.0.0.1", None, DEFAULT_PROTOCOL_MAP),
            ("127.0.0.1:9092", None, DEFAULT_PROTOCOL_MAP),
            (
                "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9095",
                None,
                DEFAULT_PROTOCOL_MAP,
            ),
            (
                "PLAINTEXT://127.0.0.1:9092",
                Some("SSL://h:1"),
                DEFAULT_PROTOCOL_MAP,
            ),
            ("PLAINTEXT://127.0.0.1:9092", None, "PLAINTEXT:TLS"),
            ("CONTROLLER://127.0.0.1:9093", None, DEFAULT_PROTOCOL_MAP),
        ] {
            assert!(
                parse_listeners(listeners, advertised, map).is_err(),
                "{listeners} {advertised:?} {map}"
            );
        }
    }

    #[test]
    fn the_controller_listener_is_found_by_name() {
        assert_eq!(
            controller_listener("PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093").unwrap(),
            Some("127.0.0.1:9093".parse().unwrap())
        );
        assert_eq!(controller_listener("PLAINTEXT://:9092").unwrap(), None);
        assert_eq!(
            controller_protocol(DEFAULT_PROTOCOL_MAP).unwrap(),
            SecurityProtocol::Plaintext
        );
        assert_eq!(
            controller_protocol("CONTROLLER:SSL,PLAINTEXT:PLAINTEXT").unwrap(),
            SecurityProtocol::Ssl
        );
    }
}
