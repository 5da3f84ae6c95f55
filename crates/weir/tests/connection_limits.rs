//! Connections are bounded one by one and fair to each other: a client
//! address that stalls half-sent requests, or floods a SASL listener before
//! authenticating, holds only its share of the request memory; a stalled
//! request is closed after `socket.request.receive.timeout.ms`;
//! `max.connections` / `max.connections.per.ip` limit connections as in
//! Kafka; and thousands of connections opened and closed leave the
//! broker's memory where it was. The attackers connect from 127.0.0.2 and
//! up, so that the well-behaved client on 127.0.0.1 is another source.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use weir_log::testing::BatchBuilder;

const MIB: usize = 1024 * 1024;

/// How long a well-behaved client's request may take to be answered while
/// the broker is attacked: a liveness bound, not a performance figure.
const ANSWERED_WITHIN: Duration = Duration::from_secs(5);

fn source(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// A connection to `to` from the address `from`.
fn connect_from(from: IpAddr, to: &str) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let to: std::net::SocketAddr = to.parse().unwrap();
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((from, 0).into()).unwrap();
        let stream = socket.connect(to).await.expect("connect");
        let stream = stream.into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
    })
}

/// A connection from `from` that announces a frame of `announced` bytes,
/// sends `sent` of them and then nothing more.
fn stall(from: IpAddr, to: &str, announced: usize, sent: usize) -> TcpStream {
    let mut stream = connect_from(from, to);
    // The broker stops reading a source at its share: what it does not read
    // waits in the kernel's buffers, or is never sent.
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let _ = stream.write_all(&(announced as i32).to_be_bytes());
    let _ = stream.write_all(&vec![0u8; sent]);
    stream
}

/// A well-behaved client's request, answered within [`ANSWERED_WITHIN`].
fn answered<T>(what: &str, raw: &mut Raw, request: impl FnOnce(&mut Raw) -> T) -> T {
    raw.stream.set_read_timeout(Some(ANSWERED_WITHIN)).unwrap();
    let started = Instant::now();
    let answer = request(raw);
    assert!(
        started.elapsed() < ANSWERED_WITHIN,
        "{what} took {:?}",
        started.elapsed()
    );
    answer
}

/// Produces a batch of one record of `value_size` bytes; its error code.
fn produce(raw: &mut Raw, topic: &str, value_size: usize) -> i16 {
    let batch = BatchBuilder::new(1).value_size(value_size).build();
    answered("a produce", raw, |raw| raw.produce(topic, 0, batch).0)
}

/// Whether the broker closes `stream` within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 64];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn api_versions(raw: &mut Raw) -> i16 {
    let response: ApiVersionsResponse =
        raw.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    response.error_code
}

#[test]
fn an_address_stalling_large_requests_leaves_other_clients_producing() {
    let weir = Weir::start(&[
        "--queued-max-request-bytes",
        "4194304",
        "--socket-request-max-bytes",
        "1048576",
    ]);
    let mut client = Raw::connect(&weir.kafka);
    assert_eq!(client.topic_metadata("steady").topics[0].error_code, 0);
    // Six connections announce requests of 1 MiB, send all but 64 bytes,
    // and stall: 6 MiB, more than the 4 MiB of request memory.
    let _attack: Vec<TcpStream> = (0..6)
        .map(|_| stall(source(2), &weir.kafka, MIB, MIB - 64))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..10 {
        assert_eq!(produce(&mut client, "steady", 100_000), 0);
        let metadata = answered("metadata", &mut client, |raw| raw.topic_metadata("steady"));
        assert_eq!(metadata.topics[0].error_code, 0);
    }
    // A new client, too.
    let mut late = Raw::connect(&weir.kafka);
    assert_eq!(produce(&mut late, "steady", 300_000), 0);
}

fn sasl_login(raw: &mut Raw) {
    answered("a SASL login", raw, |raw| {
        let handshake: SaslHandshakeResponse = raw.call(
            ApiKey::SaslHandshake,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        );
        assert_eq!(handshake.error_code, 0);
        let authenticated: SaslAuthenticateResponse = raw.call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(b"\0admin\0admin-secret"[..].into()),
        );
        assert_eq!(authenticated.error_code, 0, "{authenticated:?}");
    });
}

#[test]
fn unauthenticated_connections_flooding_a_sasl_listener_stall_no_login_and_no_producer() {
    let weir = Weir::start(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-enabled-mechanisms",
        "PLAIN",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--queued-max-request-bytes",
        "4194304",
        "--socket-request-max-bytes",
        "1048576",
    ]);
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();
    let mut producer = Raw::connect(&sasl);
    sasl_login(&mut producer);
    assert_eq!(producer.topic_metadata("logins").topics[0].error_code, 0);
    // Eight addresses, four connections each, every one announcing a
    // frame of sasl.server.max.receive.size (512 KiB) before authenticating
    // and sending all of it but 64 bytes: 16 MiB.
    let mut attack = Vec::new();
    for address in 2..10 {
        for _ in 0..4 {
            attack.push(stall(source(address), &sasl, 512 * 1024, 512 * 1024 - 64));
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        assert_eq!(produce(&mut producer, "logins", 200_000), 0);
        let mut newcomer = Raw::connect(&sasl);
        sasl_login(&mut newcomer);
        assert_eq!(produce(&mut newcomer, "logins", 100), 0);
    }
}

#[test]
fn a_stalled_request_is_closed_after_the_receive_timeout_and_its_memory_released() {
    let weir = Weir::start(&[
        "--queued-max-request-bytes",
        "4194304",
        "--socket-request-max-bytes",
        "1048576",
        "--socket-request-receive-timeout-ms",
        "500",
    ]);
    let mut setup = Raw::connect(&weir.kafka);
    assert_eq!(setup.topic_metadata("released").topics[0].error_code, 0);
    // The stalled request holds the whole share of its address.
    let mut stalled = stall(source(2), &weir.kafka, MIB, MIB - 64);
    std::thread::sleep(Duration::from_millis(100));
    // The same address's next large request waits for that share...
    let next = std::thread::spawn({
        let kafka = weir.kafka.clone();
        move || {
            let mut next = Raw::from_stream(connect_from(source(2), &kafka));
            next.stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let started = Instant::now();
            let batch = BatchBuilder::new(1).value_size(600_000).build();
            let code = next.produce("released", 0, batch).0;
            (code, started.elapsed())
        }
    });
    // ...until the stalled connection is closed, within the timeout...
    let started = Instant::now();
    assert!(
        closed_within(&mut stalled, Duration::from_secs(3)),
        "a stalled request must be closed after socket.request.receive.timeout.ms"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // ...and its memory given back: the next request is read and answered.
    let (code, took) = next.join().unwrap();
    assert_eq!(code, 0);
    assert!(took < ANSWERED_WITHIN, "the next request took {took:?}");
    // A request that arrives in pieces, each in time, is read.
    let mut slow = Raw::connect(&weir.kafka);
    slow.send_bytes(&[0]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    slow.send_bytes(&[0, 0, 10][..]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    slow.send_bytes(&[0, 18, 0, 0, 0, 0, 0, 7, 0, 0]).unwrap();
    let frame = answered("a slow request", &mut slow, |raw| raw.read_frame());
    assert!(frame.is_some(), "a request sent in time is answered");
}

#[test]
fn over_max_connections_per_ip_a_connection_is_closed_at_once_and_others_served() {
    let weir = Weir::start(&[
        "--max-connections-per-ip",
        "2",
        "--max-connections-per-ip-overrides",
        "127.0.0.1:1000",
    ]);
    let mut first = Raw::from_stream(connect_from(source(2), &weir.kafka));
    let mut second = Raw::from_stream(connect_from(source(2), &weir.kafka));
    assert_eq!(api_versions(&mut first), 0);
    assert_eq!(api_versions(&mut second), 0);
    let mut third = connect_from(source(2), &weir.kafka);
    assert!(
        closed_within(&mut third, Duration::from_secs(2)),
        "the third connection of 127.0.0.2 is closed"
    );
    // The others are served, and 127.0.0.1 has its override.
    assert_eq!(api_versions(&mut first), 0);
    let mut many: Vec<Raw> = (0..5).map(|_| Raw::connect(&weir.kafka)).collect();
    for raw in &mut many {
        assert_eq!(api_versions(raw), 0);
    }
    // A connection closed makes room for its address.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = connect_from(source(2), &weir.kafka);
        if !closed_within(&mut again, Duration::from_millis(200)) {
            let mut again = Raw::from_stream(again);
            assert_eq!(api_versions(&mut again), 0);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed connection's place was never freed"
        );
    }
    // DescribeConfigs shows the limits.
    let request = DescribeConfigsRequest::default().with_resources(vec![
        kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(None),
    ]);
    let described: DescribeConfigsResponse = many[0].call(ApiKey::DescribeConfigs, 4, &request);
    let value = |name: &str| {
        described.results[0]
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
    };
    assert_eq!(value("max.connections.per.ip").as_deref(), Some("2"));
    assert_eq!(
        value("max.connections.per.ip.overrides").as_deref(),
        Some("127.0.0.1:1000")
    );
    assert_eq!(value("max.connections").as_deref(), Some("2147483647"));
}

#[test]
fn at_max_connections_a_new_connection_waits_until_one_closes() {
    let weir = Weir::start(&["--max-connections", "3"]);
    let mut open: Vec<Raw> = (0..3).map(|_| Raw::connect(&weir.kafka)).collect();
    for raw in &mut open {
        assert_eq!(api_versions(raw), 0);
    }
    // The kernel completes the handshake; the broker does not take it yet.
    let mut waiting = Raw::connect(&weir.kafka);
    let request = waiting.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(
        !waiting.has_answered(),
        "over max.connections, a client waits"
    );
    drop(open.remove(0));
    let response: ApiVersionsResponse = answered("a waiting client", &mut waiting, |raw| {
        raw.receive(ApiKey::ApiVersions, 3, request)
    });
    assert_eq!(response.error_code, 0);
    // The others were served all along.
    assert_eq!(api_versions(&mut open[0]), 0);
}

/// Connections opened and closed per cycle of the churn test, and cycles.
const CHURN_CONNECTIONS: usize = 2_000;
const CHURN_CYCLES: usize = 6;

/// Open descriptors of process `pid`.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc fd")
        .count()
}

/// Polls `done` every 100 ms for at most `within`; its last answer.
fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn memory_returns_to_its_baseline_after_cycles_of_connection_churn() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
    }
    let connections = CHURN_CONNECTIONS.min(hard.saturating_sub(200) as usize);
    let weir = Weir::start(&[]);
    let pid = weir.pid();
    let files = open_files(pid);
    // A first client's work (the runtime's threads starting) belongs to
    // the baseline, not to the churn.
    assert_eq!(api_versions(&mut Raw::connect(&weir.kafka)), 0);
    let baseline = weir.rss_kib();
    let mut after = Vec::new();
    let mut peak = baseline;
    for _ in 0..CHURN_CYCLES {
        // From several threads: a connection whose SYN overflowed the
        // listen backlog waits a second for its retransmission, and the
        // others need not wait behind it.
        let mut open: Vec<Raw> = std::thread::scope(|scope| {
            let connecting: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        (0..connections / 8)
                            .map(|_| Raw::connect(&weir.kafka))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            connecting
                .into_iter()
                .flat_map(|thread| thread.join().expect("connecting"))
                .collect()
        });
        // Half of them idle, half answered once.
        let asked: Vec<i32> = open
            .iter_mut()
            .step_by(2)
            .map(|raw| raw.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()))
            .collect();
        for (raw, correlation) in open.iter_mut().step_by(2).zip(asked) {
            let response: ApiVersionsResponse = raw.receive(ApiKey::ApiVersions, 3, correlation);
            assert_eq!(response.error_code, 0);
        }
        assert!(
            eventually(Duration::from_secs(30), || open_files(pid)
                >= files + open.len()),
            "the broker took the connections: {} descriptors open, {files} before",
            open_files(pid)
        );
        peak = peak.max(weir.rss_kib());
        drop(open);
        assert!(
            eventually(Duration::from_secs(30), || open_files(pid) <= files + 8),
            "the broker closed the connections: {} descriptors open, {files} before",
            open_files(pid)
        );
        after.push(weir.rss_kib());
    }
    eprintln!("RSS KiB: baseline {baseline}, peak {peak}, after each cycle {after:?}");
    // A leak, or buffers whose pages land elsewhere in the heap each
    // cycle, grow the broker with every cycle: over the later cycles it
    // must grow by less than the first cycle's connections took (8 MiB
    // at least, in case they gave it all back at once).
    let first = after[0].saturating_sub(baseline);
    let grown = after[CHURN_CYCLES - 1].saturating_sub(after[0]);
    assert!(
        grown < first.max(8 * 1024),
        "RSS grew by {grown} KiB from the first cycle to the last, which took {first} KiB: \
         baseline {baseline}, after each cycle {after:?}"
    );
    // And what the connections took goes back to the system, if not at
    // once: at least half of it.
    let near = baseline + peak.saturating_sub(baseline) / 2;
    assert!(
        eventually(Duration::from_secs(30), || weir.rss_kib() < near),
        "RSS stays at {} KiB after the churn: baseline {baseline} KiB, peak {peak} KiB",
        weir.rss_kib()
    );
}
