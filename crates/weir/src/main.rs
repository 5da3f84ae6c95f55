//! The `weir` binary: `weir serve` runs a node; the other subcommands are
//! the operator's CLI.

mod cli;
mod logging;
mod serve;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// jemalloc, not glibc's malloc: glibc keeps what a burst of connections
/// freed (in its per-thread arenas, free pages among live ones are never
/// given back), so the broker stayed at its peak memory once they closed.
/// jemalloc's background thread purges pages unused for about ten seconds
/// (`dirty_decay_ms`; tunable at run time with `_RJEM_MALLOC_CONF`).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(name = "weir", version, about = "A Kafka-compatible message log")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a node (broker) serving the Kafka protocol.
    Serve(Box<serve::ServeArgs>),
    /// Create, list, describe and delete topics.
    Topic(cli::topic::TopicArgs),
    /// Write stdin to a topic, one record per line.
    Produce(cli::produce::ProduceArgs),
    /// Print a topic's records, one per line.
    Consume(cli::consume::ConsumeArgs),
    /// List, describe and delete consumer groups; reset their offsets.
    Group(cli::group::GroupArgs),
    /// List and describe share groups (queues on the log).
    ShareGroup(cli::share_group::ShareGroupArgs),
    /// List the dead letters of a share group's dead-letter topic; replay
    /// chosen ones to their source topic.
    Dlq(cli::dlq::DlqArgs),
    /// Show the cluster (brokers, the active controller, partitions that
    /// need attention) and its dynamic broker configs; change those.
    Cluster(cli::cluster::ClusterArgs),
    /// List and describe transactional producers and their transactions.
    Txn(cli::txn::TxnArgs),
    /// Create, list and delete ACLs (kafka-acls.sh's flags).
    Acl(cli::acl::AclArgs),
    /// Create, list and delete SCRAM users.
    User(cli::user::UserArgs),
    /// Mirror a source cluster's topics here, offset for offset, and fail
    /// over to them: create, list, describe, pause, resume, fail over and
    /// delete mirrors.
    Mirror(cli::mirror::MirrorArgs),
}

/// An error and its causes on one line, each said once: many errors name
/// their cause in their own message already.
fn causes(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The `WEIR_*` variables read besides the flags' own.
const OTHER_VARIABLES: &[&str] = &["WEIR_LOG", "WEIR_BIN"];

/// The `WEIR_*` variables the flags of `command` and its subcommands read,
/// and the others.
fn variables_read(command: &clap::Command) -> Vec<String> {
    fn add(command: &clap::Command, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            if let Some(env) = arg.get_env() {
                out.push(env.to_string_lossy().into_owned());
            }
        }
        for sub in command.get_subcommands() {
            add(sub, out);
        }
    }
    let mut known: Vec<String> = OTHER_VARIABLES.iter().map(|v| v.to_string()).collect();
    add(command, &mut known);
    known
}

/// Warns of each `WEIR_*` variable set that nothing reads (a misspelled
/// one is otherwise silently ignored), with the closest name.
fn warn_of_unknown_variables(known: &[String]) {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("WEIR_") || known.iter().any(|k| k == name) {
            continue;
        }
        let closest = known
            .iter()
            .map(|k| (strsim::jaro_winkler(name, k), k))
            .filter(|(score, _)| *score > 0.9)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        match closest {
            Some((_, close)) => tracing::warn!(
                "the environment variable {name} is set but no setting reads it; did you mean {close}?"
            ),
            None => tracing::warn!(
                "the environment variable {name} is set but no setting reads it (the broker \
                 configs' variables are listed by `weir serve --help`)"
            ),
        }
    }
}

fn main() -> std::process::ExitCode {
    use std::io::Write;
    let command = Cli::command().mut_subcommand("serve", serve::add_broker_config_args);
    let variables = variables_read(&command);
    let matches = command.get_matches();
    let format = matches
        .subcommand_matches("serve")
        .and_then(|serve| serve.get_one::<logging::LogFormat>("log_format").copied())
        .unwrap_or(logging::LogFormat::Text);
    logging::init(format);
    warn_of_unknown_variables(&variables);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Serve(args) => {
            let serve_matches = matches.subcommand_matches("serve").expect("serve");
            serve::run(*args, serve_matches)
        }
        Command::Topic(args) => cli::topic::run(args),
        Command::Produce(args) => cli::produce::run(args),
        Command::Consume(args) => cli::consume::run(args),
        Command::Group(args) => cli::group::run(args),
        Command::Dlq(args) => cli::dlq::run(args),
        Command::ShareGroup(args) => cli::share_group::run(args),
        Command::Cluster(args) => cli::cluster::run(args),
        Command::Txn(args) => cli::txn::run(args),
        Command::Acl(args) => cli::acl::run(args),
        Command::User(args) => cli::user::run(args),
        Command::Mirror(args) => cli::mirror::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away (`| head`): nothing more to say to anyone.
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            // Not eprintln!: it panics when standard error cannot be written.
            let _ = writeln!(std::io::stderr(), "error: {}", causes(&error));
            std::process::ExitCode::FAILURE
        }
    }
}
