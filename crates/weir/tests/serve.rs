//! `weir serve`: settings under their Kafka names, the HTTP endpoint, and a
//! clean shutdown.

mod common;

use std::process::Command;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

fn broker_config(weir: &Weir, name: &'static str) -> (String, i8) {
    let mut raw = Raw::connect(&weir.kafka);
    let response: DescribeConfigsResponse = raw.call(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str(name)]))]),
    );
    let config = &response.results[0].configs[0];
    (
        config.value.as_ref().unwrap().to_string(),
        config.config_source,
    )
}

#[test]
fn kafka_config_names_work_as_flags_env_and_toml() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("weir.toml");
    std::fs::write(
        &toml,
        "\"log.retention.ms\" = 1234\n\"num.partitions\" = 3\n\"message.max.bytes\" = 5000\n",
    )
    .unwrap();
    let weir = Weir::start_with_env(
        &[
            "--config",
            toml.to_str().unwrap(),
            "--message-max-bytes",
            "6000",
        ],
        &[("WEIR_NUM_PARTITIONS", "4")],
    );
    // TOML alone; TOML under an environment variable; TOML under a flag.
    assert_eq!(broker_config(&weir, "log.retention.ms"), ("1234".into(), 4));
    assert_eq!(broker_config(&weir, "num.partitions").0, "4");
    assert_eq!(broker_config(&weir, "message.max.bytes").0, "6000");
    // Untouched: Kafka's default.
    assert_eq!(
        broker_config(&weir, "log.segment.bytes"),
        ("1073741824".into(), 5)
    );
}

#[test]
fn invalid_settings_are_refused_with_a_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "serve",
            "--num-partitions",
            "zero",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("num.partitions"), "{stderr}");
}

#[test]
fn http_ready_metrics_and_cluster() {
    let weir = Weir::start(&[]);
    let (status, body) = weir.http_get("/ready");
    assert_eq!((status, body.trim()), (200, "ready"));
    let (status, body) = weir.http_get("/v1/cluster");
    assert_eq!(status, 200);
    assert!(body.contains("\"node_id\":1"), "{body}");
    assert!(body.contains("\"controller_id\":1"), "{body}");
    // This node is the quorum's one voter, and its leader.
    assert!(body.contains("\"role\":\"leader\""), "{body}");
    assert!(body.contains("\"leader_id\":1"), "{body}");
    assert!(body.contains("\"voters\":[{\"id\":1,"), "{body}");
    assert!(
        body.contains(&format!("\"port\":{}", weir.port())),
        "{body}"
    );
    // A topic, so per-partition and per-API metrics exist.
    Raw::connect(&weir.kafka).topic_metadata("m");
    let (status, metrics) = weir.http_get("/metrics");
    assert_eq!(status, 200);
    for needle in [
        "weir_requests_total{api=\"Metadata\"}",
        "weir_request_duration_seconds_bucket{",
        "weir_bytes_in_total",
        "weir_bytes_out_total",
        "weir_records_appended_total",
        "weir_log_end_offset{topic=\"m\",partition=\"0\"} 0",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    // Prometheus's text format, which a browser shows; OpenMetrics for a
    // scraper that asks for it.
    let (_, head, text) = weir.http_get_with("/metrics", "");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        text.contains("# TYPE weir_bytes_in_total counter"),
        "{text}"
    );
    assert!(!text.contains("# EOF"));
    let (_, head, open) = weir.http_get_with(
        "/metrics",
        "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n",
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    assert!(open.contains("# TYPE weir_bytes_in counter"), "{open}");
    assert!(open.ends_with("# EOF\n"), "{open}");
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let mut weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("c");
    // Unflushed data to flush on the way out.
    let records = weir_log::testing::BatchBuilder::new(3).build();
    assert_eq!(raw.produce("c", 0, records).0, 0);
    drop(raw);
    let status = weir.stop();
    assert!(status.success(), "{status:?}");
    assert!(weir
        .data_dir
        .join("c-0")
        .join(weir_log::CLEAN_SHUTDOWN_FILE)
        .exists());
}

#[test]
fn the_controller_quorum_is_configured_by_flags() {
    // This node as the one voter, named explicitly: the same as the default.
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let controller = format!("127.0.0.1:{port}");
    let voters = format!("1@{controller}");
    let mut weir = Weir::start(&["--controllers", &voters, "--controller-listen", &controller]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("kept");
    weir.restart(true);
    let mut raw = Raw::connect(&weir.kafka);
    let metadata = raw.topic_metadata("kept");
    assert_eq!(metadata.topics[0].error_code, 0);
    // Inconsistent roles are refused with the reason.
    for (args, reason) in [
        (vec!["--roles", "broker"], "name its controllers"),
        (vec!["--roles", "broker,stoker"], "unknown role"),
        (
            vec!["--controllers", "2@127.0.0.1:1"],
            "not among --controllers",
        ),
        (
            vec!["--controllers", "1@127.0.0.1:1", "--roles", "broker"],
            "must have the controller role",
        ),
        (vec!["--controllers", "x@y"], "controllers"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

/// A broker whose standard output and error cannot be written (its log
/// file on a full disk) still starts and serves: losing its own lines must
/// not take it down.
#[test]
fn a_broker_whose_output_cannot_be_written_still_serves() {
    let data = tempfile::tempdir().unwrap();
    let port = common::cluster::free_port();
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data.path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--http-listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
        ])
        .env("WEIR_LOG", "info")
        .stdout(full())
        .stderr(full())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(&addr).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("weir exited with {status} when its output could not be written");
        }
        assert!(std::time::Instant::now() < deadline, "weir never listened");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let mut raw = Raw::connect(&addr);
    raw.topic_metadata("full-output");
    let records = weir_log::testing::BatchBuilder::new(3).build();
    assert_eq!(raw.produce("full-output", 0, records).0, 0);
    assert!(child.try_wait().unwrap().is_none(), "weir exited");
    child.kill().unwrap();
    let _ = child.wait();
}

/// A second process on a directory a node is using would destroy it (both
/// write its logs and its controller's Raft log): it must refuse to start,
/// as Kafka does with its `.lock` file, and leave the first serving.
#[test]
fn a_second_node_on_a_directory_in_use_refuses_to_start() {
    let logs = tempfile::tempdir().unwrap();
    let logs_dir = logs.path().join("logs");
    let logs_arg = logs_dir.display().to_string();
    let weir = Weir::start(&["--log-dirs", &logs_arg]);
    let second = |data_dir: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("serve")
            .args(["--data-dir", data_dir])
            .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
            .args(["--controller-listen", "127.0.0.1:0"])
            .args(extra)
            .output()
            .unwrap()
    };
    let data_dir = weir.data_dir.display().to_string();
    let same_data = second(&data_dir, &[]);
    let other = tempfile::tempdir().unwrap();
    let other_data = other.path().display().to_string();
    let same_logs = second(&other_data, &["--log-dirs", &logs_arg]);
    for (output, dir) in [(same_data, &weir.data_dir), (same_logs, &logs_dir)] {
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!(
            "Failed to acquire lock on file .lock in {}",
            std::path::absolute(dir).unwrap().display()
        );
        assert!(stderr.contains(&expected), "{stderr}");
    }
    // The first one never noticed.
    let (status, _) = weir.http_get("/v1/cluster");
    assert_eq!(status, 200);
}
