//! The standard `process_*` metrics every Prometheus client library
//! exports (CPU, memory, descriptors, start time), read from `/proc` at
//! each scrape. They carry no `weir_` prefix, so that the dashboards and
//! alerts written for any process work unchanged.

use std::fmt::Write;

/// Linux's `USER_HZ`, the unit of `/proc/<pid>/stat`'s CPU times: 100 on
/// every architecture it runs on.
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc` says of this process; `None` where it cannot be read.
#[derive(Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_memory_bytes: Option<u64>,
    pub virtual_memory_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// This process's, now.
    pub fn read() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().map(stat_fields).unwrap_or_default();
        let field = |n: usize| fields.get(n).and_then(|f| f.parse::<u64>().ok());
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        // `VmRSS:     1234 kB`
        let kilobytes = |key: &str| {
            status.lines().find_map(|l| {
                let value = l.strip_prefix(key)?.trim().strip_suffix(" kB")?;
                value.trim().parse::<u64>().ok().map(|kb| kb * 1024)
            })
        };
        // Fields counted from 1 in proc(5), `state` (3) being fields[0].
        let ticks = |n: usize| field(n - 3);
        let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        });
        Self {
            cpu_seconds: ticks(14)
                .zip(ticks(15))
                .map(|(user, system)| (user + system) as f64 / CLOCK_TICKS_PER_SECOND),
            virtual_memory_bytes: kilobytes("VmSize:"),
            resident_memory_bytes: kilobytes("VmRSS:"),
            start_time_seconds: ticks(22)
                .zip(boot_time)
                .map(|(start, boot)| boot as f64 + start as f64 / CLOCK_TICKS_PER_SECOND),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| entries.count() as u64),
            max_fds: nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .ok()
                .map(|(soft, _)| soft),
        }
    }

    /// The metrics as text: OpenMetrics' or Prometheus's, which differ in
    /// how a counter's family is named.
    pub fn encode(&self, openmetrics: bool) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: Option<String>| {
            let Some(value) = value else { return };
            let family = match (openmetrics, kind) {
                (true, "counter") => name.strip_suffix("_total").unwrap_or(name),
                _ => name,
            };
            let _ = write!(
                out,
                "# HELP {family} {help}\n# TYPE {family} {kind}\n{name} {value}\n"
            );
        };
        metric(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            self.cpu_seconds.map(|v| v.to_string()),
        );
        metric(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            self.resident_memory_bytes.map(|v| v.to_string()),
        );
        metric(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            self.virtual_memory_bytes.map(|v| v.to_string()),
        );
        metric(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            self.open_fds.map(|v| v.to_string()),
        );
        metric(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            self.max_fds.map(|v| v.to_string()),
        );
        metric(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            self.start_time_seconds.map(|v| v.to_string()),
        );
        out
    }
}

/// The fields of `/proc/<pid>/stat` after the command name (which may hold
/// spaces and parentheses: it ends at the last `)`), from `state` on.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rfind(')')
        .map(|end| stat[end + 1..].split_whitespace().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_from_proc() {
        let stats = ProcessStats::read();
        assert!(stats.resident_memory_bytes.unwrap() > 1 << 20, "{stats:?}");
        assert!(stats.open_fds.unwrap() >= 3, "{stats:?}");
        assert!(stats.cpu_seconds.is_some(), "{stats:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = stats.start_time_seconds.unwrap();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started} vs {now}"
        );
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let fields = stat_fields("42 (a (b) c) S 1 2 3");
        assert_eq!(fields, ["S", "1", "2", "3"]);
    }

    #[test]
    fn counters_are_named_as_each_format_wants() {
        let stats = ProcessStats {
            cpu_seconds: Some(1.5),
            ..ProcessStats::default()
        };
        let prometheus = stats.encode(false);
        assert!(
            prometheus.contains(
                "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"
            ),
            "{prometheus}"
        );
        let open = stats.encode(true);
        assert!(
            open.contains("# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 1.5\n"),
            "{open}"
        );
        assert!(
            !open.contains("process_open_fds"),
            "unknown values are left out"
        );
    }
}
