//! A cluster of `weir serve` processes on this machine, and the faults done
//! to them: kill -9, SIGSTOP / SIGCONT, SIGTERM, restart on the same
//! addresses and data.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::util::Timeout;

use crate::netns::Netns;
use crate::Error;

/// How long a node may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Which processes make up the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Nodes 1..=3, each broker and controller.
    Combined,
    /// Brokers 1..=3 (Raft learners) and a controller-only node 4, the
    /// quorum alone: brokers can be stopped without losing the quorum.
    SeparateController,
}

/// Where the nodes listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// 127.0.0.1, on ports picked free.
    Loopback,
    /// One network namespace and address per node (root only).
    Namespaces,
}

#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The `weir` binary.
    pub weir: PathBuf,
    pub layout: Layout,
    pub network: Network,
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub replica_lag_ms: u64,
    /// `WEIR_LOG` of the nodes; their output goes to `node-N.log` in the
    /// cluster's directory.
    pub log_filter: String,
}

impl ClusterOptions {
    pub fn new(weir: impl Into<PathBuf>) -> Self {
        Self {
            weir: weir.into(),
            layout: Layout::Combined,
            network: Network::Loopback,
            session_timeout_ms: 3000,
            heartbeat_interval_ms: 500,
            replica_lag_ms: 3000,
            log_filter: "info".to_owned(),
        }
    }
}

/// Whether `setpriv --pdeathsig` (util-linux) is there.
fn has_setpriv() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// One `weir serve` process, running or not.
#[derive(Debug)]
pub struct Node {
    pub id: i32,
    /// Kafka listener (empty for a controller-only node).
    pub kafka: String,
    /// HTTP endpoint (empty for a controller-only node).
    pub http: String,
    args: Vec<String>,
    netns: Option<String>,
    log: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// How often it was started.
    pub starts: u32,
}

impl Node {
    pub fn is_broker(&self) -> bool {
        !self.kafka.is_empty()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn spawn(&mut self, weir: &Path, log_filter: &str) -> Result<mpsc::Receiver<String>, Error> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        writeln!(log, "=== weir-chaos: start {} ===", self.starts + 1)?;
        // ip netns exec, setpriv and weir each exec the next: the pid is
        // weir's. setpriv makes the kernel kill weir when the thread that
        // started it ends, so that no node outlives a harness killed
        // before it could stop them.
        let mut program: Vec<&std::ffi::OsStr> = Vec::new();
        if let Some(ns) = &self.netns {
            program.extend(["ip", "netns", "exec", ns.as_str()].map(std::ffi::OsStr::new));
        }
        if has_setpriv() {
            program.extend(["setpriv", "--pdeathsig", "KILL", "--"].map(std::ffi::OsStr::new));
        }
        program.push(weir.as_os_str());
        let mut command = Command::new(program[0]);
        command.args(&program[1..]);
        let mut child = command
            .arg("serve")
            .args(&self.args)
            .env("WEIR_LOG", log_filter)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log.try_clone()?))
            .spawn()
            .map_err(|e| Error(format!("cannot start {}: {e}", weir.display())))?;
        self.starts += 1;
        // The first line tells it is ready; the rest goes to the log.
        let stdout = child.stdout.take().expect("piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = writeln!(log, "{first}");
                let _ = ready_tx.send(first);
            }
            for line in lines.map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
            }
        });
        self.child = Some(child);
        self.paused = false;
        Ok(ready_rx)
    }

    fn await_ready(&mut self, ready: mpsc::Receiver<String>) -> Result<(), Error> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match ready.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.starts_with("weir ready:") => return Ok(()),
                Ok(line) => {
                    self.kill9();
                    return Err(Error(format!(
                        "node {} printed {line:?} instead of its ready line",
                        self.id
                    )));
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                    if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                        self.child = None;
                        return Err(Error(format!(
                            "node {} exited ({status}) before it was ready; see {}",
                            self.id,
                            self.log.display()
                        )));
                    }
                }
                Err(_) => {
                    self.kill9();
                    return Err(Error(format!(
                        "node {} not ready within {READY_TIMEOUT:?}; see {}",
                        self.id,
                        self.log.display()
                    )));
                }
            }
        }
    }

    fn signal(&self, signal: Signal) -> Result<(), Error> {
        let pid = self
            .pid()
            .ok_or_else(|| Error(format!("node {} is down", self.id)))?;
        kill(Pid::from_raw(pid as i32), signal)
            .map_err(|e| Error(format!("{signal} to node {}: {e}", self.id)))
    }

    /// kill -9 (nothing if it is down).
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    /// SIGSTOP: the process freezes, its sockets stay open.
    pub fn pause(&mut self) -> Result<(), Error> {
        self.signal(Signal::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self) -> Result<(), Error> {
        self.signal(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// SIGTERM and wait for the exit; a node that does not exit within
    /// `timeout` is killed. Whether it exited cleanly (status 0).
    pub fn terminate(&mut self, timeout: Duration) -> Result<bool, Error> {
        if self.paused {
            self.resume()?;
        }
        self.signal(Signal::SIGTERM)?;
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status.success());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// GET `path` from its HTTP endpoint, with short timeouts (it may be
    /// paused or cut off): the status and body.
    pub fn http_get(&self, path: &str) -> Result<(u16, String), Error> {
        if self.http.is_empty() || !self.is_running() || self.paused {
            return Err(Error(format!("node {} cannot answer", self.id)));
        }
        let addr = self
            .http
            .parse()
            .map_err(|e| Error(format!("{}: {e}", self.http)))?;
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(3)))?;
        stream.set_write_timeout(Some(Duration::from_secs(3)))?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let status = response
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error(format!("bad HTTP response {response:?}")))?;
        let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        Ok((status, body))
    }

    /// This node's `/v1/cluster`.
    pub fn cluster_view(&self) -> Result<serde_json::Value, Error> {
        let (status, body) = self.http_get("/v1/cluster")?;
        if status != 200 {
            return Err(Error(format!("/v1/cluster: HTTP {status}")));
        }
        serde_json::from_str(&body).map_err(|e| Error(format!("/v1/cluster: {e}: {body}")))
    }
}

/// Leader, replicas and ISR of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// The processes, their data under one temporary directory, and the
/// namespaces if any. Everything is stopped on drop.
pub struct Cluster {
    pub nodes: Vec<Node>,
    options: ClusterOptions,
    /// Removed on drop unless kept.
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    netns: Option<Netns>,
}

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Cluster {
    /// Starts every node at once (a node is ready only once the quorum
    /// is) and waits until all are ready. On loopback, ports are picked
    /// free beforehand, so another process may take one meanwhile: then
    /// the whole cluster starts again, a few times.
    pub fn start(options: ClusterOptions) -> Result<Self, Error> {
        let mut last = Error("not started".to_owned());
        for _ in 0..3 {
            match Self::try_start(options.clone()) {
                Ok(cluster) => return Ok(cluster),
                Err(e) => {
                    eprintln!("weir-chaos: the cluster did not start ({e}); trying again");
                    last = e;
                }
            }
        }
        Err(last)
    }

    fn try_start(options: ClusterOptions) -> Result<Self, Error> {
        let dir = tempfile::Builder::new().prefix("weir-chaos-").tempdir()?;
        let netns = match options.network {
            Network::Loopback => None,
            Network::Namespaces => Some(Netns::create(4).map_err(Error)?),
        };
        let roles: &[&str] = match options.layout {
            Layout::Combined => &["broker,controller"; 3],
            Layout::SeparateController => &["broker", "broker", "broker", "controller"],
        };
        // (kafka, http, controller) of each node.
        let mut addrs = Vec::new();
        for i in 1..=roles.len() {
            addrs.push(match &netns {
                Some(n) => {
                    let ip = n.ip(i);
                    (
                        format!("{ip}:9092"),
                        format!("{ip}:9644"),
                        format!("{ip}:9093"),
                    )
                }
                None => (
                    format!("127.0.0.1:{}", free_port()?),
                    format!("127.0.0.1:{}", free_port()?),
                    format!("127.0.0.1:{}", free_port()?),
                ),
            });
        }
        let voters = roles
            .iter()
            .zip(&addrs)
            .enumerate()
            .filter(|(_, (role, _))| role.contains("controller"))
            .map(|(i, (_, (_, _, controller)))| format!("{}@{controller}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for (i, (role, (kafka, http, controller))) in roles.iter().zip(addrs).enumerate() {
            let id = i as i32 + 1;
            let data = dir.path().join(format!("node-{id}"));
            let args: Vec<String> = [
                "--node-id",
                &id.to_string(),
                "--roles",
                role,
                "--data-dir",
                &data.display().to_string(),
                "--listen",
                &kafka,
                "--http-listen",
                &http,
                "--controller-listen",
                &controller,
                "--controllers",
                &voters,
                "--broker-session-timeout-ms",
                &options.session_timeout_ms.to_string(),
                "--broker-heartbeat-interval-ms",
                &options.heartbeat_interval_ms.to_string(),
                "--replica-lag-time-max-ms",
                &options.replica_lag_ms.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let broker = role.contains("broker");
            nodes.push(Node {
                id,
                kafka: if broker { kafka } else { String::new() },
                http: if broker { http } else { String::new() },
                args,
                netns: netns.as_ref().map(|n| n.namespace(i + 1)),
                log: dir.path().join(format!("node-{id}.log")),
                child: None,
                paused: false,
                starts: 0,
            });
        }
        let mut cluster = Self {
            nodes,
            options,
            path: dir.path().to_owned(),
            dir: Some(dir),
            netns,
        };
        let mut ready = Vec::new();
        for node in &mut cluster.nodes {
            ready.push(node.spawn(&cluster.options.weir, &cluster.options.log_filter)?);
        }
        for (node, ready) in cluster.nodes.iter_mut().zip(ready) {
            node.await_ready(ready)?;
        }
        Ok(cluster)
    }

    /// Where the data and the nodes' logs are.
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// Keeps the directory after the cluster is dropped.
    pub fn keep_dir(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = dir.keep();
        }
    }

    pub fn options(&self) -> &ClusterOptions {
        &self.options
    }

    pub fn netns(&self) -> Option<&Netns> {
        self.netns.as_ref()
    }

    pub fn node(&self, id: i32) -> &Node {
        &self.nodes[(id - 1) as usize]
    }

    pub fn node_mut(&mut self, id: i32) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    /// Ids of the brokers.
    pub fn broker_ids(&self) -> Vec<i32> {
        self.nodes
            .iter()
            .filter(|n| n.is_broker())
            .map(|n| n.id)
            .collect()
    }

    /// Every broker's Kafka address, up or down.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.is_broker())
            .map(|n| n.kafka.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts a stopped node again, on the same addresses and data.
    pub fn restart(&mut self, id: i32) -> Result<(), Error> {
        let weir = self.options.weir.clone();
        let filter = self.options.log_filter.clone();
        let node = self.node_mut(id);
        node.kill9();
        let mut last = Error("not restarted".to_owned());
        // On loopback, another process may have taken a port meanwhile.
        for _ in 0..5 {
            let ready = node.spawn(&weir, &filter)?;
            match node.await_ready(ready) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    eprintln!("weir-chaos: {e}; trying again");
                    last = e;
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
        }
        Err(last)
    }

    /// The active controller, as the first node that answers tells.
    pub fn controller(&self) -> Option<i32> {
        self.nodes
            .iter()
            .filter_map(|n| n.cluster_view().ok())
            .filter_map(|v| v["controller_id"].as_i64())
            .find(|id| *id > 0)
            .map(|id| id as i32)
    }

    /// Whether every node is up and every broker says: a controller, every
    /// broker registered and not fenced, every partition with a leader and
    /// its whole replica set in sync. Otherwise what is missing.
    pub fn health(&self) -> Result<(), String> {
        let brokers = self.broker_ids();
        for node in &self.nodes {
            if !node.is_running() || node.is_paused() {
                return Err(format!("node {} is down", node.id));
            }
        }
        for node in self.nodes.iter().filter(|n| n.is_broker()) {
            let view = node
                .cluster_view()
                .map_err(|e| format!("node {}: {e}", node.id))?;
            if view["controller_id"].as_i64().unwrap_or(-1) < 0 {
                return Err(format!("node {} knows no controller", node.id));
            }
            let live: Vec<i64> = view["brokers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|b| b["fenced"] == false)
                .filter_map(|b| b["id"].as_i64())
                .collect();
            for id in &brokers {
                if !live.contains(&(*id as i64)) {
                    return Err(format!("node {} sees broker {id} fenced", node.id));
                }
            }
            for key in ["offline_partitions", "under_replicated_partitions"] {
                if view[key].as_array().is_some_and(|a| !a.is_empty()) {
                    return Err(format!("node {}: {key} {}", node.id, view[key]));
                }
            }
        }
        Ok(())
    }

    /// Waits until [`Cluster::health`] holds (twice in a row, a second
    /// apart), at most `timeout`. The last complaint if it does not.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let mut last = String::new();
        let mut streak = 0;
        while start.elapsed() < timeout {
            match self.health() {
                Ok(()) => {
                    streak += 1;
                    if streak == 2 {
                        return Ok(start.elapsed());
                    }
                }
                Err(e) => {
                    streak = 0;
                    last = e;
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        Err(last)
    }

    /// Leader, replicas and ISR of each partition of `topic`, from the
    /// metadata any live broker gives.
    pub fn partitions(&self, topic: &str) -> Result<Vec<PartitionView>, Error> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .set("socket.timeout.ms", "5000")
            .create()?;
        let metadata =
            consumer.fetch_metadata(Some(topic), Timeout::After(Duration::from_secs(10)))?;
        let topic = metadata
            .topics()
            .first()
            .ok_or_else(|| Error("no topic in the metadata".to_owned()))?;
        let mut views: Vec<PartitionView> = topic
            .partitions()
            .iter()
            .map(|p| PartitionView {
                partition: p.id(),
                leader: p.leader(),
                replicas: p.replicas().to_vec(),
                isr: p.isr().to_vec(),
            })
            .collect();
        views.sort_by_key(|v| v.partition);
        Ok(views)
    }

    /// Stops every node with SIGTERM (a paused one is resumed first).
    pub fn stop_all(&mut self) {
        for node in &mut self.nodes {
            if node.is_running() {
                let _ = node.terminate(Duration::from_secs(30));
            }
        }
    }

    /// The data directory of node `id`.
    pub fn data_dir(&self, id: i32) -> PathBuf {
        self.path.join(format!("node-{id}"))
    }

    /// The last `lines` lines of node `id`'s log.
    pub fn log_tail(&self, id: i32, lines: usize) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.node(id).log) {
            let _ = f.read_to_string(&mut text);
        }
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if node.paused {
                let _ = node.resume();
            }
            node.kill9();
        }
    }
}
