//! What the console charts over time, sampled by the broker itself every
//! [`SAMPLE_INTERVAL`] into fixed-size rings: the bytes and records in and
//! out per second, and each group's total lag, for the groups this broker
//! coordinates. Memory is bounded: [`SAMPLES`] points per series, at most
//! [`MAX_GROUPS`] groups (the ones not seen longest are dropped first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;

use crate::broker::Broker;
use crate::server::lag;

/// How often a point is taken.
pub(crate) const SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
/// 24 hours of points.
pub(crate) const SAMPLES: usize = 24 * 60 * 60 / 10;
/// At most this many groups' lag is kept.
pub(crate) const MAX_GROUPS: usize = 1000;

/// A series of values at a fixed interval, the newest last: a ring of
/// `f32` (4 bytes a point) and the time of its newest point.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    values: Vec<f32>,
    /// Where the next point goes.
    next: usize,
    /// When the newest point was taken (ms since the epoch).
    newest_ms: i64,
}

impl Ring {
    fn new() -> Self {
        Self {
            values: Vec::new(),
            next: 0,
            newest_ms: 0,
        }
    }

    fn push(&mut self, now_ms: i64, value: f64) {
        if self.values.len() < SAMPLES {
            self.values.push(value as f32);
        } else {
            self.values[self.next] = value as f32;
        }
        self.next = (self.next + 1) % SAMPLES;
        self.newest_ms = now_ms;
    }

    /// The points, oldest first, with their times.
    fn points(&self, interval_ms: i64) -> Vec<(i64, f64)> {
        let len = self.values.len();
        let (older, newer) = if len < SAMPLES {
            (&self.values[..0], &self.values[..])
        } else {
            (&self.values[self.next..], &self.values[..self.next])
        };
        let first_ms = self.newest_ms - (len as i64 - 1) * interval_ms;
        older
            .iter()
            .chain(newer)
            .enumerate()
            .map(|(i, v)| (first_ms + i as i64 * interval_ms, f64::from(*v)))
            .collect()
    }
}

/// A chart's data: times (ms since the epoch) and one series per name.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct Chart {
    pub(crate) interval_ms: i64,
    pub(crate) times: Vec<i64>,
    pub(crate) series: Vec<(String, Vec<f64>)>,
}

/// The throughput counters at the last sample, to take rates from.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    at_ms: i64,
    bytes_in: u64,
    bytes_out: u64,
    records_in: u64,
}

#[derive(Default)]
struct State {
    last: Option<Counters>,
    bytes_in: Option<Ring>,
    bytes_out: Option<Ring>,
    records_in: Option<Ring>,
    /// Group → its total lag, and when it was last seen.
    lag: HashMap<String, (Ring, i64)>,
}

/// The sampled series of one broker.
#[derive(Default)]
pub(crate) struct History {
    state: Mutex<State>,
}

impl History {
    /// A history sampled every [`SAMPLE_INTERVAL`] for as long as the
    /// broker lives.
    pub(crate) fn start(broker: &Arc<Broker>) -> Arc<Self> {
        let history = Arc::new(Self::default());
        let weak: Weak<Broker> = Arc::downgrade(broker);
        let sampled = history.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SAMPLE_INTERVAL);
            loop {
                ticks.tick().await;
                let Some(broker) = weak.upgrade() else { return };
                sampled.sample(broker).await;
            }
        });
        history
    }

    /// Takes one point of every series.
    async fn sample(&self, broker: Arc<Broker>) {
        let now_ms = broker.now_ms();
        let metrics = broker.metrics();
        let counters = Counters {
            at_ms: now_ms,
            bytes_in: metrics.bytes_in.get(),
            bytes_out: metrics.bytes_out.get(),
            records_in: metrics.records_appended.get(),
        };
        let groups = lag::coordinated_groups(broker, None).await;
        let mut state = self.state.lock().expect("history lock");
        if let Some(last) = state.last {
            let seconds = ((now_ms - last.at_ms) as f64 / 1000.0).max(0.001);
            let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / seconds;
            state
                .bytes_in
                .get_or_insert_with(Ring::new)
                .push(now_ms, rate(counters.bytes_in, last.bytes_in));
            state
                .bytes_out
                .get_or_insert_with(Ring::new)
                .push(now_ms, rate(counters.bytes_out, last.bytes_out));
            state
                .records_in
                .get_or_insert_with(Ring::new)
                .push(now_ms, rate(counters.records_in, last.records_in));
        }
        state.last = Some(counters);
        for group in groups {
            let (ring, seen) = state
                .lag
                .entry(group.group.clone())
                .or_insert_with(|| (Ring::new(), now_ms));
            ring.push(now_ms, group.lag as f64);
            *seen = now_ms;
        }
        while state.lag.len() > MAX_GROUPS {
            let oldest = state
                .lag
                .iter()
                .min_by_key(|(_, (_, seen))| *seen)
                .map(|(name, _)| name.clone());
            match oldest {
                Some(name) => state.lag.remove(&name),
                None => break,
            };
        }
    }

    /// Bytes in and out, and records in, per second.
    pub(crate) fn throughput(&self) -> Chart {
        let state = self.state.lock().expect("history lock");
        let named = [
            ("bytes_in", &state.bytes_in),
            ("bytes_out", &state.bytes_out),
            ("records_in", &state.records_in),
        ];
        chart(named.iter().filter_map(|(n, r)| Some((*n, r.as_ref()?))))
    }

    /// A group's total lag over time, if it was sampled.
    pub(crate) fn lag(&self, group: &str) -> Option<Chart> {
        let state = self.state.lock().expect("history lock");
        let (ring, _) = state.lag.get(group)?;
        Some(chart([("lag", ring)].into_iter()))
    }
}

fn chart<'a>(rings: impl Iterator<Item = (&'a str, &'a Ring)>) -> Chart {
    let interval_ms = SAMPLE_INTERVAL.as_millis() as i64;
    let mut times = Vec::new();
    let mut series = Vec::new();
    for (name, ring) in rings {
        let points = ring.points(interval_ms);
        if times.is_empty() {
            times = points.iter().map(|(t, _)| *t).collect();
        }
        series.push((
            name.to_owned(),
            points.into_iter().map(|(_, v)| v).collect(),
        ));
    }
    Chart {
        interval_ms,
        times,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_the_newest_points_oldest_first() {
        let mut ring = Ring::new();
        for i in 0..SAMPLES + 3 {
            ring.push(1_000_000 + i as i64 * 10_000, i as f64);
        }
        let points = ring.points(10_000);
        assert_eq!(points.len(), SAMPLES, "bounded");
        assert_eq!(points[0].1, 3.0);
        assert_eq!(points[SAMPLES - 1].1, (SAMPLES + 2) as f64);
        let newest = 1_000_000 + (SAMPLES as i64 + 2) * 10_000;
        assert_eq!(points[SAMPLES - 1].0, newest);
        assert_eq!(points[0].0, newest - (SAMPLES as i64 - 1) * 10_000);
    }

    #[test]
    fn a_short_ring_gives_what_it_has() {
        let mut ring = Ring::new();
        ring.push(20_000, 5.0);
        ring.push(30_000, 7.0);
        assert_eq!(ring.points(10_000), vec![(20_000, 5.0), (30_000, 7.0)]);
    }
}
