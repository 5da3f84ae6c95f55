//! Connection quotas: how many connections the broker, and each client
//! address, may have open, as Kafka's `ConnectionQuotas` counts them with
//! `max.connections` and `max.connections.per.ip` (and
//! `max.connections.per.ip.overrides`). At `max.connections` the listeners
//! stop accepting until a connection closes: new clients wait in the
//! kernel's backlog, as behind Kafka's blocked acceptor. Over its address's
//! limit a new connection is closed at once. As in Kafka, the inter-broker
//! listener of a broker with several listeners never waits, so that a flood
//! of clients cannot cut the brokers off from each other; its connections
//! still count.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::BrokerConfig;

/// The limits in force: read again while a listener waits, since
/// AlterConfigs may change them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    /// `max.connections`
    pub(crate) max: usize,
    /// `max.connections.per.ip`
    pub(crate) per_ip: usize,
    /// `max.connections.per.ip.overrides`
    pub(crate) overrides: BTreeMap<IpAddr, usize>,
}

impl ConnectionLimits {
    pub(crate) fn of(config: &BrokerConfig) -> Self {
        Self {
            max: config.max_connections,
            per_ip: config.max_connections_per_ip,
            overrides: config.max_connections_per_ip_overrides.clone(),
        }
    }

    fn for_address(&self, address: IpAddr) -> usize {
        self.overrides.get(&address).copied().unwrap_or(self.per_ip)
    }
}

/// Why a new connection is closed at once.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error(
        "{address} already has {open} connections open, the most max.connections.per.ip \
         (or its override) allows"
    )]
    TooManyFromAddress { address: IpAddr, open: usize },
}

/// The open connections, over every listener.
#[derive(Debug, Default)]
pub(crate) struct ConnectionQuotas {
    counts: Mutex<Counts>,
    /// Woken when a connection closes.
    closed: Notify,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// How long a listener at `max.connections` waits before it reads the
/// limits again, should AlterConfigs have raised them.
const RECHECK: Duration = Duration::from_secs(1);

impl ConnectionQuotas {
    /// Counts a new connection from `address`, once the broker is under
    /// `max.connections` (at once on a `protected` listener); refuses it if
    /// its address is at its own limit. The count lasts as long as the
    /// returned [`Admission`].
    pub(crate) async fn admit(
        self: &Arc<Self>,
        address: IpAddr,
        protected: bool,
        limits: impl Fn() -> ConnectionLimits,
    ) -> Result<Admission, Refused> {
        let mut warned = false;
        loop {
            // Created before the check, so that a close in between wakes it.
            let closed = self.closed.notified();
            let limits = limits();
            {
                let mut counts = self.counts.lock();
                if protected || counts.total < limits.max {
                    let open = counts.per_address.get(&address).copied().unwrap_or(0);
                    if open >= limits.for_address(address) {
                        return Err(Refused::TooManyFromAddress { address, open });
                    }
                    counts.total += 1;
                    *counts.per_address.entry(address).or_default() += 1;
                    return Ok(Admission {
                        quotas: self.clone(),
                        address,
                    });
                }
            }
            if !warned {
                warned = true;
                tracing::warn!(
                    max_connections = limits.max,
                    "max.connections reached: new connections wait until one closes"
                );
            }
            let _ = tokio::time::timeout(RECHECK, closed).await;
        }
    }

    /// Connections open, over all and from `address`.
    #[cfg(test)]
    fn open(&self, address: IpAddr) -> (usize, usize) {
        let counts = self.counts.lock();
        let from = counts.per_address.get(&address).copied().unwrap_or(0);
        (counts.total, from)
    }
}

/// A connection counted against the quotas, until dropped.
#[derive(Debug)]
pub(crate) struct Admission {
    quotas: Arc<ConnectionQuotas>,
    address: IpAddr,
}

impl Drop for Admission {
    fn drop(&mut self) {
        {
            let mut counts = self.quotas.counts.lock();
            counts.total -= 1;
            if let Some(open) = counts.per_address.get_mut(&self.address) {
                *open -= 1;
                if *open == 0 {
                    counts.per_address.remove(&self.address);
                }
            }
        }
        self.quotas.closed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn limits(max: usize, per_ip: usize, overrides: &[(IpAddr, usize)]) -> ConnectionLimits {
        ConnectionLimits {
            max,
            per_ip,
            overrides: overrides.iter().copied().collect(),
        }
    }

    async fn admit_now(
        quotas: &Arc<ConnectionQuotas>,
        address: IpAddr,
        limits: &ConnectionLimits,
    ) -> Option<Result<Admission, Refused>> {
        tokio::time::timeout(
            Duration::from_millis(50),
            quotas.admit(address, false, || limits.clone()),
        )
        .await
        .ok()
    }

    #[tokio::test]
    async fn an_address_over_its_limit_is_refused_at_once_and_others_are_not() {
        let quotas = Arc::new(ConnectionQuotas::default());
        let limits = limits(100, 2, &[(ip(1), 3)]);
        let mut open = Vec::new();
        for _ in 0..2 {
            open.push(admit_now(&quotas, ip(2), &limits).await.unwrap().unwrap());
        }
        let refused = admit_now(&quotas, ip(2), &limits).await.expect("at once");
        assert!(matches!(
            refused,
            Err(Refused::TooManyFromAddress { open: 2, .. })
        ));
        // The override lets 127.0.0.1 have three.
        for _ in 0..3 {
            open.push(admit_now(&quotas, ip(1), &limits).await.unwrap().unwrap());
        }
        assert!(admit_now(&quotas, ip(1), &limits).await.unwrap().is_err());
        assert_eq!(quotas.open(ip(2)), (5, 2));
        // A closed connection makes room for its address.
        open.remove(0);
        assert_eq!(quotas.open(ip(2)), (4, 1));
        assert!(admit_now(&quotas, ip(2), &limits).await.unwrap().is_ok());
    }

    #[tokio::test]
    async fn at_max_connections_a_new_connection_waits_until_one_closes() {
        let quotas = Arc::new(ConnectionQuotas::default());
        let limits = limits(2, 10, &[]);
        let first = admit_now(&quotas, ip(1), &limits).await.unwrap().unwrap();
        let _second = admit_now(&quotas, ip(2), &limits).await.unwrap().unwrap();
        assert!(admit_now(&quotas, ip(3), &limits).await.is_none(), "waits");
        let waiting = {
            let quotas = quotas.clone();
            let limits = limits.clone();
            tokio::spawn(async move { quotas.admit(ip(3), false, || limits.clone()).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(first);
        let admitted = tokio::time::timeout(Duration::from_millis(500), waiting)
            .await
            .expect("admitted once a connection closed")
            .unwrap();
        assert!(admitted.is_ok());
        assert_eq!(quotas.open(ip(3)), (2, 1));
    }

    #[tokio::test]
    async fn a_protected_listener_never_waits_but_its_connections_count() {
        let quotas = Arc::new(ConnectionQuotas::default());
        let limits = limits(1, 10, &[]);
        let _client = admit_now(&quotas, ip(1), &limits).await.unwrap().unwrap();
        let _broker = quotas.admit(ip(5), true, || limits.clone()).await.unwrap();
        assert_eq!(quotas.open(ip(5)), (2, 1));
    }
}
