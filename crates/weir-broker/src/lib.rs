//! `weir-broker`: the Kafka protocol server of Weir, laid out by subsystem
//! from the wire down (see `DESIGN.md` for the map and the request path).

mod api;
pub mod broker;
pub mod config;
pub mod coordinator;
mod fetch_sessions;
pub mod groups;
pub mod metrics;
pub mod mirror;
pub mod net;
pub mod partition;
pub mod quotas;
pub mod remote;
pub mod replica;
pub mod security;
pub mod server;
pub mod share;
#[cfg(test)]
mod simulation;
pub mod txn;

pub use broker::{Broker, BrokerError};
pub use config::{BrokerConfig, BrokerConfigDef, ConfigError, BROKER_CONFIGS, INERT_CONFIGS};
