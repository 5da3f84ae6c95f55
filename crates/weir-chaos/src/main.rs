//! `weir-chaos --weir target/release/weir [--fault NAME|all] [--workload plain|transactional] [--seconds N] [--json]`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use weir_chaos::{run, table, Fault, RunOptions, Status, WorkloadKind};

/// Runs faults against a three-node Weir cluster under load and checks
/// what became of every acknowledged write.
#[derive(Parser, Debug)]
#[command(name = "weir-chaos")]
struct Args {
    /// The `weir` binary to run the cluster with.
    #[arg(long)]
    weir: PathBuf,
    /// leader-kill, controller-kill, leader-pause, partition,
    /// rolling-restart, epoch-divergence, eligible-leader, negative-control (several
    /// separated by commas), or all.
    #[arg(long, default_value = "all")]
    fault: String,
    /// plain (idempotent producers) or transactional (transactional
    /// producers, read back with read_committed).
    #[arg(long, default_value = "plain", value_parser = parse_workload)]
    workload: WorkloadKind,
    /// How long the workload runs under each fault.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Producers.
    #[arg(long, default_value_t = 3)]
    producers: usize,
    /// Values per second per producer.
    #[arg(long, default_value_t = 50)]
    rate: u32,
    /// How long to wait for the cluster to be whole after the faults.
    #[arg(long, default_value_t = 120)]
    heal_timeout_secs: u64,
    /// Keep each cluster's data and logs (always kept after a failure).
    #[arg(long)]
    keep: bool,
    /// Print the results as JSON (with every event) instead of a table.
    #[arg(long)]
    json: bool,
    /// Only the table: no timeline while running.
    #[arg(long, short)]
    quiet: bool,
}

fn parse_workload(name: &str) -> Result<WorkloadKind, String> {
    WorkloadKind::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = WorkloadKind::ALL.iter().map(|w| w.name()).collect();
        format!("one of {}", names.join(", "))
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    // librdkafka's debug logs reach the `log` crate; shown only when asked
    // for (see the README).
    if std::env::var_os("WEIR_CHAOS_RDKAFKA_DEBUG").is_some() {
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
    }
    let faults: Vec<Fault> = if args.fault == "all" {
        Fault::ALL.to_vec()
    } else {
        match args
            .fault
            .split(',')
            .map(|name| Fault::from_name(name.trim()).ok_or(name))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(faults) => faults,
            Err(name) => {
                let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                eprintln!(
                    "unknown fault {name:?}; one of {}, or all",
                    names.join(", ")
                );
                return ExitCode::from(2);
            }
        }
    };
    if !args.weir.is_file() {
        eprintln!("no weir binary at {}", args.weir.display());
        return ExitCode::from(2);
    }
    let options = RunOptions {
        producers: args.producers,
        rate: args.rate,
        heal_timeout: Duration::from_secs(args.heal_timeout_secs),
        keep: args.keep,
        verbose: !args.quiet,
        workload: args.workload,
        ..RunOptions::new(&args.weir, args.seconds)
    };
    let mut results = Vec::new();
    for fault in faults {
        let result = run(fault, &options);
        if !args.json {
            eprint!("{}", table::render(std::slice::from_ref(&result)));
        }
        results.push(result);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).expect("results serialize")
        );
    } else {
        print!("{}", table::render(&results));
    }
    let bad = results
        .iter()
        .any(|r| matches!(r.status, Status::Failed | Status::Error));
    if bad {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
