//! The Kafka wire below the handlers: frames read within the request-memory
//! budget, channels and their principals, responses written in chunks, and
//! the connection quotas.

mod channel;
pub(crate) mod connection_quotas;
pub(crate) mod frame;
pub(crate) mod outgoing;
pub(crate) mod request_memory;

pub(crate) use channel::{principal_name, Channel, ANONYMOUS};
pub(crate) use connection_quotas::ConnectionQuotas;
pub(crate) use outgoing::{Chunk, Outgoing};
pub(crate) use request_memory::{RequestMemory, Sizes as RequestMemorySizes};
