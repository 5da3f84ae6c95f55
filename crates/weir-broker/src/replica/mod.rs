//! Replicas: the partitions this node hosts kept in step with the metadata
//! image, followers fetching from their leaders, leaders sending consumers
//! to a follower to read (KIP-392), and the log directories replicas live in.

pub mod dir_move;
pub mod directories;
mod fetcher;
pub mod manager;
pub mod remote_restart;
pub mod selector;

#[cfg(test)]
pub(crate) use fetcher::{apply_fetch, divergence_point, Fetched};
pub use fetcher::{Follow, LeaderSources, ReplicaFetchers};
pub use selector::{ReplicaSelector, ReplicaView};
