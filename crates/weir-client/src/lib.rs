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
//! Connections use TLS and SASL as a [`SecurityConfig`] says, which reads
//! the Kafka client properties people already have (`security.protocol`,
//! `ssl.ca.location`, `sasl.jaas.config`, ...):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use weir_client::{parse_properties, Client, ClientConfig, SecurityConfig};
//!
//! let properties = parse_properties(
//!     "security.protocol=SASL_SSL\n\
//!      ssl.ca.location=/etc/weir/ca.pem\n\
//!      sasl.mechanism=SCRAM-SHA-512\n\
//!      sasl.username=admin\n\
//!      sasl.password=admin-secret\n",
//! )?;
//! let security = SecurityConfig::from_properties(&properties)?;
//! let client =
//!     Client::connect_with_security("127.0.0.1:9094", ClientConfig::default(), security).await?;
//! # Ok(()) }
//! ```
//!
//! Every Kafka error code in a response becomes [`ClientError::Kafka`].
//! A [`Client`]'s requests go to the broker it is connected to; a
//! [`Cluster`] sends each request about a partition to the partition's
//! leader.

mod acls;
mod admin;
mod client;
mod cluster;
mod consumer_groups;
mod error;
mod fetch;
mod frame;
mod group_consumer;
mod groups;
mod markers;
mod offsets;
mod partitioner;
mod produce;
mod producer;
mod properties;
mod sasl;
mod security;
mod share_groups;
mod tls;
mod transactions;
mod transport;
mod users;

#[cfg(test)]
mod tests;

pub use acls::{AclBinding, AclFilter};
pub use admin::{
    BrokerMetadata, ConfigEntry, ConfigResource, ConfigSource, CreatedTopic, Metadata,
    PartitionMetadata, QuorumStatus, TopicMetadata,
};
pub use client::{Client, ClientConfig};
pub use cluster::Cluster;
pub use consumer_groups::{ConsumerGroupDescription, ConsumerGroupMember};
pub use error::ClientError;
pub use fetch::{decode_records, ConsumedRecord, Decoded, FetchTarget, FetchedPartition};
pub use group_consumer::{GroupConsumer, HeartbeatOutcome};
pub use groups::{
    decode_consumer_assignment, AssignmentError, CommittedOffset, Coordinator, GroupDescription,
    GroupMember, ListedGroup, TopicPartitions, CONSUMER_PROTOCOL_TYPE, DEAD,
};
pub use kafka_protocol::records::Compression;
pub use kafka_protocol::ResponseError;
pub use markers::{MarkerOutcome, TxnMarker};
pub use offsets::{EARLIEST, LATEST};
pub use partitioner::{murmur2, murmur2_partition, to_positive};
pub use produce::{encode_batch, encode_records, OutgoingRecord};
pub use producer::{IdempotentProducer, DEFAULT_DELIVERY_TIMEOUT};
pub use properties::{parse_properties, PropertiesError};
pub use security::{
    PemSource, SaslConfig, SaslMechanism, SecurityConfig, SecurityConfigError, SecurityProtocol,
    TlsConfig, TlsIdentity,
};
pub use share_groups::{ShareGroupDescription, ShareGroupMember, ShareGroupOffset};
pub use tls::{
    client_config as tls_client_config, server_name as tls_server_name, system_ca_certificates,
};
pub use transactions::{ListedTransaction, TransactionDescription};
pub use users::{NewScramCredential, ScramCredentialInfo, ScramUser};
