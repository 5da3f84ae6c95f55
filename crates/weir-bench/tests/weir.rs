//! `weir-bench produce`, `consume` and `e2e` against the real `weir` broker
//! of the same build (`cargo nextest run --workspace` builds it first). Only
//! counts are asserted, never timings.

mod common;

use common::{assert_latency, assert_produced, bench_json, weir_binary, Server};

/// A `weir serve` on ephemeral ports in a temporary directory, or `None`
/// (with a message) when the binary is not built and this is not CI.
fn start_weir(extra_args: &[&str]) -> Option<(Server, tempfile::TempDir)> {
    let Some(weir) = weir_binary() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the weir binary is not built (cargo build --release -p weir)"
        );
        eprintln!(
            "SKIPPED: no weir binary in target/; build it with `cargo build --release -p weir`"
        );
        return None;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut args = vec![
        "serve",
        "--data-dir",
        data.to_str().expect("utf-8 path"),
        "--listen",
        "127.0.0.1:0",
        "--controller-listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra_args);
    Some((Server::start(&weir, &args, "weir ready:"), dir))
}

#[test]
fn produce_then_consume_every_record() {
    let Some((weir, _dir)) = start_weir(&["--num-partitions", "3"]) else {
        return;
    };
    let produced = bench_json(&[
        "produce",
        "--bootstrap",
        &weir.kafka,
        "--topic",
        "bench",
        "--records",
        "2000",
        "--keys",
        "16",
        "--acks",
        "all",
    ]);
    assert_produced(&produced, 2000);
    assert_eq!(produced["partitions"], 3);

    for group in [None, Some("bench-group")] {
        let mut args = vec![
            "consume",
            "--bootstrap",
            &weir.kafka,
            "--topic",
            "bench",
            "--records",
            "2000",
        ];
        if let Some(group) = group {
            args.extend(["--group", group]);
        }
        let consumed = bench_json(&args);
        assert_eq!(consumed["mode"], "consume", "{consumed}");
        assert_eq!(consumed["received"], 2000, "{consumed}");
        assert_eq!(consumed["bytes"], 2000 * 100, "{consumed}");
        assert_eq!(consumed["partitions"], 3, "{consumed}");
        assert_eq!(consumed["ok"], true, "{consumed}");
        assert!(consumed["latency_ms"].is_null(), "{consumed}");
        assert!(consumed["records_per_sec"].as_f64().unwrap() > 0.0);
        assert_eq!(
            consumed["group"],
            group.map_or(serde_json::Value::Null, Into::into)
        );
    }
}

#[test]
fn e2e_consumes_every_acknowledged_record() {
    let Some((weir, _dir)) = start_weir(&[]) else {
        return;
    };
    // Records already in the topic are not this run's: the consumer starts
    // at the end.
    assert_produced(
        &bench_json(&[
            "produce",
            "--bootstrap",
            &weir.kafka,
            "--topic",
            "e2e",
            "--records",
            "500",
        ]),
        500,
    );
    let report = bench_json(&[
        "e2e",
        "--bootstrap",
        &weir.kafka,
        "--topic",
        "e2e",
        "--rate",
        "1000",
        "--duration",
        "2s",
        "--acks",
        "1",
    ]);
    assert_eq!(report["mode"], "e2e", "{report}");
    assert_eq!(report["sent"], 2000, "{report}");
    assert_eq!(report["acked"], 2000, "{report}");
    assert_eq!(report["consumed"], 2000, "{report}");
    assert_eq!(report["foreign_records"], 0, "{report}");
    assert_eq!(report["errors"], 0, "{report}");
    assert_eq!(report["ok"], true, "{report}");
    assert_latency(&report["latency_ms"]);
    assert_latency(&report["produce_latency_ms"]);
}
