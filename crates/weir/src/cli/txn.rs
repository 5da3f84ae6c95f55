//! `weir txn list|describe`: transactional producers and their open
//! transactions, like Kafka's `kafka-transactions.sh`.

use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use weir_client::{ClientError, ResponseError};

use super::{block_on, table, Connection};

#[derive(Args, Debug)]
pub(crate) struct TxnArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: TxnCommand,
}

#[derive(Subcommand, Debug)]
enum TxnCommand {
    /// List every transactional id with its producer id, its state and
    /// the broker coordinating it.
    List,
    /// Show a transactional id: its producer id and epoch, its state, its
    /// timeout and, for an open transaction, when it started and its
    /// partitions.
    Describe {
        /// The transactional id.
        id: String,
    },
}

pub(crate) fn run(args: TxnArgs) -> anyhow::Result<()> {
    block_on(async move {
        let out = match args.command {
            TxnCommand::List => list(&args.connection).await?,
            TxnCommand::Describe { id } => describe(&args.connection, &id).await?,
        };
        super::print(format_args!("{out}"))?;
        Ok(())
    })
}

/// A client error about transactional id `id`, said the way an operator
/// thinks of it.
fn txn_error(error: ClientError, id: &str) -> anyhow::Error {
    match error.kafka_error() {
        Some(ResponseError::TransactionalIdNotFound) => {
            anyhow!("transactional id {id} is not known")
        }
        _ => anyhow::Error::new(error),
    }
}

/// Every broker's transactional ids, sorted.
async fn list(connection: &Connection) -> anyhow::Result<String> {
    let mut bootstrap = connection.connect().await?;
    let brokers = bootstrap.metadata(Some(&[])).await?.brokers;
    let mut rows = Vec::new();
    for broker in brokers {
        let addr = format!("{}:{}", broker.host, broker.port);
        let mut client = bootstrap
            .connect_to_broker(&addr)
            .await
            .with_context(|| format!("cannot reach node {}", broker.node_id))?;
        for txn in client.list_transactions().await? {
            rows.push(vec![
                txn.transactional_id,
                txn.producer_id.to_string(),
                txn.state,
                broker.node_id.to_string(),
            ]);
        }
    }
    rows.sort();
    let mut all = vec![vec![
        "TRANSACTIONAL ID".to_owned(),
        "PRODUCER ID".to_owned(),
        "STATE".to_owned(),
        "COORDINATOR".to_owned(),
    ]];
    all.extend(rows);
    Ok(table(&all))
}

async fn describe(connection: &Connection, id: &str) -> anyhow::Result<String> {
    let mut bootstrap = connection.connect().await?;
    let found = bootstrap
        .find_transaction_coordinator(id)
        .await
        .map_err(|e| txn_error(e, id))?;
    let mut coordinator = bootstrap
        .connect_to_broker(&found.addr())
        .await
        .with_context(|| {
            format!(
                "cannot reach the coordinator of transactional id {id} (node {})",
                found.node_id
            )
        })?;
    let txn = coordinator
        .describe_transaction(id)
        .await
        .map_err(|e| txn_error(e, id))?;
    let started = if txn.start_time_ms < 0 {
        "-".to_owned()
    } else {
        let age_ms = super::now_ms().saturating_sub(txn.start_time_ms);
        format!("{} ({} ms ago)", txn.start_time_ms, age_ms)
    };
    let partitions: Vec<String> = txn
        .partitions
        .iter()
        .flat_map(|(topic, ids)| ids.iter().map(move |p| format!("{topic}-{p}")))
        .collect();
    let rows = vec![
        vec!["Transactional id".to_owned(), txn.transactional_id.clone()],
        vec!["Coordinator".to_owned(), found.node_id.to_string()],
        vec!["State".to_owned(), txn.state.clone()],
        vec!["Producer id".to_owned(), txn.producer_id.to_string()],
        vec!["Producer epoch".to_owned(), txn.producer_epoch.to_string()],
        vec!["Timeout (ms)".to_owned(), txn.timeout_ms.to_string()],
        vec!["Started".to_owned(), started],
        vec![
            "Partitions".to_owned(),
            if partitions.is_empty() {
                "-".to_owned()
            } else {
                partitions.join(",")
            },
        ],
    ];
    Ok(table(&rows))
}
