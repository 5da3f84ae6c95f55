//! What a node writes to standard error: every line names the node, as
//! text or as JSON (`--log-format json`), and a clean start and stop of a
//! single node logs no warning and no line per internal partition.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a node with `args` at `WEIR_LOG=info`, creates a topic and a
/// group's offsets topic through it, stops it with SIGTERM, and returns
/// what it logged.
fn log_of_a_short_life(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("weir.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .env("WEIR_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut kafka = None;
    for line in stdout.lines().map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("weir ready: kafka=") {
            kafka = rest.split(' ').next().map(str::to_owned);
            break;
        }
        assert!(Instant::now() < deadline, "not ready");
    }
    let kafka = kafka.expect("ready line");
    common::cli::run(&["topic", "create", "logged", "--bootstrap", &kafka], b"").ok();
    // A group's first FindCoordinator creates __consumer_offsets, whose
    // fifty partitions this node then coordinates.
    let mut raw = common::raw::Raw::connect(&kafka);
    let deadline = Instant::now() + Duration::from_secs(20);
    while raw.find_coordinator(0, "readers").error_code != 0 {
        assert!(Instant::now() < deadline, "no coordinator");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(raw);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn text_lines_name_the_node_and_a_clean_life_logs_no_warning() {
    let log = log_of_a_short_life(&["--node-id", "5"]);
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() >= 3, "{log}");
    for line in &lines {
        assert!(line.starts_with("node=5 "), "{line}");
        assert!(
            !line.contains(" WARN ") && !line.contains(" ERROR "),
            "{log}"
        );
    }
    assert!(
        log.contains("coordinating 50 partition(s) of __consumer_offsets"),
        "one line for all fifty: {log}"
    );
    assert!(
        !log.contains("coordinating the groups of a __consumer_offsets partition"),
        "{log}"
    );
}

#[test]
fn json_lines_name_the_node_and_parse() {
    let log = log_of_a_short_life(&["--node-id", "6", "--log-format", "json"]);
    let mut messages = Vec::new();
    for line in log.lines() {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(parsed["node"], 6, "{line}");
        assert!(parsed["timestamp"].is_string(), "{line}");
        assert!(parsed["level"].is_string(), "{line}");
        messages.push(
            parsed["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        );
    }
    assert!(
        messages.iter().any(|m| m.contains("created topic")),
        "{messages:?}"
    );
}

#[test]
fn a_controller_peer_that_is_down_is_told_of_once_not_at_every_retry() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("weir.log");
    let own = common::cluster::free_port();
    let absent = common::cluster::free_port();
    // A quorum of two whose other voter never comes: Raft retries it
    // every few hundred milliseconds.
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--controller-listen",
            &format!("127.0.0.1:{own}"),
            "--controllers",
            &format!("1@127.0.0.1:{own},2@127.0.0.1:{absent}"),
        ])
        .env_remove("WEIR_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(5));
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).unwrap();
    let about_the_peer = logged
        .lines()
        .filter(|l| l.contains("controller peer"))
        .count();
    assert_eq!(about_the_peer, 1, "{logged}");
    assert!(!logged.contains("openraft"), "{logged}");
    assert!(logged.lines().count() < 10, "{logged}");
}
