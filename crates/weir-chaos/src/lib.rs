//! `weir-chaos`: starts a three-node Weir cluster, runs producers against
//! it while injecting a fault (kill -9, SIGSTOP, network partition, rolling
//! restart), reads everything back once the cluster is whole again, and
//! checks what became of every acknowledged write.
//!
//! - [`cluster`] starts and hurts the `weir serve` processes;
//! - [`netns`] gives them network namespaces, for partitions;
//! - [`workload`] produces and reads back;
//! - [`txn_workload`] does the same with transactional producers;
//! - [`checker`] judges the history (pure);
//! - [`txn_checker`] judges a history of transactions (pure);
//! - [`replicas`] compares the replicas' logs on disk;
//! - [`faults`] scripts each fault and the negative control;
//! - [`table`] prints the results.

pub mod checker;
pub mod cluster;
pub mod faults;
pub mod netns;
pub mod replicas;
pub mod table;
pub mod txn_checker;
pub mod txn_workload;
pub mod workload;

pub use faults::{run, Fault, FaultResult, RunOptions, Status, WorkloadKind};

/// A failure of the harness itself (not a finding about the broker).
#[derive(Debug, Clone)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error(e.to_string())
    }
}

impl From<rdkafka::error::KafkaError> for Error {
    fn from(e: rdkafka::error::KafkaError) -> Self {
        Error(e.to_string())
    }
}
