//! Kafka's byte and time rates as its quotas measure them: a `Rate` (or
//! `SimpleRate`) over a `SampledStat`, a ring of windows of which the
//! oldest are forgotten. Shared by the client quotas and the replication
//! throttles; without a clock of its own (callers pass the time).

/// How a rate is sampled: `samples` windows of `window_ms`
/// (`quota.window.num` and `quota.window.size.seconds`, or their
/// `replication.quota.*` counterparts).
#[derive(Clone, Copy, Debug)]
pub struct QuotaWindows {
    pub samples: usize,
    pub window_ms: i64,
}

/// A ring of windows, each with the sum of what was recorded in it.
#[derive(Debug)]
pub(crate) struct Rate {
    samples: Vec<Sample>,
    current: usize,
    /// How many windows the ring holds: Kafka's client quotas keep one
    /// more than `samples`, overlapping the start of the measured span.
    ring: usize,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: i64,
    last_event_ms: i64,
    value: f64,
}

impl Sample {
    fn new(now: i64) -> Self {
        Sample {
            start_ms: now,
            last_event_ms: now,
            value: 0.0,
        }
    }
}

impl Rate {
    /// An empty rate over a ring of `ring` windows.
    pub(crate) fn new(ring: usize) -> Self {
        Rate {
            samples: Vec::new(),
            current: 0,
            ring: ring.max(1),
        }
    }

    pub(crate) fn record(&mut self, windows: QuotaWindows, value: f64, now: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        if now - self.samples[self.current].start_ms >= windows.window_ms {
            self.current = (self.current + 1) % self.ring;
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now));
            } else {
                self.samples[self.current] = Sample::new(now);
            }
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.last_event_ms = now;
    }

    /// Forgets windows with no event in the measured span.
    fn purge(&mut self, windows: QuotaWindows, now: i64) {
        let expiry = windows.samples as i64 * windows.window_ms;
        for sample in &mut self.samples {
            if now - sample.last_event_ms >= expiry {
                *sample = Sample::new(now);
            }
        }
    }

    fn elapsed(&mut self, windows: QuotaWindows, now: i64) -> i64 {
        self.purge(windows, now);
        let oldest = self.samples.iter().map(|s| s.start_ms).min().unwrap_or(now);
        now - oldest
    }

    fn total(&self) -> f64 {
        self.samples.iter().map(|s| s.value).sum()
    }

    /// The span `Rate` measures over, in milliseconds: since the oldest
    /// window, and at least all but one full window, so that a first
    /// burst is not judged on its own.
    pub(crate) fn window_size(&mut self, windows: QuotaWindows, now: i64) -> i64 {
        let mut elapsed = self.elapsed(windows, now);
        let full = elapsed / windows.window_ms;
        let min_full = windows.samples as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * windows.window_ms;
        }
        elapsed.max(1)
    }

    /// Kafka's `Rate`, per second.
    pub(crate) fn measure(&mut self, windows: QuotaWindows, now: i64) -> f64 {
        let size = self.window_size(windows, now);
        self.total() / (size as f64 / 1000.0)
    }

    /// Kafka's `SimpleRate`, per second: over the time since the oldest
    /// window, and at least one window. A burst counts at once, as the
    /// replication throttles want it.
    pub(crate) fn measure_simple(&mut self, windows: QuotaWindows, now: i64) -> f64 {
        let size = self.elapsed(windows, now).max(windows.window_ms).max(1);
        self.total() / (size as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOWS: QuotaWindows = QuotaWindows {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn a_simple_rate_counts_a_burst_over_one_window() {
        let mut rate = Rate::new(WINDOWS.samples);
        rate.record(WINDOWS, 5000.0, 0);
        assert_eq!(rate.measure_simple(WINDOWS, 0), 5000.0);
        // Kafka's Rate spreads the same burst over ten windows.
        assert_eq!(rate.measure(WINDOWS, 0), 500.0);
        // Four seconds on: over the four seconds since.
        assert_eq!(rate.measure_simple(WINDOWS, 4000), 1250.0);
        // Once every window with an event is older than the ring, forgotten.
        assert_eq!(rate.measure_simple(WINDOWS, 11_000), 0.0);
    }

    #[test]
    fn the_ring_reuses_its_oldest_window() {
        let windows = QuotaWindows {
            samples: 2,
            window_ms: 1000,
        };
        let mut rate = Rate::new(2);
        rate.record(windows, 100.0, 0);
        rate.record(windows, 100.0, 1000);
        // The third window replaces the first.
        rate.record(windows, 100.0, 2000);
        assert_eq!(rate.total(), 200.0);
        assert_eq!(rate.measure_simple(windows, 2500), 200.0 / 1.5);
    }
}
