//! Log lines on standard error through `tracing`: text (the default) or
//! one JSON object per line (`--log-format json`), each naming the node
//! once it is known, so that the lines of several nodes in one terminal or
//! one collector can be told apart. `WEIR_LOG` (or `RUST_LOG`) sets the
//! filter.

use std::sync::OnceLock;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Weir's own lines from `info` on; a dependency's (hyper, …) only when
/// something is wrong. None of openraft's: it logs every retry of a peer
/// that is down, several lines every half second, and Weir tells of its
/// peers itself (`weir_meta::raft::peer_health`); `WEIR_LOG=...,openraft=warn`
/// brings them back.
const DEFAULT_FILTER: &str =
    "warn,openraft=off,weir=info,weir_broker=info,weir_log=info,weir_meta=info,weir_client=info";

/// The node every line names, set once `weir serve` knows it.
static NODE_ID: OnceLock<i32> = OnceLock::new();

/// Names `node_id` on every line from now on.
pub(crate) fn set_node(node_id: i32) {
    let _ = NODE_ID.set(node_id);
}

/// How lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `fields` (with the
    /// `message`), `target`, and `node` once known.
    Json,
}

pub(crate) fn init(format: LogFormat) {
    let filter = ["WEIR_LOG", "RUST_LOG"]
        .iter()
        .find_map(|var| tracing_subscriber::EnvFilter::try_from_env(var).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Its own report of a failed write is an eprintln!, which panics
        // when standard error cannot be written (a full disk under the log
        // file): a lost log line must not take the node down.
        .log_internal_errors(false);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .event_format(Node {
                inner: tracing_subscriber::fmt::format(),
                json: false,
            })
            .init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .event_format(Node {
                inner: tracing_subscriber::fmt::format().json(),
                json: true,
            })
            .init(),
    }
}

/// A line format that names the node: `node=1` before a text line, a
/// `"node":1` member first in a JSON one.
struct Node<F> {
    inner: F,
    json: bool,
}

impl<S, N, F> FormatEvent<S, N> for Node<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let Some(node) = NODE_ID.get() else {
            return self.inner.format_event(ctx, writer, event);
        };
        if !self.json {
            write!(writer, "node={node} ")?;
            return self.inner.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"node\":{node},{rest}"),
            None => writer.write_str(&line),
        }
    }
}
