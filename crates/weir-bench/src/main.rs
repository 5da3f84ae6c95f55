//! `weir-bench`: throughput and latency of a Kafka broker as librdkafka sees
//! it, and a null broker that gives the same client's ceiling.
//!
//! ```sh
//! weir-bench produce --topic t --records 1000000 --record-size 100 --acks 1
//! weir-bench consume --topic t --records 1000000
//! weir-bench e2e --topic e --rate 50000 --duration 30s --acks all [--keys 1000]
//! weir-bench null-broker --listen 127.0.0.1:9093
//! weir-bench create-topics --topics 1000 --partitions 10
//! ```
//!
//! Every run prints a summary table, or with `--json` exactly one JSON
//! object on stdout (see `report.rs`). `scripts/bench.sh` runs the standard
//! suite against Weir and the null broker; `BENCHMARKS.md` has its figures.

mod consume;
mod create_topics;
mod e2e;
mod kafka;
mod null_broker;
mod produce;
mod progress;
mod report;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::kafka::{Acks, Compression};

#[derive(Debug, Parser)]
#[command(name = "weir-bench", version, about)]
struct Cli {
    /// The broker to benchmark, `HOST:PORT`.
    #[arg(long, global = true, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Print exactly one JSON object on stdout instead of the summary table
    /// (and no progress bar).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Produce as fast as the client can: records/s, MB/s and the latency
    /// from send to delivery report.
    Produce(ProduceArgs),
    /// Consume a topic from the beginning: records/s and MB/s.
    Consume(ConsumeArgs),
    /// An open-loop producer at a fixed rate and a consumer: end-to-end
    /// latency from each record's intended send time.
    E2e(E2eArgs),
    /// A Kafka endpoint that acknowledges every produce and stores nothing.
    NullBroker(NullBrokerArgs),
    /// Create many topics through the admin API: the time from the first
    /// CreateTopics request to the last answer.
    CreateTopics(CreateTopicsArgs),
}

#[derive(Debug, Args)]
struct CreateTopicsArgs {
    /// Topics to create, named `PREFIX-0`, `PREFIX-1`, …
    #[arg(long)]
    topics: usize,
    /// Partitions of each topic.
    #[arg(long, default_value_t = 10)]
    partitions: i32,
    /// Replication factor of each topic.
    #[arg(long, default_value_t = 1)]
    replication_factor: i32,
    /// Topics named in one CreateTopics request (default: all in one).
    #[arg(long, default_value_t = usize::MAX)]
    per_request: usize,
    /// The name prefix.
    #[arg(long, default_value = "bench-topic")]
    prefix: String,
    /// The requests' `timeout_ms` (`30s`, `1m`, seconds).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    operation_timeout: Duration,
}

/// Settings of the producer shared by `produce` and `e2e`.
#[derive(Debug, Clone, Args)]
struct ProducerArgs {
    /// Value size of each record in bytes (e2e: at least 8, the timestamp).
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// `acks` of the producer: 0, 1 or all (-1).
    #[arg(long, value_enum, default_value_t = Acks::All, allow_hyphen_values = true)]
    acks: Acks,
    /// `compression.type` of the producer.
    #[arg(long, value_enum, default_value_t = Compression::None)]
    compression: Compression,
    /// `linger.ms` of the producer (librdkafka's default if not given: 5).
    #[arg(long)]
    linger_ms: Option<u64>,
    /// `batch.size` of the producer in bytes (librdkafka's default if not
    /// given: 1000000).
    #[arg(long)]
    batch_size: Option<u64>,
    /// Any other librdkafka property, `NAME=VALUE` (repeatable).
    #[arg(short = 'X', long = "property", value_name = "NAME=VALUE")]
    properties: Vec<String>,
}

#[derive(Debug, Args)]
struct ProduceArgs {
    /// Topic to write to (auto-created by the broker if it allows it).
    #[arg(long)]
    topic: String,
    /// Records to produce, in all.
    #[arg(long)]
    records: u64,
    /// Use a fixed set of this many keys, record `i` getting key `i mod K`
    /// (default: no keys).
    #[arg(long, value_name = "K")]
    keys: Option<usize>,
    /// Producers, each with its own librdkafka instance and sending thread.
    #[arg(long, default_value_t = 1)]
    producers: usize,
    /// Send in transactions of this many records each (every producer
    /// transactional, with its own `transactional.id`); a record's latency
    /// then runs to its transaction's commit.
    #[arg(long, value_name = "N")]
    transaction_records: Option<u64>,
    #[command(flatten)]
    producer: ProducerArgs,
}

#[derive(Debug, Args)]
struct ConsumeArgs {
    /// Topic to read.
    #[arg(long)]
    topic: String,
    /// Stop after this many records.
    #[arg(long)]
    records: u64,
    /// Join this consumer group (subscribe, `auto.offset.reset=earliest`);
    /// without it every partition is assigned from its beginning.
    #[arg(long)]
    group: Option<String>,
    /// Give up when no record arrives for this long (`30s`, `1m`, seconds).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Any other librdkafka property, `NAME=VALUE` (repeatable).
    #[arg(short = 'X', long = "property", value_name = "NAME=VALUE")]
    properties: Vec<String>,
}

#[derive(Debug, Args)]
struct E2eArgs {
    /// Topic to write to and read from.
    #[arg(long)]
    topic: String,
    /// Records per second, scheduled by the clock whatever the broker does.
    #[arg(long)]
    rate: u64,
    /// How long to produce: `30s`, `1m`, `500ms` or plain seconds.
    #[arg(long, value_parser = parse_duration)]
    duration: Duration,
    /// Use a fixed set of this many keys, record `i` getting key `i mod K`
    /// (default: no keys), as a compacted topic expects.
    #[arg(long, value_name = "K")]
    keys: Option<usize>,
    /// The broker the consumer reads from (default: `--bootstrap`): a
    /// mirror's destination cluster, for the latency of the mirror.
    #[arg(long, value_name = "HOST:PORT")]
    consume_bootstrap: Option<String>,
    #[command(flatten)]
    producer: ProducerArgs,
}

#[derive(Debug, Args)]
struct NullBrokerArgs {
    /// Address to listen on (`:0` picks a free port; the first line on
    /// stdout says which).
    #[arg(long, default_value = "127.0.0.1:9093")]
    listen: String,
    /// Partitions of every topic.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Value size of the records every fetch returns.
    #[arg(long, default_value_t = 100)]
    record_size: usize,
}

/// `30s`, `1m`, `500ms`, `2h` or plain (possibly fractional) seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 30s, 1m, 500ms, 45)"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit {other:?} in {text:?} (ms, s, m, h)")),
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("{text:?} is not a positive duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("weir-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let report = match cli.command {
        Command::Produce(args) => produce::run(&cli.bootstrap, &args, cli.json)?,
        Command::Consume(args) => consume::run(&cli.bootstrap, &args, cli.json)?,
        Command::E2e(args) => e2e::run(&cli.bootstrap, &args, cli.json)?,
        Command::NullBroker(args) => {
            null_broker::run(&args.listen, args.partitions, args.record_size)?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::CreateTopics(args) => {
            create_topics::run(&cli.bootstrap, &args, cli.json)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    report.print(cli.json);
    Ok(match report.failure() {
        None => ExitCode::SUCCESS,
        Some(reason) => {
            eprintln!("weir-bench: {reason}");
            ExitCode::FAILURE
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn acks_parse_as_kafka_spells_them() {
        let cli = Cli::try_parse_from([
            "weir-bench",
            "produce",
            "--topic",
            "t",
            "--records",
            "1",
            "--acks",
            "0",
            "--bootstrap",
            "h:1",
        ])
        .unwrap();
        assert_eq!(cli.bootstrap, "h:1");
        let Command::Produce(args) = cli.command else {
            panic!("not produce")
        };
        assert_eq!(args.producer.acks, Acks::Zero);
        for (text, acks) in [("1", Acks::One), ("all", Acks::All), ("-1", Acks::All)] {
            let cli = Cli::try_parse_from([
                "weir-bench",
                "e2e",
                "--topic",
                "t",
                "--rate",
                "10",
                "--duration",
                "1s",
                "--acks",
                text,
            ])
            .unwrap();
            let Command::E2e(args) = cli.command else {
                panic!("not e2e")
            };
            assert_eq!(args.producer.acks, acks, "{text}");
        }
    }
}
