//! What the broker serves besides the Kafka API's handlers: the HTTP
//! endpoint and its metrics, consumer lag as they show it, and the fetch
//! sessions consumers and followers keep between requests.

pub(crate) mod fetch_sessions;
pub mod http;
pub mod lag;
pub mod metrics;
