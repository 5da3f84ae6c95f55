//! Starts the real `weir` binary on ephemeral ports with a temporary data
//! directory, and talks to it.

#![allow(dead_code, unreachable_pub)]

pub mod cli;
pub mod cluster;
pub mod pki;
pub mod raw;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A transactional producer (librdkafka) that has written one record to
/// partition 0 of `topic` at `timestamp`, in a transaction it leaves open.
pub fn open_transaction(
    bootstrap: &str,
    transactional_id: &str,
    topic: &str,
    timestamp: i64,
) -> rdkafka::producer::BaseProducer {
    use rdkafka::producer::{BaseRecord, Producer};
    let timeout = Duration::from_secs(10);
    let producer: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", transactional_id)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    producer.init_transactions(timeout).unwrap();
    producer.begin_transaction().unwrap();
    producer
        .send(
            BaseRecord::<(), str>::to(topic)
                .partition(0)
                .payload("open")
                .timestamp(timestamp),
        )
        .unwrap();
    producer.flush(timeout).unwrap();
    producer
}

/// Queues `record` on `producer`, waiting (polling delivery reports) while
/// librdkafka's queue is full.
pub fn send_queued<K, P, C>(
    producer: &rdkafka::producer::BaseProducer<C>,
    mut record: rdkafka::producer::BaseRecord<'_, K, P>,
) where
    C: rdkafka::producer::ProducerContext<DeliveryOpaque = ()>,
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    use rdkafka::error::KafkaError;
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(_), returned)) => {
                producer.poll(Duration::from_millis(10));
                record = returned;
            }
            Err((error, _)) => panic!("send: {error}"),
        }
    }
}

pub struct Weir {
    child: Option<Child>,
    pub data_dir: PathBuf,
    pub kafka: String,
    pub http: String,
    /// The Kafka listeners of the ready line: (name, host:port).
    pub listeners: Vec<(String, String)>,
    extra_args: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

impl Weir {
    /// Starts a broker in a fresh temporary directory.
    pub fn start(extra_args: &[&str]) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().join("data");
        let mut weir = Self::start_in(&data_dir, extra_args, None, &[]);
        weir._tmp = Some(tmp);
        weir
    }

    /// Starts a broker in a fresh temporary directory with extra
    /// environment variables.
    pub fn start_with_env(extra_args: &[&str], envs: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().join("data");
        let mut weir = Self::start_in(&data_dir, extra_args, None, envs);
        weir._tmp = Some(tmp);
        weir
    }

    /// Starts a broker in a fresh temporary directory, its log (at WARN and
    /// above) kept for [`logged`](Self::logged).
    pub fn start_logged(extra_args: &[&str]) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().join("data");
        let log = tmp.path().join("weir.log");
        let mut weir = Self::spawn(&data_dir, extra_args, None, &[], Some(&log)).ready();
        weir._tmp = Some(tmp);
        weir
    }

    /// What a broker started with [`start_logged`](Self::start_logged) has
    /// logged so far.
    pub fn logged(&self) -> String {
        let log = self.data_dir.with_file_name("weir.log");
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()))
    }

    /// Starts a broker on `data_dir`, on `port` if given.
    pub fn start_in(
        data_dir: &Path,
        extra_args: &[&str],
        port: Option<u16>,
        envs: &[(&str, &str)],
    ) -> Self {
        Self::spawn(data_dir, extra_args, port, envs, None).ready()
    }

    /// Starts a broker in a fresh temporary directory without waiting for
    /// it to be ready (nodes of a cluster wait for each other).
    pub fn launch(extra_args: &[String]) -> Launch {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().join("data");
        let extra: Vec<&str> = extra_args.iter().map(String::as_str).collect();
        let mut launch = Self::spawn(&data_dir, &extra, None, &[], None);
        launch.tmp = Some(tmp);
        launch
    }

    fn spawn(
        data_dir: &Path,
        extra_args: &[&str],
        port: Option<u16>,
        envs: &[(&str, &str)],
        log: Option<&Path>,
    ) -> Launch {
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("log file")),
            None => Stdio::inherit(),
        };
        let listen = format!("127.0.0.1:{}", port.unwrap_or(0));
        // A CONTROLLER:// listener replaces the one --controller-listen gives.
        let names_controller = extra_args
            .iter()
            .any(|a| a.to_ascii_uppercase().contains("CONTROLLER://"));
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            // --listeners in `extra_args` replaces the one --listen gives.
            .args(
                Some(["--listen", &listen])
                    .filter(|_| !extra_args.contains(&"--listeners"))
                    .into_iter()
                    .flatten(),
            )
            .args(
                Some(["--http-listen", "127.0.0.1:0"])
                    .filter(|_| !extra_args.contains(&"--http-listen"))
                    .into_iter()
                    .flatten(),
            )
            .args(
                Some(["--controller-listen", "127.0.0.1:0"])
                    .filter(|_| !extra_args.contains(&"--controller-listen") && !names_controller)
                    .into_iter()
                    .flatten(),
            )
            .args(extra_args)
            .env("WEIR_LOG", "warn")
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start weir");
        Launch {
            child,
            data_dir: data_dir.to_owned(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            tmp: None,
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Resident memory of the broker process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let pid = self.child.as_ref().expect("running").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The address of the listener named `name` (as in --listeners).
    pub fn listener(&self, name: &str) -> &str {
        self.listeners
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, addr)| addr.as_str())
            .unwrap_or_else(|| panic!("no {name} listener in {:?}", self.listeners))
    }

    pub fn port(&self) -> u16 {
        self.kafka.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// SIGTERM, and the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        // A clean stop closes every log (fsyncs); ten thousand partitions
        // on a loaded machine take a while.
        wait_with_timeout(&mut child, Duration::from_secs(120))
    }

    /// kill -9 (nothing if already killed).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill");
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the process stays, but answers nothing until resumed.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after a [`pause`](Self::pause).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        let child = self.child.as_ref().expect("running");
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill -{name} failed");
    }

    /// Stops (cleanly or not) and starts again on the same port and data.
    pub fn restart(&mut self, clean: bool) {
        if clean {
            assert!(self.stop().success(), "clean stop must exit 0");
        } else {
            self.kill();
        }
        self.start_again();
    }

    /// Starts again, on the same port and data, after a stop or a kill.
    pub fn start_again(&mut self) {
        let extra: Vec<&str> = self.extra_args.iter().map(String::as_str).collect();
        let tmp = self._tmp.take();
        let mut next = Self::start_in(&self.data_dir, &extra, Some(self.port()), &[]);
        next._tmp = tmp;
        *self = next;
    }

    pub fn http_get(&self, path: &str) -> (u16, String) {
        self.http_request(path, "")
    }

    /// [`http_get`](Self::http_get) as a SCRAM user, for a broker with
    /// security on (Basic authentication).
    pub fn http_get_as(&self, path: &str, user: &str, password: &str) -> (u16, String) {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.http_request(path, &format!("Authorization: Basic {token}\r\n"))
    }

    fn http_request(&self, path: &str, headers: &str) -> (u16, String) {
        let (status, _, body) = self.http_get_with(path, headers);
        (status, body)
    }

    /// A GET with extra header lines (each ending in `\r\n`): the status,
    /// the response's header lines and its body.
    pub fn http_get_with(&self, path: &str, headers: &str) -> (u16, String, String) {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.http).expect("connect http");
        write!(stream, "GET {path} HTTP/1.0\r\nHost: x\r\n{headers}\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response[9..12].parse().unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        (status, head.to_owned(), body.to_owned())
    }
}

/// A broker process started but not known to be ready yet.
pub struct Launch {
    child: Child,
    data_dir: PathBuf,
    extra_args: Vec<String>,
    tmp: Option<tempfile::TempDir>,
}

impl Launch {
    /// Waits for the ready line.
    pub fn ready(self) -> Weir {
        self.try_ready()
            .unwrap_or_else(|line| panic!("unexpected first line: {line:?}"))
    }

    /// Waits for the ready line; on anything else (the process failed to
    /// start, say on a port taken meanwhile) stops it and returns the line.
    pub fn try_ready(mut self) -> Result<Weir, String> {
        let stdout = self.child.stdout.take().expect("stdout");
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        if !line.starts_with("weir ready:") {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return Err(line);
        }
        // A controller-only node has neither.
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .unwrap_or_default()
                .to_owned()
        };
        let listeners = field("listeners")
            .split(',')
            .filter_map(|l| l.split_once("://"))
            .map(|(name, addr)| (name.to_owned(), addr.to_owned()))
            .collect();
        Ok(Weir {
            kafka: field("kafka"),
            http: field("http"),
            listeners,
            child: Some(self.child),
            data_dir: self.data_dir,
            extra_args: self.extra_args,
            _tmp: self.tmp,
        })
    }
}

impl Drop for Weir {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("weir did not stop within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A small tmpfs mounted over a directory (this needs root, as CI has),
/// unmounted on drop.
pub struct SmallDisk {
    pub dir: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl SmallDisk {
    pub fn mount(megabytes: u32) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("disk");
        std::fs::create_dir(&dir).unwrap();
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={megabytes}m"),
                "weir-small-disk",
            ])
            .arg(&dir)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting a {megabytes} MB tmpfs failed ({status}): this test needs root"
        );
        Self { dir, _tmp: tmp }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}
