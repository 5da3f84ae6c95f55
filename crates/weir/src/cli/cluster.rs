//! `weir cluster status`: the brokers, the active controller and its Raft
//! state, and the partitions that need attention.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clap::{Args, Subcommand};
use weir_client::{Metadata, QuorumStatus};

use super::{block_on, table, Connection};

#[derive(Args, Debug)]
pub(crate) struct ClusterArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Brokers, the active controller with its Raft term and commit index,
    /// partitions without a leader and under-replicated partitions.
    Status,
}

pub(crate) fn run(args: ClusterArgs) -> anyhow::Result<()> {
    block_on(async move {
        let mut client = args.connection.connect().await?;
        match args.command {
            ClusterCommand::Status => {
                let metadata = client.metadata(None).await?;
                let quorum = client.describe_quorum().await?;
                print!("{}", render_status(&metadata, &quorum));
            }
        }
        Ok(())
    })
}

fn render_status(metadata: &Metadata, quorum: &QuorumStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Cluster id: {}",
        metadata.cluster_id.as_deref().unwrap_or("-")
    );
    let voters: Vec<String> = quorum.voters.iter().map(i32::to_string).collect();
    let _ = writeln!(
        out,
        "Active controller: {} (Raft term {}, commit index {}, voters {})",
        if quorum.leader_id < 0 {
            "none".to_owned()
        } else {
            quorum.leader_id.to_string()
        },
        quorum.term,
        quorum.commit_index,
        voters.join(",")
    );
    let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
    let mut offline = Vec::new();
    let mut under_replicated = Vec::new();
    for topic in &metadata.topics {
        for p in &topic.partitions {
            let name = format!("{}-{}", topic.name, p.partition);
            let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
            let detail = format!(
                "{name} (leader {}, replicas {}, isr {})",
                p.leader,
                list(&p.replicas),
                list(&p.isr)
            );
            if p.leader < 0 {
                offline.push(detail);
            } else {
                *leaders.entry(p.leader).or_default() += 1;
                if p.isr.len() < p.replicas.len() {
                    under_replicated.push(detail);
                }
            }
        }
    }
    let _ = writeln!(out, "\nBrokers ({} live):", metadata.brokers.len());
    let mut rows = vec![vec![
        "ID".to_owned(),
        "HOST".to_owned(),
        "PORT".to_owned(),
        "RACK".to_owned(),
        "LEADERS".to_owned(),
    ]];
    for broker in &metadata.brokers {
        rows.push(vec![
            broker.node_id.to_string(),
            broker.host.clone(),
            broker.port.to_string(),
            broker.rack.clone().unwrap_or_else(|| "-".to_owned()),
            leaders
                .get(&broker.node_id)
                .copied()
                .unwrap_or(0)
                .to_string(),
        ]);
    }
    out.push_str(&table(&rows));
    for (title, partitions) in [
        ("Partitions without a leader", &offline),
        ("Under-replicated partitions", &under_replicated),
    ] {
        let _ = writeln!(out, "\n{title}: {}", partitions.len());
        for p in partitions.iter() {
            let _ = writeln!(out, "  {p}");
        }
    }
    out
}
