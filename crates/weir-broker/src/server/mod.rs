//! The server loop on top: the Kafka listeners' accept loops and
//! connections, which hand each request to `api`, and the HTTP endpoint with
//! its metrics and consumer lag.

mod connection;
pub(crate) mod console;
mod health;
pub mod http;
pub mod lag;
mod listener;
mod mirror_api;
mod remote_ends;

pub use listener::{run_listener, ServedListener};
