//! A small async Kafka client on tokio and the `kafka-protocol` crate,
//! used by the `weir` CLI and by tests.
//!
//! A [`Client`] is one connection to one broker. [`Client::connect`]
//! negotiates versions with ApiVersions (for each API, the highest version
//! both sides support); [`Client::call`] sends any request at that version
//! and decodes its response; typed helpers cover what the CLI needs:
//!
//! ```no_run
//! # async fn demo() -> Result<(), weir_client::ClientError> {
//! use bytes::Bytes;
//! use weir_client::{murmur2_partition, Client, EARLIEST};
//!
//! let mut client = Client::connect("127.0.0.1:9092").await?;
//! client.create_topic("events", 3, &[]).await?;
//! let partition = murmur2_partition(b"user-1", 3);
//! let base = client
//!     .produce("events", partition, vec![(Some(Bytes::from("user-1")), Some(Bytes::from("hi")))])
//!     .await?;
//! let start = client.list_offsets("events", partition, EARLIEST).await?;
//! let records = client.fetch("events", partition, start, 1 << 20, 500).await?;
//! assert_eq!(records[0].offset, base);
//! # Ok(()) }
//! ```
//!
//! Every Kafka error code in a response becomes [`ClientError::Kafka`].
//! A [`Client`]'s requests go to the broker it is connected to; a
//! [`Cluster`] sends each request about a partition to the partition's
//! leader.

mod admin;
mod client;
mod cluster;
mod error;
mod fetch;
mod frame;
mod groups;
mod markers;
mod offsets;
mod partitioner;
mod produce;
mod properties;
mod security;
mod transactions;

#[cfg(test)]
mod tests;

pub use admin::{
    BrokerMetadata, ConfigEntry, ConfigResource, ConfigSource, CreatedTopic, Metadata,
    PartitionMetadata, QuorumStatus, TopicMetadata,
};
pub use client::{Client, ClientConfig};
pub use cluster::Cluster;
pub use error::ClientError;
pub use fetch::{ConsumedRecord, FetchTarget, FetchedPartition};
pub use groups::{
    decode_consumer_assignment, AssignmentError, CommittedOffset, Coordinator, GroupDescription,
    GroupMember, ListedGroup, TopicPartitions, CONSUMER_PROTOCOL_TYPE, DEAD,
};
pub use kafka_protocol::records::Compression;
pub use kafka_protocol::ResponseError;
pub use markers::{MarkerOutcome, TxnMarker};
pub use offsets::{EARLIEST, LATEST};
pub use partitioner::{murmur2, murmur2_partition, to_positive};
pub use produce::encode_batch;
pub use properties::{parse_properties, PropertiesError};
pub use security::{
    PemSource, SaslConfig, SaslMechanism, SecurityConfig, SecurityConfigError, SecurityProtocol,
    TlsConfig, TlsIdentity,
};
pub use transactions::{ListedTransaction, TransactionDescription};
