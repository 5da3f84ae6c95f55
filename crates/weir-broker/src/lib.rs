//! `weir-broker`: the Kafka protocol server of Weir.

mod api;
mod blocking;
pub mod broker;
mod client_quotas;
pub mod config;
pub mod consumer_group;
pub mod consumer_group_coordinator;
mod controller_link;
mod features;
mod fetch_sessions;
pub mod group;
pub mod group_configs;
pub mod group_coordinator;
pub mod high_watermarks;
pub mod http;
pub mod jwks;
mod keyed_turns;
pub mod lag;
pub mod listeners;
pub mod log_cleaner;
pub mod log_dir_move;
pub mod log_dirs;
pub mod maintenance;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod offsets;
pub mod partition;
mod producer_ids;
pub mod producer_state;
pub mod rate;
pub mod replica_manager;
pub mod replication;
pub mod share;
pub mod share_dead_letters;
pub mod share_group_coordinator;
mod share_partitions;
mod share_persister;
pub mod share_state;
#[cfg(test)]
mod simulation;
pub mod tls;
pub mod topic_configs;
pub mod txn;

pub use broker::{Broker, BrokerError};
pub use config::{BrokerConfig, BrokerConfigDef, ConfigError, BROKER_CONFIGS};
