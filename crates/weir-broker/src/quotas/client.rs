//! Client quotas (KIP-13, KIP-55, KIP-124, KIP-219): produce and fetch
//! byte rates and the share of request-handling time, per user, client id,
//! or client id of a user, as Kafka enforces them.
//!
//! Kafka's rules, kept here without I/O or a clock of its own:
//! - the quota that applies is the most specific one set, in the order
//!   user + client id, user + default client id, user, default user +
//!   client id, default user + default client id, default user, client id,
//!   default client id; each kind of quota is resolved on its own;
//! - clients sharing the entity a quota is set on share its rate (a quota
//!   on a user is one budget for all its clients; a default client-id quota
//!   is a budget per client id);
//! - a rate is measured over `quota.window.num` windows of
//!   `quota.window.size.seconds`, counting at least all but one window as
//!   elapsed, so a new client is not judged on its first burst;
//! - a violation is answered with the delay that brings the measured rate
//!   back to the quota, `(rate - quota) / quota * window`; the response
//!   carries it as `throttle_time_ms` and the connection reads nothing more
//!   from the client until it has passed (KIP-219's channel muting). The
//!   delay of a request-time violation is at most one window.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use weir_meta::{ClientQuotas, EntityName, QuotaEntity};

pub(crate) use crate::quotas::rate::QuotaWindows;
use crate::quotas::rate::Rate;

#[cfg(test)]
mod tests;

/// Sensors unused this long are dropped (Kafka's inactive sensor
/// expiration, one hour).
const SENSOR_EXPIRY_MS: i64 = 3_600_000;

/// What a quota limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum QuotaKind {
    /// `producer_byte_rate`: bytes of produce requests per second.
    Produce,
    /// `consumer_byte_rate`: bytes of fetch responses per second.
    Fetch,
    /// `request_percentage`: request-handling time, in percent of one
    /// thread.
    Request,
}

impl QuotaKind {
    const ALL: [QuotaKind; 3] = [QuotaKind::Produce, QuotaKind::Fetch, QuotaKind::Request];

    /// The quota's name in AlterClientQuotas and DescribeClientQuotas.
    pub(crate) fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
        }
    }

    pub(crate) fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.key() == key)
    }

    /// Whether values must be whole numbers (Kafka's LONG quotas).
    pub(crate) fn integral(self) -> bool {
        !matches!(self, QuotaKind::Request)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A client as quotas see it.
pub(crate) struct Client<'a> {
    pub(crate) user: &'a str,
    pub(crate) client_id: &'a str,
}

/// Who shares a rate: Kafka's metric tags of the quota's sensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SensorKey {
    kind: QuotaKind,
    user: String,
    client_id: String,
}

struct Sensor {
    rate: Rate,
    last_used_ms: i64,
}

#[derive(Default)]
struct State {
    /// Per kind, the quotas of that kind by entity.
    limits: [HashMap<QuotaEntity, f64>; 3],
    sensors: HashMap<SensorKey, Sensor>,
    last_purge_ms: i64,
}

/// The client quotas in force and the rates measured against them.
pub(crate) struct ClientQuotaManager {
    windows: QuotaWindows,
    /// Per kind, whether any quota of it is set: read without the lock on
    /// every request.
    enabled: [AtomicBool; 3],
    state: Mutex<State>,
}

impl ClientQuotaManager {
    pub(crate) fn new(windows: QuotaWindows) -> Self {
        ClientQuotaManager {
            windows,
            enabled: Default::default(),
            state: Mutex::new(State::default()),
        }
    }

    /// Takes the quotas of the metadata image. Rates measured so far are
    /// kept: a changed quota judges the same recent traffic.
    pub(crate) fn update(&self, quotas: &ClientQuotas) {
        let mut limits: [HashMap<QuotaEntity, f64>; 3] = Default::default();
        for (entity, values) in quotas {
            for (key, value) in values {
                if let Some(kind) = QuotaKind::from_key(key) {
                    limits[kind.index()].insert(entity.clone(), value.0);
                }
            }
        }
        let mut state = self.state.lock();
        for kind in QuotaKind::ALL {
            let on = !limits[kind.index()].is_empty();
            self.enabled[kind.index()].store(on, Ordering::Relaxed);
        }
        state.limits = limits;
    }

    /// Whether any quota of `kind` is set; without one nothing is measured.
    pub(crate) fn enabled(&self, kind: QuotaKind) -> bool {
        self.enabled[kind.index()].load(Ordering::Relaxed)
    }

    /// Records `value` (bytes, or request time in percent-seconds) for the
    /// client; returns how long it must be throttled, 0 if it is within
    /// its quota.
    pub(crate) fn record(&self, kind: QuotaKind, client: &Client, value: f64, now: i64) -> u32 {
        let mut state = self.state.lock();
        let Some((key, limit)) = resolve(&state.limits[kind.index()], kind, client) else {
            return 0;
        };
        let windows = self.windows;
        state.purge_idle(now);
        let sensor = state.sensors.entry(key).or_insert_with(|| Sensor {
            rate: Rate::new(windows.samples + 1),
            last_used_ms: now,
        });
        sensor.last_used_ms = now;
        sensor.rate.record(windows, value, now);
        let rate = sensor.rate.measure(windows, now);
        if rate <= limit {
            return 0;
        }
        let window = sensor.rate.window_size(windows, now) as f64;
        let mut throttle = ((rate - limit) / limit * window).round();
        if kind == QuotaKind::Request {
            throttle = throttle.min(windows.window_ms as f64);
        }
        throttle.clamp(0.0, f64::from(u32::MAX)) as u32
    }

    /// Takes back a recorded value: a throttled fetch sends no records.
    pub(crate) fn unrecord(&self, kind: QuotaKind, client: &Client, value: f64, now: i64) {
        let mut state = self.state.lock();
        let Some((key, _)) = resolve(&state.limits[kind.index()], kind, client) else {
            return;
        };
        if let Some(sensor) = state.sensors.get_mut(&key) {
            sensor.rate.record(self.windows, -value, now);
        }
    }

    /// The most a single fetch may return without being throttled for
    /// certain: the quota over all but one window (Kafka's
    /// `getMaxValueInQuotaWindow`).
    pub(crate) fn max_fetch_bytes(&self, client: &Client) -> Option<usize> {
        let state = self.state.lock();
        let (_, limit) = resolve(
            &state.limits[QuotaKind::Fetch.index()],
            QuotaKind::Fetch,
            client,
        )?;
        let span =
            (self.windows.samples.max(1) - 1) as f64 * self.windows.window_ms as f64 / 1000.0;
        Some((limit * span).min(usize::MAX as f64) as usize)
    }
}

impl State {
    fn purge_idle(&mut self, now: i64) {
        if now - self.last_purge_ms < 60_000 {
            return;
        }
        self.last_purge_ms = now;
        self.sensors
            .retain(|_, sensor| now - sensor.last_used_ms < SENSOR_EXPIRY_MS);
    }
}

/// The quota that applies to `client` and who shares its rate, in Kafka's
/// order of precedence; `None` if no quota of this kind applies.
fn resolve(
    limits: &HashMap<QuotaEntity, f64>,
    kind: QuotaKind,
    client: &Client,
) -> Option<(SensorKey, f64)> {
    if limits.is_empty() {
        return None;
    }
    let named = |name: &str| Some(EntityName::Named(name.to_owned()));
    let default = || Some(EntityName::Default);
    let (user, client_id) = (named(client.user), named(client.client_id));
    // (entity, does the rate belong to the user alone, to the client id
    // alone, or to both)
    let order = [
        (user.clone(), client_id.clone(), Shared::Both),
        (user.clone(), default(), Shared::Both),
        (user.clone(), None, Shared::User),
        (default(), client_id.clone(), Shared::Both),
        (default(), default(), Shared::Both),
        (default(), None, Shared::User),
        (None, client_id.clone(), Shared::ClientId),
        (None, default(), Shared::ClientId),
    ];
    order.into_iter().find_map(|(user, client_id, shared)| {
        let limit = *limits.get(&QuotaEntity { user, client_id })?;
        let (user, client_id) = match shared {
            Shared::Both => (client.user, client.client_id),
            Shared::User => (client.user, ""),
            Shared::ClientId => ("", client.client_id),
        };
        let key = SensorKey {
            kind,
            user: user.to_owned(),
            client_id: client_id.to_owned(),
        };
        Some((key, limit))
    })
}

enum Shared {
    Both,
    User,
    ClientId,
}
