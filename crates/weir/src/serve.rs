//! `weir serve`: settings from defaults, a TOML file, `WEIR_*` variables and
//! flags (each later one wins), then the Kafka listener, the HTTP endpoint
//! and background upkeep until SIGTERM or Ctrl-C.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Arg, ArgMatches, Args};
use tokio::net::TcpListener;
use tokio::sync::watch;
use weir_broker::broker::quorum::Metadata;
use weir_broker::config::listeners::{self, ListenerSpec, SecurityProtocol};
use weir_broker::config::settable;
use weir_broker::security::tls::TlsServer;
use weir_broker::{Broker, BrokerConfig, INERT_CONFIGS};

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Where partition logs and metadata live.
    #[arg(long, env = "WEIR_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The directories of the partition logs, comma-separated (Kafka's
    /// `log.dirs`); a new partition goes to the one holding the fewest
    /// (default: the data directory).
    #[arg(long, env = "WEIR_LOG_DIRS", value_name = "DIR,...")]
    log_dirs: Option<String>,
    /// Kafka listener address: one PLAINTEXT listener (shorthand for
    /// --listeners PLAINTEXT://HOST:PORT).
    #[arg(long, env = "WEIR_LISTEN", value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Host:port advertised to clients (defaults to the listener's); with
    /// --listen only.
    #[arg(long, env = "WEIR_ADVERTISED_ADDR")]
    advertised_addr: Option<String>,
    /// Kafka's `listeners`: NAME://HOST:PORT,… (e.g.
    /// PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094); a CONTROLLER
    /// entry is the controller listener.
    #[arg(long, env = "WEIR_LISTENERS", value_name = "NAME://HOST:PORT,...")]
    listeners: Option<String>,
    /// Kafka's `advertised.listeners`: the addresses clients are told, per
    /// listener name (default: the bound ones).
    #[arg(
        long,
        env = "WEIR_ADVERTISED_LISTENERS",
        value_name = "NAME://HOST:PORT,..."
    )]
    advertised_listeners: Option<String>,
    /// Kafka's `listener.security.protocol.map`: NAME:PROTOCOL,… (default:
    /// PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL map to themselves).
    #[arg(
        long,
        env = "WEIR_LISTENER_SECURITY_PROTOCOL_MAP",
        value_name = "NAME:PROTOCOL,..."
    )]
    listener_security_protocol_map: Option<String>,
    /// Kafka's `inter.broker.listener.name`: the listener other brokers
    /// connect to (default PLAINTEXT, or the only listener).
    #[arg(long, env = "WEIR_INTER_BROKER_LISTENER_NAME", value_name = "NAME")]
    inter_broker_listener_name: Option<String>,
    /// HTTP listener: /ready, /metrics, /v1/cluster. HOST:PORT or
    /// http://HOST:PORT; https://HOST:PORT serves HTTPS with the key store
    /// of the SSL listeners (ssl.keystore.*), which must then be set.
    #[arg(long, env = "WEIR_HTTP_LISTEN", value_name = "[https://]HOST:PORT")]
    http_listen: Option<String>,
    /// This node's id.
    #[arg(long, env = "WEIR_NODE_ID")]
    node_id: Option<i32>,
    /// Controller listener: Raft between the controllers
    /// (default 127.0.0.1:9093).
    #[arg(long, env = "WEIR_CONTROLLER_LISTEN", value_name = "HOST:PORT")]
    controller_listen: Option<String>,
    /// The voters of the controller quorum, ID@HOST:PORT,… (default: this
    /// node alone, at its controller listener).
    #[arg(long, env = "WEIR_CONTROLLERS", value_name = "ID@HOST:PORT,...")]
    controllers: Option<String>,
    /// What this node does: broker, controller, or both (the default).
    #[arg(long, env = "WEIR_ROLES", value_name = "ROLES")]
    roles: Option<String>,
    /// A SCRAM user the cluster's metadata is created with, in
    /// `kafka-storage format --add-scram` syntax:
    /// 'SCRAM-SHA-512=[name=admin,password=admin-secret]' (also
    /// iterations=N, or salt=BASE64 and saltedpassword=BASE64 instead of the
    /// password). Repeatable; applied only by the node that creates the
    /// metadata, so a restart never resets a changed password.
    #[arg(long = "add-scram", value_name = "MECHANISM=[name=...,password=...]")]
    add_scram: Vec<String>,
    /// A file of settings: Kafka's server.properties format (TOML when
    /// its name ends in .toml), with Kafka's broker config names and the
    /// flag names above as keys.
    #[arg(long, env = "WEIR_CONFIG")]
    config: Option<PathBuf>,
    /// How log lines are written: text, or json (one object per line).
    /// Their filter is WEIR_LOG (or RUST_LOG), e.g. WEIR_LOG=debug or
    /// WEIR_LOG=info,weir_broker::mirror=debug.
    #[arg(long, env = "WEIR_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: crate::logging::LogFormat,
}

/// Adds one flag per Kafka broker config: `log.retention.ms` becomes
/// `--log-retention-ms` and `WEIR_LOG_RETENTION_MS`. The flags of configs
/// with no effect on Weir work but stay out of `--help`.
pub(crate) fn add_broker_config_args(mut command: clap::Command) -> clap::Command {
    for def in settable() {
        // Weir's own configs drop their prefix: `weir.remote.storage.url`
        // is `--remote-storage-url` and `WEIR_REMOTE_STORAGE_URL`.
        let name = def.name.strip_prefix("weir.").unwrap_or(def.name);
        let flag = name.replace('.', "-");
        let env = format!("WEIR_{}", name.replace('.', "_").to_uppercase());
        let inert = INERT_CONFIGS.iter().any(|inert| inert.name == def.name);
        command = command.arg(
            Arg::new(def.name)
                .long(flag)
                .env(env)
                .value_name("VALUE")
                .help_heading(heading(def.name))
                .hide(inert)
                .help(format!(
                    "{} [Kafka: {}; default {}]",
                    def.doc,
                    def.name,
                    def.default.unwrap_or("null")
                )),
        );
    }
    command
}

/// The `--help` section of a broker config's flag, by what it is about,
/// so that 250 flags read as a few lists.
fn heading(name: &str) -> &'static str {
    let sections: [(&[&str], &str); 9] = [
        (
            &[
                "log.",
                "num.partitions",
                "default.replication",
                "min.insync",
                "unclean",
                "message.",
                "compression",
            ],
            "Logs and topics (defaults for every topic)",
        ),
        (
            &["replica.", "num.replica", "leader.imbalance", "auto.leader"],
            "Replication",
        ),
        (
            &[
                "offsets.",
                "group.",
                "consumer.",
                "transaction",
                "share.",
                "errors.",
                "producer.id",
            ],
            "Groups, transactions and share groups",
        ),
        (
            &[
                "ssl.",
                "sasl.",
                "security.",
                "authorizer.",
                "super.users",
                "principal.",
                "connections.max.reauth",
            ],
            "Security",
        ),
        (&["remote.", "weir.remote"], "Tiered storage"),
        (
            &["quota.", "client.quota", "max.connection", "connection."],
            "Quotas and connection limits",
        ),
        (
            &["socket.", "queued.max", "request.", "fetch.", "max.request"],
            "Network and requests",
        ),
        (
            &["controller.", "broker.", "metadata.", "node.", "process."],
            "Controller and metadata",
        ),
        (&["weir."], "Weir's own"),
    ];
    sections
        .iter()
        .find(|(prefixes, _)| prefixes.iter().any(|p| name.starts_with(p)))
        .map_or("Other Kafka broker configs", |(_, heading)| heading)
}

/// Settings from the config file, as strings keyed by name: a TOML file
/// when its name ends in `.toml`, else Kafka's `server.properties` format.
fn read_config_file(path: &PathBuf) -> anyhow::Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("config file {} is not valid TOML", path.display()))?;
        let mut settings = BTreeMap::new();
        flatten_toml(String::new(), table, &mut settings)
            .with_context(|| format!("config file {}", path.display()))?;
        Ok(settings)
    } else {
        weir_client::parse_properties(&text).map_err(|e| {
            anyhow::anyhow!(
                "config file {} (read as Kafka's server.properties format; a TOML file's name \
                 ends in .toml): {e}",
                path.display()
            )
        })
    }
}

/// A TOML table as dotted keys: `node.id = 1`, which TOML reads as a table
/// `node` holding `id`, is the setting `node.id`, as Kafka names it.
fn flatten_toml(
    prefix: String,
    table: toml::Table,
    out: &mut BTreeMap<String, String>,
) -> anyhow::Result<()> {
    for (key, value) in table {
        let key = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        let value = match value {
            toml::Value::Table(inner) => {
                flatten_toml(key, inner, out)?;
                continue;
            }
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => bail!("{key}: unsupported value {other}"),
        };
        out.insert(key, value);
    }
    Ok(())
}

/// The names a config file may use besides the broker configs': the
/// startup settings, by flag name and by Kafka's.
const STARTUP_KEYS: &[&str] = &[
    "data-dir",
    "log-dirs",
    "log.dirs",
    "listen",
    "advertised-addr",
    "listeners",
    "advertised.listeners",
    "advertised-listeners",
    "listener.security.protocol.map",
    "listener-security-protocol-map",
    "inter.broker.listener.name",
    "inter-broker-listener-name",
    "http-listen",
    "node-id",
    "node.id",
    "broker.id",
    "controller-listen",
    "controllers",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "roles",
    "process.roles",
];

/// Refuses keys of the config file that name no setting, with the closest
/// names.
fn check_file_keys(path: &std::path::Path, keys: &BTreeMap<String, String>) -> anyhow::Result<()> {
    let known: Vec<&str> = settable()
        .map(|def| def.name)
        .chain(STARTUP_KEYS.iter().copied())
        .collect();
    for key in keys.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let mut close: Vec<(f64, &str)> = known
            .iter()
            .map(|name| (strsim::jaro_winkler(key, name), *name))
            .filter(|(score, _)| *score > 0.85)
            .collect();
        close.sort_by(|a, b| b.0.total_cmp(&a.0));
        let hint = match &close[..] {
            [] => String::new(),
            [(_, one), ..] => format!("; did you mean {one}?"),
        };
        bail!(
            "config file {}: unknown setting {key:?}{hint} (the settings are Kafka's broker \
             configs, as `weir serve --help` lists them)",
            path.display()
        );
    }
    Ok(())
}

struct Settings {
    data_dir: PathBuf,
    log_dirs: Vec<PathBuf>,
    /// The Kafka listeners, to bind.
    listeners: Vec<ListenerSpec>,
    inter_broker_listener: String,
    http_listen: SocketAddr,
    /// `--http-listen https://…`
    http_tls: bool,
    node_id: i32,
    controller_listen: SocketAddr,
    /// `CONTROLLER` in the protocol map.
    controller_protocol: SecurityProtocol,
    controllers: Vec<(u64, SocketAddr)>,
    roles: Roles,
    kafka: BTreeMap<String, String>,
    initial_scram: Vec<weir_meta::ScramUpsertion>,
    /// The Kafka names of the startup configs given explicitly (see
    /// `Startup::given`).
    given: BTreeSet<&'static str>,
}

/// `--http-listen`: `HOST:PORT` or `http://HOST:PORT` for HTTP,
/// `https://HOST:PORT` for HTTPS; true for HTTPS.
fn parse_http_listen(value: &str) -> anyhow::Result<(SocketAddr, bool)> {
    let value = value.trim();
    let (address, tls) = if let Some(rest) = value.strip_prefix("https://") {
        (rest, true)
    } else if let Some(rest) = value.strip_prefix("http://") {
        (rest, false)
    } else if value.contains("://") {
        bail!("http-listen {value:?}: the scheme must be http:// or https://");
    } else {
        (value, false)
    };
    let address = address.strip_suffix('/').unwrap_or(address);
    let address = std::net::ToSocketAddrs::to_socket_addrs(address)
        .ok()
        .and_then(|mut addrs| addrs.next())
        .with_context(|| {
            format!("http-listen: cannot resolve {value:?}; use [https://]HOST:PORT")
        })?;
    Ok((address, tls))
}

/// `log.dirs`: directories separated by commas, as Kafka reads them.
fn parse_log_dirs(value: &str) -> anyhow::Result<Vec<PathBuf>> {
    let dirs: Vec<PathBuf> = value
        .split(',')
        .map(str::trim)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        bail!("log-dirs: give at least one directory, or leave it unset for the data directory");
    }
    Ok(dirs)
}

/// `1@host:9093,2@host:9093`: controller ids and addresses.
fn parse_controllers(value: &str) -> anyhow::Result<Vec<(u64, SocketAddr)>> {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|voter| {
            let (id, addr) = voter
                .split_once('@')
                .with_context(|| format!("controllers: {voter:?} is not ID@HOST:PORT"))?;
            let id = id
                .parse()
                .with_context(|| format!("controllers: invalid id in {voter:?}"))?;
            let addr = std::net::ToSocketAddrs::to_socket_addrs(addr)
                .ok()
                .and_then(|mut addrs| addrs.next())
                .with_context(|| format!("controllers: invalid address in {voter:?}"))?;
            Ok((id, addr))
        })
        .collect()
}

fn settings(args: ServeArgs, matches: &ArgMatches) -> anyhow::Result<Settings> {
    let mut file = match &args.config {
        Some(path) => {
            let file = read_config_file(path)?;
            check_file_keys(path, &file)?;
            file
        }
        None => BTreeMap::new(),
    };
    let mut take = |key: &str| file.remove(key);
    let mut given = BTreeSet::new();
    let mut note = |names: &[&'static str], is_given: bool| {
        if is_given {
            given.extend(names);
        }
    };
    let data_dir = args
        .data_dir
        .or_else(|| take("data-dir").map(PathBuf::from));
    let log_dirs = args
        .log_dirs
        .or_else(|| take("log-dirs"))
        .or_else(|| take("log.dirs"));
    note(&["log.dirs"], data_dir.is_some() || log_dirs.is_some());
    let log_dirs = match log_dirs {
        Some(value) => parse_log_dirs(&value)?,
        None => Vec::new(),
    };
    let data_dir = data_dir.unwrap_or_else(|| PathBuf::from("./weir-data"));
    // A host name or an IP address, as Kafka takes them.
    let parse_addr = |value: Option<String>, key: &str| -> anyhow::Result<Option<SocketAddr>> {
        value
            .map(|v| {
                std::net::ToSocketAddrs::to_socket_addrs(v.trim())
                    .ok()
                    .and_then(|mut addrs| addrs.next())
                    .with_context(|| {
                        format!("{key}: cannot resolve {v:?}; give HOST:PORT (a host name or an IP address)")
                    })
            })
            .transpose()
    };
    let listen = parse_addr(args.listen.or_else(|| take("listen")), "listen")?;
    let mut kafka_named = |flag: Option<String>, key: &str| {
        flag.or_else(|| take(key))
            .or_else(|| take(&key.replace('.', "-")))
    };
    let listeners = kafka_named(args.listeners, "listeners");
    let advertised_listeners = kafka_named(args.advertised_listeners, "advertised.listeners");
    let protocol_map = kafka_named(
        args.listener_security_protocol_map,
        "listener.security.protocol.map",
    );
    let inter_broker = kafka_named(
        args.inter_broker_listener_name,
        "inter.broker.listener.name",
    );
    note(&["listeners"], listen.is_some() || listeners.is_some());
    note(&["advertised.listeners"], advertised_listeners.is_some());
    note(&["listener.security.protocol.map"], protocol_map.is_some());
    note(&["inter.broker.listener.name"], inter_broker.is_some());
    let http_listen = args.http_listen.or_else(|| take("http-listen"));
    note(&["weir.http.listener"], http_listen.is_some());
    let (http_listen, http_tls) = match http_listen {
        Some(value) => parse_http_listen(&value)?,
        None => (([127, 0, 0, 1], 9644).into(), false),
    };
    let node_id = match args.node_id {
        Some(id) => Some(id),
        None => take("node-id")
            .or_else(|| take("node.id"))
            .or_else(|| take("broker.id"))
            .map(|v| v.parse().with_context(|| format!("node.id: invalid {v:?}")))
            .transpose()?,
    };
    note(&["node.id", "broker.id"], node_id.is_some());
    let node_id = node_id.unwrap_or(1);
    let controller_listen = parse_addr(
        args.controller_listen.or_else(|| take("controller-listen")),
        "controller-listen",
    )?;
    let listed_controller = match &listeners {
        Some(value) => listeners::controller_listener(value)?,
        None => None,
    };
    if controller_listen.is_some() && listed_controller.is_some() {
        bail!("give the controller listener once: --controller-listen, or CONTROLLER:// in --listeners");
    }
    let controller_listen = controller_listen.or(listed_controller);
    note(&["listeners"], controller_listen.is_some());
    let controller_listen = controller_listen.unwrap_or(([127, 0, 0, 1], 9093).into());
    let controller_protocol = listeners::controller_protocol(
        protocol_map
            .as_deref()
            .unwrap_or(listeners::DEFAULT_PROTOCOL_MAP),
    )?;
    // Weir's controller listener is the one named CONTROLLER.
    if let Some(names) = take("controller.listener.names") {
        let names: Vec<String> = names
            .split(',')
            .map(|n| n.trim().to_ascii_uppercase())
            .filter(|n| !n.is_empty())
            .collect();
        if names != [listeners::CONTROLLER_LISTENER] {
            bail!(
                "controller.listener.names={}: the controller listener must be the one named \
                 CONTROLLER (CONTROLLER://HOST:PORT in listeners)",
                names.join(",")
            );
        }
    }
    let voters = args
        .controllers
        .or_else(|| take("controllers"))
        .or_else(|| take("controller.quorum.voters"));
    // Kafka 4's dynamic quorum (KIP-853) names only where to find it; one
    // address, this node's own controller listener, is a quorum of one
    // (`kafka-storage format --standalone`).
    let bootstrap_servers = take("controller.quorum.bootstrap.servers");
    let controllers = match (voters, bootstrap_servers) {
        (Some(value), _) => {
            note(&["controller.quorum.voters"], true);
            parse_controllers(&value)?
        }
        (None, Some(servers)) => {
            let servers: Vec<&str> = servers
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            let own_port = controller_listen.port();
            match servers[..] {
                [one]
                    if one
                        .rsplit_once(':')
                        .is_some_and(|(_, port)| port == own_port.to_string()) =>
                {
                    Vec::new()
                }
                _ => bail!(
                    "controller.quorum.bootstrap.servers={}: Weir's controller quorum is static; \
                     name its voters as controller.quorum.voters=ID@HOST:PORT,... (a single \
                     node needs neither)",
                    servers.join(",")
                ),
            }
        }
        (None, None) => Vec::new(),
    };
    let roles = args
        .roles
        .or_else(|| take("roles"))
        .or_else(|| take("process.roles"));
    note(&["process.roles"], roles.is_some());
    let roles = parse_roles(roles.as_deref().unwrap_or("broker,controller"))?;
    let listed = controllers.iter().any(|(id, _)| *id == node_id as u64);
    match (roles.controller, controllers.is_empty(), listed) {
        (_, true, _) if roles != Roles::BOTH => bail!(
            "--roles {roles}: a node with one role belongs to a cluster; name its controllers \
             with --controllers"
        ),
        (true, false, false) => bail!(
            "node {node_id} has the controller role but is not among --controllers; list it \
             there, or give it --roles broker"
        ),
        (false, false, true) => {
            bail!("node {node_id} is among --controllers, so it must have the controller role")
        }
        _ => {}
    }
    let advertised = args.advertised_addr.or_else(|| take("advertised-addr"));
    note(&["advertised.listeners"], advertised.is_some());
    let advertised_shorthand = advertised
        .map(|value| {
            let (host, port) = value
                .rsplit_once(':')
                .with_context(|| format!("advertised-addr {value:?} must be HOST:PORT"))?;
            let port = port
                .parse()
                .with_context(|| format!("advertised-addr {value:?}: invalid port"))?;
            anyhow::Ok((host.to_owned(), port))
        })
        .transpose()?;
    let listeners = match (listen, listeners) {
        (Some(_), Some(_)) => bail!("give --listen or --listeners, not both"),
        (_, Some(value)) => {
            if advertised_shorthand.is_some() {
                bail!("with --listeners, give the advertised addresses as --advertised-listeners");
            }
            listeners::parse_listeners(
                &value,
                advertised_listeners.as_deref(),
                protocol_map
                    .as_deref()
                    .unwrap_or(listeners::DEFAULT_PROTOCOL_MAP),
            )?
        }
        (listen, None) => {
            if advertised_listeners.is_some() {
                bail!("--advertised-listeners goes with --listeners; with --listen give --advertised-addr");
            }
            let listen = listen.unwrap_or(([127, 0, 0, 1], 9092).into());
            vec![ListenerSpec {
                name: "PLAINTEXT".to_owned(),
                protocol: SecurityProtocol::Plaintext,
                host: listen.ip().to_string(),
                port: listen.port(),
                advertised: advertised_shorthand,
            }]
        }
    };
    // Kafka's default is PLAINTEXT; a broker without that listener talks
    // to the others on its only one.
    let inter_broker_listener = match inter_broker {
        Some(name) => name.trim().to_ascii_uppercase(),
        None if listeners.len() == 1 => listeners[0].name.clone(),
        None => "PLAINTEXT".to_owned(),
    };
    let initial_scram = args
        .add_scram
        .iter()
        .map(|entry| parse_add_scram(entry))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut kafka = file;
    for def in settable() {
        if let Some(value) = matches.get_one::<String>(def.name) {
            kafka.insert(def.name.to_owned(), value.clone());
        }
    }
    Ok(Settings {
        data_dir,
        log_dirs,
        listeners,
        inter_broker_listener,
        http_listen,
        http_tls,
        node_id,
        controller_listen,
        controller_protocol,
        controllers,
        roles,
        kafka,
        initial_scram,
        given,
    })
}

/// One `--add-scram`: `SCRAM-SHA-256=[name=alice,password=secret]`, with
/// optional `iterations=N` (default 4096), or `salt=` and `saltedpassword=`
/// (base64) in place of the password, as `kafka-storage format` takes it.
fn parse_add_scram(entry: &str) -> anyhow::Result<weir_meta::ScramUpsertion> {
    use base64::Engine;
    use weir_auth::{ScramCredential, ScramMechanism};
    let syntax = "use MECHANISM=[name=USER,password=PASSWORD]";
    let (mechanism, fields) = entry
        .split_once('=')
        .with_context(|| format!("--add-scram {entry:?}: {syntax}"))?;
    let mechanism = ScramMechanism::from_name(mechanism.trim()).with_context(|| {
        format!("--add-scram {entry:?}: unknown mechanism; use SCRAM-SHA-256 or SCRAM-SHA-512")
    })?;
    let fields = fields
        .trim()
        .strip_prefix('[')
        .and_then(|f| f.strip_suffix(']'))
        .with_context(|| format!("--add-scram {entry:?}: {syntax}"))?;
    let mut values = BTreeMap::new();
    for field in fields.split(',').filter(|f| !f.trim().is_empty()) {
        let (key, value) = field
            .split_once('=')
            .with_context(|| format!("--add-scram {entry:?}: {field:?} is not key=value"))?;
        let value = value.trim().trim_matches('"');
        values.insert(key.trim().to_ascii_lowercase(), value.to_owned());
    }
    let name = values
        .remove("name")
        .filter(|n| !n.is_empty())
        .with_context(|| format!("--add-scram {entry:?}: give name=USER"))?;
    let iterations: u32 = match values.remove("iterations") {
        Some(n) => n
            .parse()
            .with_context(|| format!("--add-scram {entry:?}: invalid iterations {n:?}"))?,
        None => mechanism.min_iterations(),
    };
    if !(mechanism.min_iterations()..=mechanism.max_iterations()).contains(&iterations) {
        bail!(
            "--add-scram {entry:?}: iterations must be between {} and {}",
            mechanism.min_iterations(),
            mechanism.max_iterations()
        );
    }
    let decode = |key: &str, value: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(value)
            .with_context(|| format!("--add-scram {entry:?}: {key} is not base64"))
    };
    let credential = match (
        values.remove("password"),
        values.remove("salt"),
        values.remove("saltedpassword"),
    ) {
        (Some(password), None, None) => {
            ScramCredential::from_password(mechanism, &password, iterations)
        }
        (None, Some(salt), Some(salted)) => ScramCredential::from_salted_password(
            mechanism,
            &decode("saltedpassword", &salted)?,
            decode("salt", &salt)?,
            iterations,
        ),
        _ => bail!("--add-scram {entry:?}: give password=, or salt= and saltedpassword="),
    };
    if let Some(key) = values.keys().next() {
        bail!("--add-scram {entry:?}: unknown field {key:?}");
    }
    Ok(weir_meta::ScramUpsertion {
        user: name,
        mechanism,
        credential,
    })
}

/// What a node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Roles {
    /// Serves the Kafka protocol and hosts partitions.
    broker: bool,
    /// Votes in the controller quorum.
    controller: bool,
}

impl Roles {
    const BOTH: Roles = Roles {
        broker: true,
        controller: true,
    };
}

impl std::fmt::Display for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.broker, self.controller) {
            (true, true) => f.write_str("broker,controller"),
            (true, false) => f.write_str("broker"),
            _ => f.write_str("controller"),
        }
    }
}

/// `broker`, `controller`, or both separated by a comma.
fn parse_roles(value: &str) -> anyhow::Result<Roles> {
    let mut roles = Roles {
        broker: false,
        controller: false,
    };
    for role in value.split(',').map(str::trim) {
        match role {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            other => bail!("roles: unknown role {other:?}; use broker, controller or both"),
        }
    }
    if !roles.broker && !roles.controller {
        bail!("roles: give broker, controller or both");
    }
    Ok(roles)
}

pub(crate) fn run(args: ServeArgs, matches: &ArgMatches) -> anyhow::Result<()> {
    let settings = settings(args, matches)?;
    crate::logging::set_node(settings.node_id);
    raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(settings))
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    // Checked before anything is bound: a bad setting is the error shown,
    // not a port another process holds.
    let unbound_listeners = settings
        .listeners
        .iter()
        .map(|spec| Ok(spec.bound(spec.bind_addr()?)))
        .collect::<Result<Vec<_>, weir_broker::ConfigError>>()?;
    let mut unbound = BrokerConfig::new(
        settings.node_id,
        settings.data_dir.clone(),
        unbound_listeners[0].bind,
        None,
        settings.http_listen,
        &settings.kafka,
    )?
    .with_listeners(unbound_listeners, &settings.inter_broker_listener)?;
    unbound.startup.controller_protocol = settings.controller_protocol;
    if settings.roles.broker && settings.http_tls && unbound.security.tls.key.is_none() {
        bail!(
            "--http-listen https://{} needs a key store: set ssl.keystore.location (key and \
             certificate chain in one PEM file), or ssl.keystore.key and \
             ssl.keystore.certificate.chain",
            settings.http_listen
        );
    }
    if !settings.roles.broker {
        return serve_controller_only(settings, unbound).await;
    }
    let mut bound = Vec::new();
    for spec in &settings.listeners {
        let addr = spec.bind_addr()?;
        let socket = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} ({} listener)", spec.name))?;
        let listener = spec.bound(socket.local_addr()?);
        bound.push((listener, socket));
    }
    let listen = bound[0].0.bind;
    let http_listener = TcpListener::bind(settings.http_listen)
        .await
        .with_context(|| format!("cannot listen on {} (HTTP)", settings.http_listen))?;
    let http_addr = http_listener.local_addr()?;
    let mut config = BrokerConfig::new(
        settings.node_id,
        settings.data_dir.clone(),
        listen,
        None,
        http_addr,
        &settings.kafka,
    )?
    .with_listeners(
        bound.iter().map(|(listener, _)| listener.clone()).collect(),
        &settings.inter_broker_listener,
    )?;
    config.startup.log_dirs = settings.log_dirs;
    config.startup.http_tls = settings.http_tls;
    config.startup.controller_listen = settings.controller_listen;
    config.startup.controller_protocol = settings.controller_protocol;
    config.startup.controllers = settings.controllers;
    config.startup.is_controller = settings.roles.controller;
    config.startup.given = settings.given;
    config.startup.initial_scram = settings.initial_scram;
    let broker = {
        let config = config.clone();
        let opened = tokio::task::spawn_blocking(move || Broker::open(config)).await?;
        match opened {
            // Not the data directory's fault: said as it is.
            Err(error @ weir_broker::BrokerError::ControllerListen { .. }) => {
                return Err(error.into())
            }
            other => other.with_context(|| {
                format!("cannot open data directory {}", settings.data_dir.display())
            })?,
        }
    };
    broker.start_groups();
    let (stop, stopped) = watch::channel(false);
    let http = {
        use weir_broker::server::http::{HttpPeer, HttpsListener};
        let service = weir_broker::server::http::router(broker.clone())
            .into_make_service_with_connect_info::<HttpPeer>();
        let mut stopped = stopped.clone();
        let stopped = async move {
            let _ = stopped.changed().await;
        };
        if config.startup.http_tls {
            let listener = HttpsListener::new(http_listener, broker.clone())?;
            tokio::spawn(async move {
                axum::serve(listener, service)
                    .with_graceful_shutdown(stopped)
                    .await
            })
        } else {
            tokio::spawn(async move {
                axum::serve(http_listener, service)
                    .with_graceful_shutdown(stopped)
                    .await
            })
        }
    };
    let maintenance = tokio::spawn(weir_broker::broker::maintenance::run(
        broker.clone(),
        stopped.clone(),
    ));
    let log_cleaner = tokio::spawn(weir_broker::broker::log_cleaner::run(
        broker.clone(),
        stopped.clone(),
    ));
    let tiering = tokio::spawn(weir_broker::broker::tiering::run(
        broker.clone(),
        stopped.clone(),
    ));
    let mirroring = tokio::spawn(weir_broker::broker::mirroring::run(
        broker.clone(),
        stopped.clone(),
    ));
    let listed: Vec<String> = bound
        .iter()
        .map(|(listener, _)| format!("{}://{}", listener.name, listener.bind))
        .collect();
    let kafka: Vec<_> = bound
        .into_iter()
        .map(|(listener, socket)| {
            let broker = broker.clone();
            let stopped = stopped.clone();
            tokio::spawn(async move {
                weir_broker::server::run_listener(broker, &listener.name, socket, stopped).await
            })
        })
        .collect();
    broker.set_serving(true);
    announce(format_args!(
        "weir ready: kafka={listen} http={http_addr} node={} data={} listeners={}",
        config.startup.node_id,
        config.startup.data_dir.display(),
        listed.join(",")
    ));
    wait_for_signal().await;
    tracing::info!("shutting down: handing leaderships to other replicas");
    let handover = {
        let broker = broker.clone();
        tokio::task::spawn_blocking(move || broker.controlled_shutdown()).await?
    };
    if let Err(error) = handover {
        tracing::warn!(%error, "controlled shutdown failed; leaderships move when this broker's session expires");
    }
    broker.set_serving(false);
    let _ = stop.send(true);
    for listener in kafka {
        let _ = listener.await;
    }
    let _ = maintenance.await;
    let _ = log_cleaner.await;
    // A copy cut short is cleaned up by the partition's next leader.
    tiering.abort();
    let _ = tiering.await;
    // A fetch cut short is fetched again by the partition's next leader.
    mirroring.abort();
    let _ = mirroring.await;
    let _ = http.await;
    tokio::task::spawn_blocking(move || broker.shutdown()).await?;
    tracing::info!("stopped cleanly");
    Ok(())
}

/// A node that only votes in the controller quorum: no Kafka listener, no
/// partitions, no HTTP endpoint.
async fn serve_controller_only(settings: Settings, config: BrokerConfig) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind(settings.controller_listen).with_context(|| {
        format!(
            "cannot listen on {} (controller)",
            settings.controller_listen
        )
    })?;
    let controller_addr = listener.local_addr()?;
    let dir = settings.data_dir.join("controller");
    let node_id = settings.node_id;
    let tls = if config.startup.controller_protocol.is_tls() {
        Some(Arc::new(
            TlsServer::new(config.security.tls.clone()).context("TLS")?,
        ))
    } else {
        None
    };
    let controller_settings = config.controller_settings(tls.clone())?;
    let leader_wait =
        std::time::Duration::from_millis(config.initial_broker_registration_timeout_ms);
    let reload = tls.map(|tls| tokio::spawn(reload_certificates(tls)));
    let metadata = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Metadata::start(
            &dir,
            node_id,
            listener,
            settings.controllers,
            true,
            controller_settings,
            leader_wait,
        )
        .context("cannot start the controller")
    })
    .await??;
    announce(format_args!(
        "weir ready: controller={controller_addr} node={node_id} data={}",
        settings.data_dir.display()
    ));
    wait_for_signal().await;
    if let Some(reload) = reload {
        reload.abort();
    }
    tokio::task::spawn_blocking(move || metadata.shutdown()).await?;
    tracing::info!("stopped cleanly");
    Ok(())
}

/// Reads the key and trust stores again when they change, as a broker's
/// maintenance does (a controller-only node has none).
async fn reload_certificates(tls: Arc<TlsServer>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tick.tick().await;
        let files = tls.clone();
        match tokio::task::spawn_blocking(move || files.reload_if_changed()).await {
            Ok(Ok(true)) => tracing::info!(
                "TLS certificates changed on disk: new controller connections use them"
            ),
            Ok(Err(error)) => {
                tracing::warn!(%error, "TLS files changed but cannot be used; the previous ones stay in force")
            }
            _ => {}
        }
    }
}

async fn wait_for_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// Prints the ready line. A node whose output cannot be written (a full
/// disk under its log file, a closed pipe) goes on serving: losing the line
/// must not take the broker down, as `println!` would by panicking.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        tracing::warn!(%error, "cannot write the ready line to standard output");
    }
}

/// Raises the soft limit of open files to the hard one, as Kafka's
/// packaging asks operators to: a broker holds descriptors for segment
/// files and connections, and the usual soft limit runs out long before the
/// hard one.
fn raise_open_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(error) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!(soft, hard, %error, "cannot raise the open-file limit");
            }
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "cannot read the open-file limit"),
    }
}
