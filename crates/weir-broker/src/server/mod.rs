//! What the broker serves besides the Kafka API's handlers: its listeners,
//! the HTTP endpoint and its metrics, and the fetch sessions consumers and
//! followers keep between requests.

pub(crate) mod fetch_sessions;
pub mod http;
pub mod listeners;
pub mod metrics;
