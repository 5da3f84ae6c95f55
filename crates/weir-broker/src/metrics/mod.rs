//! Prometheus metrics of one broker (no global registry, so several brokers
//! can live in one process).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub mod health;
pub mod process;

pub use health::{HealthMetrics, ListenerLabels, LogDirLabels};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    pub api: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabels {
    pub topic: String,
    pub partition: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupPartitionLabels {
    pub group: String,
    pub topic: String,
    pub partition: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub operation: String,
}

/// Tiered storage's metrics, after Kafka's `RemoteCopyBytesPerSec`,
/// `RemoteFetchBytesPerSec`, `RemoteDeleteRequestsPerSec`, `*ErrorsPerSec`,
/// `RemoteCopyLagBytes`/`Segments` and `RemoteLogSizeBytes`.
#[derive(Debug, Default)]
pub struct RemoteMetrics {
    pub copy_bytes: Counter,
    pub copy_segments: Counter,
    pub fetch_bytes: Counter,
    pub fetch_requests: Counter,
    pub delete_segments: Counter,
    /// By operation: copy, fetch, delete.
    pub errors: Family<OperationLabels, Counter>,
    pub copy_lag_bytes: Family<PartitionLabels, Gauge>,
    pub copy_lag_segments: Family<PartitionLabels, Gauge>,
    pub log_size_bytes: Family<PartitionLabels, Gauge>,
}

impl RemoteMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let registry = registry.sub_registry_with_prefix("remote");
        registry.register(
            "copy_bytes",
            "Bytes of segments copied to the remote tier",
            metrics.copy_bytes.clone(),
        );
        registry.register(
            "copy_segments",
            "Segments copied to the remote tier",
            metrics.copy_segments.clone(),
        );
        registry.register(
            "fetch_bytes",
            "Record bytes read from the remote tier for fetches",
            metrics.fetch_bytes.clone(),
        );
        registry.register(
            "fetch_requests",
            "Partition reads served from the remote tier",
            metrics.fetch_requests.clone(),
        );
        registry.register(
            "delete_segments",
            "Segments deleted from the remote tier",
            metrics.delete_segments.clone(),
        );
        registry.register(
            "errors",
            "Failed remote tier operations, by operation (copy, fetch, delete)",
            metrics.errors.clone(),
        );
        registry.register("copy_lag_bytes", "Bytes of sealed segments below the last stable offset not yet copied: local disk held until the remote tier has them", metrics.copy_lag_bytes.clone());
        registry.register(
            "copy_lag_segments",
            "Sealed segments below the last stable offset not yet copied",
            metrics.copy_lag_segments.clone(),
        );
        registry.register(
            "log_size_bytes",
            "Bytes of a partition in the remote tier",
            metrics.log_size_bytes.clone(),
        );
        metrics
    }

    /// Counts a failed operation.
    pub fn error(&self, operation: &str) {
        self.errors
            .get_or_create(&OperationLabels {
                operation: operation.to_owned(),
            })
            .inc();
    }
}

/// A partition of a mirror topic.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MirrorPartitionLabels {
    pub mirror: String,
    pub topic: String,
    pub partition: String,
}

/// Cluster mirroring's, per mirror partition this broker leads.
#[derive(Default)]
pub struct MirrorMetrics {
    /// The source's high watermark less the mirrored log end.
    pub lag_records: Family<MirrorPartitionLabels, Gauge>,
    /// How long the mirror has been behind the source (0: caught up).
    pub lag_seconds: Family<MirrorPartitionLabels, Gauge<f64, AtomicU64>>,
}

impl MirrorMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let registry = registry.sub_registry_with_prefix("mirror");
        registry.register(
            "lag_records",
            "Records of a mirror partition's source not yet mirrored",
            metrics.lag_records.clone(),
        );
        registry.register(
            "lag_seconds",
            "Seconds a mirror partition has been behind its source (0: caught up)",
            metrics.lag_seconds.clone(),
        );
        metrics
    }

    /// Drops a partition's series (its mirror or leadership went).
    pub fn forget(&self, labels: &MirrorPartitionLabels) {
        self.lag_records.remove(labels);
        self.lag_seconds.remove(labels);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuthenticationLabels {
    pub listener: String,
    /// TLS, or the SASL mechanism.
    pub mechanism: String,
}

/// What the `resource` label of `weir_authorization_denials_total` shows
/// in place of a name it may not show: one the client may have made up (no
/// such resource), or one the principal may not see (no DESCRIBE on it).
/// Parentheses are in no topic name Kafka accepts.
pub const HIDDEN_RESOURCE: &str = "(hidden)";

/// The most series `weir_authorization_denials_total` takes (give or take
/// the denials counted at the same moment). Past it, a denial with labels
/// not seen yet is counted with `principal` and `resource` both
/// [`OTHER_DENIALS`], by operation and resource type, so that no client
/// can grow the broker's memory or `/metrics` without bound.
pub const MAX_DENIAL_SERIES: usize = 1000;

/// The `principal` and `resource` of denials past [`MAX_DENIAL_SERIES`].
pub const OTHER_DENIALS: &str = "(other)";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DenialLabels {
    pub principal: String,
    pub operation: String,
    pub resource_type: String,
    pub resource: String,
}

pub struct Metrics {
    /// The health signals: partitions, ISR, controller, connections, logs.
    pub health: HealthMetrics,
    /// Cluster mirroring's.
    pub mirror: MirrorMetrics,
    /// The remote tier's (tiered storage).
    pub remote: RemoteMetrics,
    registry: Registry,
    pub requests: Family<ApiLabels, Counter>,
    pub request_seconds: Family<ApiLabels, Histogram>,
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    pub records_appended: Counter,
    pub fetches_waiting: Gauge,
    pub fetch_sessions: Gauge,
    pub log_end_offset: Family<PartitionLabels, Gauge>,
    pub consumer_bytes_out: Family<PartitionLabels, Counter>,
    pub producer_bytes_in: Family<PartitionLabels, Counter>,
    pub consumer_group_lag: Family<GroupPartitionLabels, Gauge>,
    pub consumer_group_lag_seconds: Family<GroupPartitionLabels, Gauge<f64, AtomicU64>>,
    pub consumer_group_lost_to_retention: Family<GroupPartitionLabels, Gauge>,
    pub log_cleaner_passes: Counter,
    pub log_cleaner_bytes_cleaned: Counter,
    pub log_cleaner_bytes_written: Counter,
    pub log_cleaner_records_removed: Counter,
    pub log_cleaner_failures: Counter,
    pub transactions_open: Gauge,
    pub transaction_oldest_open_seconds: Gauge<f64, AtomicU64>,
    pub authentication_failures: Family<AuthenticationLabels, Counter>,
    pub authorization_denials: Family<DenialLabels, Counter>,
    /// The series `authorization_denials` has made (or a few more, when
    /// two denials made the same one at once).
    denial_series: AtomicUsize,
    pub share_group_dead_lettered: Family<GroupPartitionLabels, Counter>,
    pub share_group_records_archived: Family<GroupPartitionLabels, Counter>,
    pub share_group_records_available: Family<GroupPartitionLabels, Gauge>,
    pub share_group_records_acquired: Family<GroupPartitionLabels, Gauge>,
    pub share_group_oldest_available_seconds: Family<GroupPartitionLabels, Gauge<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("weir");
        let requests = Family::<ApiLabels, Counter>::default();
        let request_seconds = Family::<ApiLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
        });
        let bytes_in = Counter::default();
        let bytes_out = Counter::default();
        let records_appended = Counter::default();
        let fetches_waiting = Gauge::default();
        let fetch_sessions = Gauge::default();
        let log_end_offset = Family::<PartitionLabels, Gauge>::default();
        let consumer_bytes_out = Family::<PartitionLabels, Counter>::default();
        registry.register(
            "consumer_bytes_out",
            "Record bytes this broker's replica of a partition sent to consumers, as its \
             leader or as a follower they were sent to read from (KIP-392)",
            consumer_bytes_out.clone(),
        );
        let producer_bytes_in = Family::<PartitionLabels, Counter>::default();
        registry.register(
            "producer_bytes_in",
            "Record bytes producers appended to this broker's partitions as their leader \
             (by topic: Kafka's BytesInPerSec)",
            producer_bytes_in.clone(),
        );
        let consumer_group_lag = Family::<GroupPartitionLabels, Gauge>::default();
        let consumer_group_lag_seconds =
            Family::<GroupPartitionLabels, Gauge<f64, AtomicU64>>::default();
        let consumer_group_lost_to_retention = Family::<GroupPartitionLabels, Gauge>::default();
        let log_cleaner_passes = Counter::default();
        let log_cleaner_bytes_cleaned = Counter::default();
        let log_cleaner_bytes_written = Counter::default();
        let log_cleaner_records_removed = Counter::default();
        let log_cleaner_failures = Counter::default();
        let transactions_open = Gauge::default();
        let transaction_oldest_open_seconds = Gauge::<f64, AtomicU64>::default();
        let authentication_failures = Family::<AuthenticationLabels, Counter>::default();
        let authorization_denials = Family::<DenialLabels, Counter>::default();
        let share_group_dead_lettered = Family::<GroupPartitionLabels, Counter>::default();
        let share_group_records_archived = Family::<GroupPartitionLabels, Counter>::default();
        registry.register(
            "share_group_records_archived",
            "Records a share group archived (rejected, delivered too often, or gone from the \
             log) on the partitions this broker leads",
            share_group_records_archived.clone(),
        );
        let share_group_records_available = Family::<GroupPartitionLabels, Gauge>::default();
        registry.register(
            "share_group_records_available",
            "Records of a share-partition led here waiting to be acquired, up to the log end",
            share_group_records_available.clone(),
        );
        let share_group_records_acquired = Family::<GroupPartitionLabels, Gauge>::default();
        registry.register(
            "share_group_records_acquired",
            "Records of a share-partition led here that a member holds now",
            share_group_records_acquired.clone(),
        );
        let share_group_oldest_available_seconds =
            Family::<GroupPartitionLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "share_group_oldest_available_age_seconds",
            "Age of the oldest record of a share-partition led here waiting to be acquired",
            share_group_oldest_available_seconds.clone(),
        );
        registry.register(
            "share_group_dead_lettered",
            "Records a share group wrote to its dead-letter topic, by group and source partition",
            share_group_dead_lettered.clone(),
        );
        registry.register(
            "authentication_failures",
            "Failed TLS handshakes and SASL authentications, by listener and mechanism (the \
             names clients claim are not labels: anyone can make up as many as they like)",
            authentication_failures.clone(),
        );
        registry.register(
            "authorization_denials",
            "Requests or parts of requests an authenticated principal was denied, by principal, \
             operation and resource; the resource's name only if it exists and the principal \
             may describe it, (hidden) otherwise",
            authorization_denials.clone(),
        );
        registry.register("requests", "Requests handled, by API", requests.clone());
        registry.register(
            "request_duration_seconds",
            "Time from a request's arrival to its response, by API",
            request_seconds.clone(),
        );
        registry.register("bytes_in", "Request bytes received", bytes_in.clone());
        registry.register("bytes_out", "Response bytes sent", bytes_out.clone());
        registry.register(
            "records_appended",
            "Records appended to partition logs",
            records_appended.clone(),
        );
        registry.register(
            "fetches_waiting",
            "Fetch requests waiting for records or their max wait (Kafka's fetch purgatory)",
            fetches_waiting.clone(),
        );
        registry.register(
            "fetch_sessions",
            "Incremental fetch sessions held (Kafka's NumIncrementalFetchSessions)",
            fetch_sessions.clone(),
        );
        registry.register(
            "log_end_offset",
            "Log end offset of each partition",
            log_end_offset.clone(),
        );
        registry.register(
            "consumer_group_lag",
            "Records between a group's committed offset and the high watermark",
            consumer_group_lag.clone(),
        );
        registry.register(
            "consumer_group_lag_seconds",
            "Age of the oldest record a group has not consumed, from its timestamp",
            consumer_group_lag_seconds.clone(),
        );
        registry.register(
            "consumer_group_lost_to_retention",
            "Records a group never read because retention deleted them first",
            consumer_group_lost_to_retention.clone(),
        );
        registry.register(
            "log_cleaner_passes",
            "Log cleaner passes that cleaned something",
            log_cleaner_passes.clone(),
        );
        registry.register(
            "log_cleaner_bytes_cleaned",
            "Bytes the log cleaner read from the logs it cleaned",
            log_cleaner_bytes_cleaned.clone(),
        );
        registry.register(
            "log_cleaner_bytes_written",
            "Bytes of the cleaned segments the log cleaner wrote",
            log_cleaner_bytes_written.clone(),
        );
        registry.register(
            "log_cleaner_records_removed",
            "Records the log cleaner removed: superseded, without a key, or expired tombstones",
            log_cleaner_records_removed.clone(),
        );
        registry.register(
            "log_cleaner_failures",
            "Log cleaner passes that failed (the partition rests a while)",
            log_cleaner_failures.clone(),
        );
        registry.register(
            "transactions_open",
            "Open transactions this broker coordinates",
            transactions_open.clone(),
        );
        registry.register(
            "transaction_oldest_open_seconds",
            "Age of the oldest open transaction this broker coordinates (0: none)",
            transaction_oldest_open_seconds.clone(),
        );
        let health = HealthMetrics::register(&mut registry);
        let remote = RemoteMetrics::register(&mut registry);
        let mirror = MirrorMetrics::register(&mut registry);
        Self {
            health,
            mirror,
            remote,
            registry,
            requests,
            request_seconds,
            bytes_in,
            bytes_out,
            records_appended,
            fetches_waiting,
            fetch_sessions,
            log_end_offset,
            consumer_bytes_out,
            producer_bytes_in,
            consumer_group_lag,
            consumer_group_lag_seconds,
            consumer_group_lost_to_retention,
            log_cleaner_passes,
            log_cleaner_bytes_cleaned,
            log_cleaner_bytes_written,
            log_cleaner_records_removed,
            log_cleaner_failures,
            transactions_open,
            transaction_oldest_open_seconds,
            authentication_failures,
            authorization_denials,
            denial_series: AtomicUsize::new(0),
            share_group_dead_lettered,
            share_group_records_archived,
            share_group_records_available,
            share_group_records_acquired,
            share_group_oldest_available_seconds,
        }
    }
}

impl Metrics {
    pub fn observe_request(&self, api: &str, seconds: f64) {
        let labels = ApiLabels {
            api: api.to_owned(),
        };
        self.requests.get_or_create(&labels).inc();
        self.request_seconds.get_or_create(&labels).observe(seconds);
    }

    /// A client failed to authenticate on `listener` with `mechanism`.
    pub fn failed_authentication(&self, listener: &str, mechanism: &str) {
        self.authentication_failures
            .get_or_create(&AuthenticationLabels {
                listener: listener.to_owned(),
                mechanism: mechanism.to_owned(),
            })
            .inc();
    }

    /// A request, or part of one, was denied. `resource` is a name the
    /// caller may show (see [`HIDDEN_RESOURCE`]); the family keeps at most
    /// about [`MAX_DENIAL_SERIES`] series.
    pub fn authorization_denied(
        &self,
        principal: &str,
        operation: weir_meta::AclOperation,
        resource_type: weir_meta::ResourceType,
        resource: &str,
    ) {
        let mut labels = DenialLabels {
            principal: principal.to_owned(),
            operation: operation.to_string(),
            resource_type: resource_type.to_string(),
            resource: resource.to_owned(),
        };
        let denials = &self.authorization_denials;
        if denials.get(&labels).is_none()
            && self.denial_series.fetch_add(1, Ordering::Relaxed) >= MAX_DENIAL_SERIES
        {
            self.denial_series.fetch_sub(1, Ordering::Relaxed);
            labels.principal = OTHER_DENIALS.to_owned();
            labels.resource = OTHER_DENIALS.to_owned();
        }
        denials.get_or_create(&labels).inc();
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// The metrics in Prometheus's text format (0.0.4), which a browser
    /// shows and every scraper reads; [`encode`](Self::encode) gives
    /// OpenMetrics.
    pub fn encode_prometheus_text(&self) -> String {
        to_prometheus_text(&self.encode())
    }
}

/// OpenMetrics text as Prometheus's text format: a counter's family takes
/// its samples' `_total` name, and the `# UNIT` and `# EOF` lines go.
fn to_prometheus_text(openmetrics: &str) -> String {
    let mut counters: Vec<&str> = Vec::new();
    for line in openmetrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.push(name);
        }
    }
    let mut out = String::with_capacity(openmetrics.len() + counters.len() * 16);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(renamed) => out.push_str(&renamed),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metric names the dashboard's queries use: the `weir_*` and
    /// `process_*` words of its `expr` fields.
    fn dashboard_metrics() -> std::collections::BTreeSet<String> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana/weir.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
        fn exprs(value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(map) => {
                    for (key, v) in map {
                        match (key.as_str(), v) {
                            ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                            _ => exprs(v, out),
                        }
                    }
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        exprs(&dashboard, &mut found);
        found
            .iter()
            .flat_map(|e| e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
            .filter(|w| w.starts_with("weir_") || w.starts_with("process_"))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_metric_of_the_grafana_dashboard_is_exported() {
        let m = Metrics::default();
        // One series in every family, so that each shows in the text.
        let p = PartitionLabels {
            topic: "t".into(),
            partition: "0".into(),
        };
        let g = GroupPartitionLabels {
            group: "g".into(),
            topic: "t".into(),
            partition: "0".into(),
        };
        let listener = ListenerLabels {
            listener: "PLAINTEXT".into(),
        };
        let dir = LogDirLabels { dir: "d".into() };
        let mirror = MirrorPartitionLabels {
            mirror: "m".into(),
            topic: "t".into(),
            partition: "0".into(),
        };
        m.observe_request("Produce", 0.001);
        for family in [&m.log_end_offset, &m.health.log_size_bytes] {
            family.get_or_create(&p).set(1);
        }
        for family in [
            &m.remote.copy_lag_bytes,
            &m.remote.copy_lag_segments,
            &m.remote.log_size_bytes,
        ] {
            family.get_or_create(&p).set(1);
        }
        for family in [&m.consumer_bytes_out, &m.producer_bytes_in] {
            family.get_or_create(&p).inc();
        }
        for family in [
            &m.consumer_group_lag,
            &m.consumer_group_lost_to_retention,
            &m.share_group_records_available,
            &m.share_group_records_acquired,
        ] {
            family.get_or_create(&g).set(1);
        }
        m.consumer_group_lag_seconds.get_or_create(&g).set(1.0);
        m.share_group_oldest_available_seconds
            .get_or_create(&g)
            .set(1.0);
        for family in [
            &m.share_group_dead_lettered,
            &m.share_group_records_archived,
        ] {
            family.get_or_create(&g).inc();
        }
        m.health.connections.get_or_create(&listener).set(1);
        m.health.connection_creations.get_or_create(&listener).inc();
        for family in [
            &m.health.log_dir_size_bytes,
            &m.health.log_dir_free_bytes,
            &m.health.log_dir_total_bytes,
        ] {
            family.get_or_create(&dir).set(1);
        }
        m.mirror.lag_records.get_or_create(&mirror).set(1);
        m.mirror.lag_seconds.get_or_create(&mirror).set(1.0);
        let text = m.encode_prometheus_text() + &process::ProcessStats::read().encode(false);
        let samples: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .collect();
        let used = dashboard_metrics();
        assert!(used.len() > 20, "{used:?}");
        let missing: Vec<&String> = used
            .iter()
            .filter(|n| !samples.contains(n.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "the dashboard uses metrics /metrics lacks: {missing:?}"
        );
    }

    #[test]
    fn prometheus_text_names_counter_families_by_their_samples() {
        let metrics = Metrics::default();
        metrics.bytes_in.inc_by(7);
        let text = metrics.encode_prometheus_text();
        assert!(
            text.contains("# TYPE weir_bytes_in_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP weir_bytes_in_total Request bytes received"),
            "{text}"
        );
        assert!(text.contains("\nweir_bytes_in_total 7\n"), "{text}");
        assert!(
            text.contains("# TYPE weir_fetch_sessions gauge\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        assert!(metrics.encode().ends_with("# EOF\n"));
    }
    use weir_meta::{AclOperation, ResourceType};

    #[test]
    fn denials_past_the_series_limit_are_counted_together_by_operation_and_type() {
        let metrics = Metrics::default();
        for i in 0..MAX_DENIAL_SERIES + 500 {
            let principal = format!("User:u{i}");
            metrics.authorization_denied(&principal, AclOperation::Read, ResourceType::Topic, "t");
        }
        let series = metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("weir_authorization_denials_total{"))
            .count();
        assert_eq!(series, MAX_DENIAL_SERIES + 1);
        let other = DenialLabels {
            principal: OTHER_DENIALS.to_owned(),
            operation: AclOperation::Read.to_string(),
            resource_type: ResourceType::Topic.to_string(),
            resource: OTHER_DENIALS.to_owned(),
        };
        assert_eq!(
            metrics.authorization_denials.get_or_create(&other).get(),
            500
        );
        // A series that exists goes on counting under its own labels.
        metrics.authorization_denied("User:u0", AclOperation::Read, ResourceType::Topic, "t");
        let first = DenialLabels {
            principal: "User:u0".to_owned(),
            resource: "t".to_owned(),
            ..other
        };
        assert_eq!(metrics.authorization_denials.get_or_create(&first).get(), 2);
    }
}
