//! The operator's CLI: `weir topic`, `weir produce`, `weir consume`,
//! `weir group`, `weir cluster`, `weir mirror`. Each command is a Kafka
//! client (through `weir-client`) of the broker named by `--bootstrap`, and
//! of brokers' HTTP endpoints where the Kafka protocol has no request.

pub(crate) mod acl;
mod broker_http;
pub(crate) mod cluster;
pub(crate) mod consume;
pub(crate) mod dlq;
pub(crate) mod group;
pub(crate) mod mirror;
pub(crate) mod produce;
pub(crate) mod share_group;
pub(crate) mod topic;
pub(crate) mod txn;
pub(crate) mod user;

use std::fmt::Write as _;
use std::future::Future;
use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;
use weir_client::{
    parse_properties, Client, ClientConfig, ClientError, Cluster, ResponseError, SecurityConfig,
    TopicMetadata,
};

/// Where the broker is, and how to connect to it.
#[derive(Args, Debug, Clone)]
pub(crate) struct Connection {
    /// A broker's Kafka address, HOST:PORT (several separated by commas).
    #[arg(
        long,
        global = true,
        env = "WEIR_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT"
    )]
    pub(crate) bootstrap: String,
    /// A Kafka client properties file, as Kafka's tools take it: TLS and
    /// SASL settings by the Java client's or librdkafka's names
    /// (security.protocol, ssl.ca.location or ssl.truststore.location,
    /// sasl.mechanism, sasl.username and sasl.password or
    /// sasl.jaas.config, ...).
    #[arg(long, global = true, env = "WEIR_COMMAND_CONFIG", value_name = "FILE")]
    pub(crate) command_config: Option<PathBuf>,
}

impl Connection {
    pub(crate) async fn connect(&self) -> anyhow::Result<Client> {
        let security = self.security()?;
        Ok(
            Client::connect_with_security(&self.bootstrap, ClientConfig::default(), security)
                .await?,
        )
    }

    /// Connects to the cluster: requests about a partition go to its leader.
    pub(crate) async fn cluster(&self) -> anyhow::Result<Cluster> {
        let security = self.security()?;
        Ok(
            Cluster::connect_with_security(&self.bootstrap, ClientConfig::default(), security)
                .await?,
        )
    }

    /// The security settings of `--command-config` (none without it).
    /// Properties it does not use are warned about on stderr, as Kafka's
    /// tools log them, since a misspelt name would otherwise go unnoticed.
    pub(crate) fn security(&self) -> anyhow::Result<SecurityConfig> {
        let Some(path) = &self.command_config else {
            return Ok(SecurityConfig::plaintext());
        };
        let file = || format!("--command-config {}", path.display());
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", file()))?;
        let properties = parse_properties(&text).with_context(file)?;
        let security = SecurityConfig::from_properties(&properties).with_context(file)?;
        let unused = security.unused_properties(&properties);
        if !unused.is_empty() {
            eprintln!(
                "warning: {}: ignoring properties Weir does not use: {}",
                file(),
                unused.join(", ")
            );
        }
        Ok(security)
    }
}

/// Runs a command on a single-threaded runtime.
/// Writes to standard output. A closed pipe (`weir topic list | head`) is
/// an error the command returns (and `main` ends quietly on), never a
/// panic as `print!` makes it.
pub(crate) fn print(text: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write;
    std::io::stdout().lock().write_fmt(text)
}

/// [`print`] and a newline.
pub(crate) fn print_line(text: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout.write_fmt(text)?;
    stdout.write_all(b"\n")
}

pub(crate) fn block_on<F: Future<Output = anyhow::Result<()>>>(future: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(future)
}

/// A client error about `topic`, said the way an operator thinks of it.
pub(crate) fn topic_error(error: ClientError, topic: &str) -> anyhow::Error {
    match error.kafka_error() {
        Some(ResponseError::UnknownTopicOrPartition) => {
            anyhow!("topic '{topic}' does not exist")
        }
        Some(ResponseError::TopicAlreadyExists) => anyhow!("topic '{topic}' already exists"),
        _ => anyhow::Error::new(error),
    }
}

/// The metadata of one topic, or "topic 'x' does not exist".
pub(crate) async fn topic_metadata(
    client: &mut Client,
    topic: &str,
) -> anyhow::Result<TopicMetadata> {
    let metadata = client
        .metadata(Some(&[topic.to_owned()]))
        .await
        .map_err(|e| topic_error(e, topic))?;
    metadata
        .topic(topic)
        .cloned()
        .ok_or_else(|| anyhow!("topic '{topic}' does not exist"))
}

/// Checks `--partition` against the topic.
pub(crate) fn check_partition(topic: &TopicMetadata, partition: i32) -> anyhow::Result<()> {
    let count = topic.partitions.len();
    if !topic.partitions.iter().any(|p| p.partition == partition) {
        anyhow::bail!(
            "topic '{}' has no partition {partition} (it has {count}: 0 to {})",
            topic.name,
            count.saturating_sub(1)
        );
    }
    Ok(())
}

/// `rows` (the first one the header) as left-aligned columns two spaces
/// apart, one line each, without trailing spaces.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
