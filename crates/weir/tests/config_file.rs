//! `weir serve --config`: Kafka's own `server.properties` starts a broker,
//! a TOML file may use Kafka's dotted names, an unknown name is refused
//! with the closest one, and a misspelled `WEIR_*` variable is warned of.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::free_port;
use common::raw::Raw;

/// A `weir serve` with `args` and `envs`; its ready line's fields once it
/// is ready, or its exit status and standard error if it stops first.
struct Served {
    child: Child,
    ready: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str], envs: &[(&str, &str)]) -> Result<Served, String> {
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .args(args)
        .env("WEIR_LOG", "warn")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr.reopen().unwrap()))
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(line) = read.recv_timeout(Duration::from_millis(100)) {
            if line.starts_with("weir ready:") {
                return Ok(Served { child, ready: line });
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            let errors = std::fs::read_to_string(stderr.path()).unwrap();
            return Err(format!("{status}: {errors}"));
        }
        assert!(Instant::now() < deadline, "weir did not start");
    }
}

/// The standard error of a broker that was asked to start and was
/// stopped after `after`.
fn stderr_of(args: &[&str], envs: &[(&str, &str)], after: Duration) -> String {
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .args(args)
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr.reopen().unwrap()))
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let _ = child.kill();
    let _ = child.wait();
    std::fs::read_to_string(stderr.path()).unwrap()
}

fn kafka_properties(dir: &Path, kafka_port: u16, controller_port: u16) -> std::path::PathBuf {
    let template = include_str!("fixtures/kafka-server.properties");
    let text = template
        .replace("@KAFKA_PORT@", &kafka_port.to_string())
        .replace("@CONTROLLER_PORT@", &controller_port.to_string())
        .replace(
            "@LOG_DIRS@",
            &dir.join("kraft-combined-logs").display().to_string(),
        );
    let path = dir.join("server.properties");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn kafkas_own_server_properties_starts_a_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (kafka_port, controller_port) = (free_port(), free_port());
    let file = kafka_properties(dir.path(), kafka_port, controller_port);
    let data = dir.path().join("data");
    let served = serve(
        &[
            "--config",
            file.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--http-listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .unwrap();
    assert!(
        served.ready.contains(&format!(":{kafka_port} ")),
        "{}",
        served.ready
    );
    assert!(served.ready.contains("node=1"), "{}", served.ready);
    // The broker works, and took the file's settings.
    let mut raw = Raw::connect(&format!("127.0.0.1:{kafka_port}"));
    raw.topic_metadata("from-properties");
    let (code, _) = raw.produce(
        "from-properties",
        0,
        weir_log::testing::BatchBuilder::new(2).build(),
    );
    assert_eq!(code, 0);
    assert!(
        dir.path()
            .join("kraft-combined-logs")
            .join("from-properties-0")
            .is_dir(),
        "partitions go to log.dirs"
    );
}

#[test]
fn a_toml_file_takes_kafkas_dotted_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("weir.toml");
    // TOML reads `node.id = 7` as a table `node` holding `id`: the setting
    // node.id all the same.
    std::fs::write(&file, "node.id = 7\nlog.retention.hours = 5\n").unwrap();
    let data = dir.path().join("data");
    let served = serve(
        &[
            "--config",
            file.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .unwrap();
    assert!(served.ready.contains("node=7"), "{}", served.ready);
}

#[test]
fn an_unknown_setting_is_refused_with_the_closest_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "node.id=1\nlog.retension.hours=5\n").unwrap();
    let refused = serve(&["--config", file.to_str().unwrap()], &[])
        .err()
        .expect("refused");
    assert!(
        refused
            .contains("unknown setting \"log.retension.hours\"; did you mean log.retention.hours?"),
        "{refused}"
    );
    // A file that is neither says which format it was read as.
    std::fs::write(&file, "a=\\u00zz\n").unwrap();
    let refused = serve(&["--config", file.to_str().unwrap()], &[])
        .err()
        .expect("refused");
    assert!(refused.contains("server.properties format"), "{refused}");
    assert!(refused.contains("line 1"), "{refused}");
}

#[test]
fn a_misspelled_weir_variable_is_warned_of_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let errors = stderr_of(
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        &[("WEIR_LOG_RETENTION_HOUR", "5"), ("WEIR_LOG", "warn")],
        Duration::from_secs(2),
    );
    assert!(
        errors.contains(
            "the environment variable WEIR_LOG_RETENTION_HOUR is set but no setting reads it; \
             did you mean WEIR_LOG_RETENTION_HOURS?"
        ),
        "{errors}"
    );
}

#[test]
fn host_names_are_addresses_and_errors_name_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let served = serve(
        &[
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
            "--listen",
            &format!("localhost:{port}"),
            "--controller-listen",
            "localhost:0",
            "--http-listen",
            "localhost:0",
        ],
        &[],
    )
    .unwrap();
    assert!(
        served.ready.contains(&format!(":{port} ")),
        "{}",
        served.ready
    );
    // The HTTP port given as a Kafka address.
    let http = served
        .ready
        .split(' ')
        .find_map(|field| field.strip_prefix("http="))
        .unwrap()
        .to_owned();
    let wrong = common::cli::run(&["topic", "list", "--bootstrap", &http], b"");
    assert!(
        wrong.stderr.contains("answered in HTTP") && wrong.stderr.contains("Kafka port"),
        "{}",
        wrong.stderr
    );
    drop(served);
    // A regular file for a data directory: said so, once.
    let file = dir.path().join("regular");
    std::fs::write(&file, "").unwrap();
    let refused = serve(
        &[
            "--data-dir",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .err()
    .expect("refused");
    assert!(refused.contains("is a file, not a directory"), "{refused}");
    assert_eq!(refused.matches("is a file").count(), 1, "{refused}");
    // The controller port taken: that is what is said, not the data
    // directory.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let refused = serve(
        &[
            "--data-dir",
            dir.path().join("other").to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--controller-listen",
            &format!("127.0.0.1:{port}"),
            "--http-listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .err()
    .expect("refused");
    assert!(
        refused.contains(&format!(
            "cannot listen on 127.0.0.1:{port} (the controller listener"
        )),
        "{refused}"
    );
    assert!(!refused.contains("data directory"), "{refused}");
    assert_eq!(
        refused.matches("Address already in use").count(),
        1,
        "{refused}"
    );
}

#[test]
fn the_example_three_node_configs_start_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let kafka: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let controller: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut files = Vec::new();
    for n in 1..=3usize {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/node");
        let mut text = std::fs::read_to_string(format!("{path}{n}.properties")).unwrap();
        // The machines weir1..weir3 become ports of this one.
        for m in 1..=3usize {
            text = text.replace(
                &format!("weir{m}:9093"),
                &format!("127.0.0.1:{}", controller[m - 1]),
            );
            text = text.replace(
                &format!("weir{m}:9092"),
                &format!("127.0.0.1:{}", kafka[m - 1]),
            );
        }
        text = text
            .replace("://:9092", &format!("://127.0.0.1:{}", kafka[n - 1]))
            .replace("://:9093", &format!("://127.0.0.1:{}", controller[n - 1]))
            .replace(
                "/var/lib/weir/logs",
                &dir.path().join(format!("logs{n}")).display().to_string(),
            );
        let file = dir.path().join(format!("node{n}.properties"));
        std::fs::write(&file, text).unwrap();
        files.push(file);
    }
    let starting: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let file = file.clone();
            let data = dir.path().join(format!("data{}", i + 1));
            std::thread::spawn(move || {
                serve(
                    &[
                        "--config",
                        file.to_str().unwrap(),
                        "--data-dir",
                        data.to_str().unwrap(),
                        "--http-listen",
                        "127.0.0.1:0",
                    ],
                    &[],
                )
            })
        })
        .collect();
    let nodes: Vec<Served> = starting
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    assert_eq!(nodes.len(), 3);
    // Their defaults: three replicas, two in sync for acks=all.
    let bootstrap = format!("127.0.0.1:{}", kafka[0]);
    common::cli::run(
        &["topic", "create", "examples", "--bootstrap", &bootstrap],
        b"",
    )
    .ok();
    let described = common::cli::run(
        &["topic", "describe", "examples", "--bootstrap", &bootstrap],
        b"",
    )
    .ok();
    assert!(
        described.stdout.contains("min.insync.replicas"),
        "{}",
        described.stdout
    );
    let rows = described.table("PARTITION");
    assert_eq!(rows.len(), 7, "six partitions: {}", described.stdout);
}
