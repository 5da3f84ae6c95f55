//! The result of a run: a summary table for people, or one JSON object.
//!
//! The JSON object is flat: `mode`, the run's parameters, then
//! `records_per_sec`, `mb_per_sec` (payload bytes, MB = 10⁶ bytes),
//! `latency_ms` (`{p50, p99, p999, max}`, or null where the mode measures
//! none) and the mode's other results.

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Latency {
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    pub(crate) p999: f64,
    pub(crate) max: f64,
}

impl Latency {
    /// From a histogram of microseconds; `None` if it is empty.
    pub(crate) fn of(histogram: &Histogram<u64>) -> Option<Self> {
        if histogram.is_empty() {
            return None;
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Some(Self {
            p50: ms(histogram.value_at_quantile(0.50)),
            p99: ms(histogram.value_at_quantile(0.99)),
            p999: ms(histogram.value_at_quantile(0.999)),
            max: ms(histogram.max()),
        })
    }

    fn to_json(self) -> Value {
        json!({ "p50": self.p50, "p99": self.p99, "p999": self.p999, "max": self.max })
    }

    fn to_text(self) -> String {
        format!(
            "p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
            self.p50, self.p99, self.p999, self.max
        )
    }
}

/// One run's parameters and results.
#[derive(Debug)]
pub(crate) struct Report {
    mode: &'static str,
    parameters: Vec<(&'static str, Value)>,
    records_per_sec: f64,
    mb_per_sec: f64,
    /// What `latency_ms` measures, for the table.
    latency_label: &'static str,
    latency: Option<Latency>,
    results: Vec<(&'static str, Value)>,
    latencies: Vec<(&'static str, Option<Latency>)>,
    failure: Option<String>,
    /// CPU time of this process (all threads) when the report was made.
    client_cpu_s: Option<f64>,
}

impl Report {
    pub(crate) fn new(mode: &'static str) -> Self {
        Self {
            mode,
            parameters: Vec::new(),
            records_per_sec: 0.0,
            mb_per_sec: 0.0,
            latency_label: "latency",
            latency: None,
            results: Vec::new(),
            latencies: Vec::new(),
            failure: None,
            client_cpu_s: process_cpu_seconds(),
        }
    }

    pub(crate) fn parameter(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.parameters.push((name, value.into()));
        self
    }

    /// Throughput over `seconds` of `records` records of `bytes` payload.
    pub(crate) fn throughput(mut self, records: u64, bytes: u64, seconds: f64) -> Self {
        if seconds > 0.0 {
            self.records_per_sec = records as f64 / seconds;
            self.mb_per_sec = bytes as f64 / seconds / 1e6;
        }
        self
    }

    /// The main latency (`latency_ms`), described in the table as `label`.
    pub(crate) fn latency(mut self, label: &'static str, latency: Option<Latency>) -> Self {
        self.latency_label = label;
        self.latency = latency;
        self
    }

    pub(crate) fn result(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.results.push((name, value.into()));
        self
    }

    /// Another latency, `name` in the JSON (e.g. `produce_latency_ms`).
    pub(crate) fn other_latency(mut self, name: &'static str, latency: Option<Latency>) -> Self {
        self.latencies.push((name, latency));
        self
    }

    /// Marks the run as failed (the process exits non-zero after printing).
    pub(crate) fn fail_if(mut self, failed: bool, reason: impl FnOnce() -> String) -> Self {
        if failed && self.failure.is_none() {
            self.failure = Some(reason());
        }
        self
    }

    pub(crate) fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("mode".into(), self.mode.into());
        for (name, value) in &self.parameters {
            object.insert((*name).into(), value.clone());
        }
        object.insert("records_per_sec".into(), round(self.records_per_sec, 1));
        object.insert("mb_per_sec".into(), round(self.mb_per_sec, 3));
        object.insert(
            "latency_ms".into(),
            self.latency.map_or(Value::Null, Latency::to_json),
        );
        for (name, latency) in &self.latencies {
            object.insert(
                (*name).into(),
                latency.map_or(Value::Null, Latency::to_json),
            );
        }
        for (name, value) in &self.results {
            object.insert((*name).into(), value.clone());
        }
        object.insert(
            "client_cpu_s".into(),
            self.client_cpu_s.map_or(Value::Null, |s| round(s, 3)),
        );
        object.insert("ok".into(), self.failure.is_none().into());
        Value::Object(object)
    }

    /// The summary table, one `name  value` line per row.
    pub(crate) fn to_text(&self) -> String {
        let mut rows: Vec<(String, String)> = vec![("mode".into(), self.mode.into())];
        for (name, value) in &self.parameters {
            rows.push(((*name).into(), plain(value)));
        }
        rows.push(("records/s".into(), thousands(self.records_per_sec)));
        rows.push(("MB/s".into(), format!("{:.1}", self.mb_per_sec)));
        if self.latency.is_some() || self.latency_label != "latency" {
            rows.push((
                format!("{} (ms)", self.latency_label),
                self.latency.map_or("none".into(), Latency::to_text),
            ));
        }
        for (name, latency) in &self.latencies {
            let label = name.trim_end_matches("_ms").replace('_', " ");
            rows.push((
                format!("{label} (ms)"),
                latency.map_or("none".into(), Latency::to_text),
            ));
        }
        for (name, value) in &self.results {
            rows.push(((*name).replace('_', " "), plain(value)));
        }
        if let Some(cpu) = self.client_cpu_s {
            rows.push(("client CPU s".into(), format!("{cpu:.2}")));
        }
        if let Some(failure) = &self.failure {
            rows.push(("FAILED".into(), failure.clone()));
        }
        let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        let mut text = String::new();
        for (name, value) in rows {
            text.push_str(&format!("{name:<width$}  {value}\n"));
        }
        text
    }

    pub(crate) fn print(&self, json: bool) {
        if json {
            println!("{}", self.to_json());
        } else {
            print!("{}", self.to_text());
        }
    }
}

/// User and system CPU time of this process so far, from `/proc/self/stat`
/// (Linux; in USER_HZ ticks, 100 per second on every Linux ABI).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
    Some((ticks(14)? + ticks(15)?) as f64 / 100.0)
}

fn round(value: f64, decimals: i32) -> Value {
    let scale = 10f64.powi(decimals);
    json!((value * scale).round() / scale)
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or_default()),
        other => other.to_string(),
    }
}

/// `1234567.8` → `1,234,568`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_fields_scripts_read() {
        let mut h = crate::kafka::latency_histogram();
        for micros in 1..=1000 {
            h.record(micros).unwrap();
        }
        let report = Report::new("produce")
            .parameter("records", 1000)
            .parameter("acks", "1")
            .throughput(1000, 100_000, 0.5)
            .latency("produce latency", Latency::of(&h))
            .result("errors", 0);
        let json = report.to_json();
        assert_eq!(json["mode"], "produce");
        assert_eq!(json["records"], 1000);
        assert_eq!(json["acks"], "1");
        assert_eq!(json["records_per_sec"], 2000.0);
        assert_eq!(json["mb_per_sec"], 0.2);
        assert_eq!(json["latency_ms"]["p50"], 0.5);
        assert_eq!(json["latency_ms"]["max"], 1.0);
        assert!(json["latency_ms"]["p99"].is_f64());
        assert!(json["latency_ms"]["p999"].is_f64());
        assert_eq!(json["ok"], true);
        let text = report.to_text();
        assert!(text.contains("records/s"), "{text}");
        assert!(text.contains("2,000"), "{text}");
    }

    #[test]
    fn no_latency_is_null() {
        let report = Report::new("consume").fail_if(true, || "short".into());
        let json = report.to_json();
        assert!(json["latency_ms"].is_null());
        assert_eq!(json["ok"], false);
        assert_eq!(report.failure(), Some("short"));
        assert!(report.to_text().contains("FAILED"));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1234567.8), "1,234,568");
    }
}
