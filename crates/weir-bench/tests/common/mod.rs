//! Runs `weir-bench` and the brokers it measures as child processes.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub const WEIR_BENCH: &str = env!("CARGO_BIN_EXE_weir-bench");

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    /// The `kafka=` address of its ready line.
    pub kafka: String,
}

impl Server {
    /// Starts `program args` and waits for its first line on stdout, which
    /// must start with `ready_prefix` and name the address as `kafka=`.
    pub fn start(program: &Path, args: &[&str], ready_prefix: &str) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .env("WEIR_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the ready line");
        assert!(
            line.starts_with(ready_prefix),
            "unexpected first line: {line:?}"
        );
        let kafka = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("kafka="))
            .unwrap_or_else(|| panic!("no kafka= in {line:?}"))
            .to_owned();
        Self { child, kafka }
    }

    /// `weir-bench null-broker` on an ephemeral port.
    pub fn null_broker(partitions: u32) -> Self {
        Self::start(
            Path::new(WEIR_BENCH),
            &[
                "null-broker",
                "--listen",
                "127.0.0.1:0",
                "--partitions",
                &partitions.to_string(),
            ],
            "weir-bench null-broker ready:",
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `weir-bench ARGS --json`, asserts it succeeded and printed one
/// JSON object, and returns it.
pub fn bench_json(args: &[&str]) -> serde_json::Value {
    let output = Command::new(WEIR_BENCH)
        .args(args)
        .arg("--json")
        .stderr(Stdio::inherit())
        .output()
        .expect("run weir-bench");
    let stdout = String::from_utf8(output.stdout).expect("utf-8 output");
    assert!(
        output.status.success(),
        "weir-bench {args:?} failed ({}): {stdout}",
        output.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one line of JSON, got {stdout:?}");
    serde_json::from_str(lines[0]).expect("a JSON object")
}

/// Asserts the fields every produce report has, and that all `records`
/// were acknowledged.
pub fn assert_produced(report: &serde_json::Value, records: u64) {
    assert_eq!(report["mode"], "produce", "{report}");
    assert_eq!(report["records"], records, "{report}");
    assert_eq!(report["acked"], records, "{report}");
    assert_eq!(report["errors"], 0, "{report}");
    assert_eq!(report["ok"], true, "{report}");
    assert!(
        report["records_per_sec"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(report["mb_per_sec"].as_f64().unwrap() > 0.0, "{report}");
    assert_latency(&report["latency_ms"]);
}

/// p50 ≤ p99 ≤ p99.9 ≤ max, all numbers.
pub fn assert_latency(latency: &serde_json::Value) {
    let get = |name: &str| {
        latency[name]
            .as_f64()
            .unwrap_or_else(|| panic!("latency {name} in {latency}"))
    };
    let (p50, p99, p999, max) = (get("p50"), get("p99"), get("p999"), get("max"));
    assert!(
        0.0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "{latency}"
    );
}

/// The `weir` binary of the same build profile as this test, if built.
pub fn weir_binary() -> Option<PathBuf> {
    // The test runs from target/<profile>/deps/.
    let profile_dir = std::env::current_exe().ok()?.parent()?.parent()?.to_owned();
    let candidates = [
        profile_dir.join("weir"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/weir"),
    ];
    candidates.into_iter().find(|path| path.is_file())
}
