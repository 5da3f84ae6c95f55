//! `weir-bench produce` against `weir-bench null-broker`: every record is
//! acknowledged and the JSON report has the fields scripts read.

mod common;

use common::{assert_produced, bench_json, Server};

#[test]
fn produce_to_the_null_broker_acknowledges_every_record() {
    let broker = Server::null_broker(1);
    let report = bench_json(&[
        "produce",
        "--bootstrap",
        &broker.kafka,
        "--topic",
        "bench",
        "--records",
        "2000",
        "--acks",
        "1",
    ]);
    assert_produced(&report, 2000);
    assert_eq!(report["bootstrap"], broker.kafka.as_str());
    assert_eq!(report["topic"], "bench");
    assert_eq!(report["record_size"], 100);
    assert_eq!(report["acks"], "1");
    assert_eq!(report["compression"], "none");
    assert_eq!(report["partitions"], 1);
}

#[test]
fn every_acks_level_compression_and_several_producers() {
    let broker = Server::null_broker(3);
    for (acks, compression) in [
        ("0", "lz4"),
        ("all", "zstd"),
        ("1", "gzip"),
        ("1", "snappy"),
    ] {
        let report = bench_json(&[
            "produce",
            "--bootstrap",
            &broker.kafka,
            "--topic",
            &format!("bench-{acks}-{compression}"),
            "--records",
            "2001",
            "--record-size",
            "1024",
            "--keys",
            "10",
            "--producers",
            "2",
            "--acks",
            acks,
            "--compression",
            compression,
            "--linger-ms",
            "1",
            "--batch-size",
            "65536",
        ]);
        assert_produced(&report, 2001);
        assert_eq!(report["acks"], acks);
        assert_eq!(report["compression"], compression);
        assert_eq!(report["producers"], 2);
        assert_eq!(report["partitions"], 3);
        assert_eq!(report["keys"], 10);
    }
}
