//! The partition I/O boundary, on a broker opened in process whose log
//! files go through a storage that can stall one partition's writes or
//! directory renames: a partition stuck on its disk holds up only the
//! requests that write to or read from it, never the runtime's workers, so
//! produce and fetch to other partitions are answered meanwhile; a
//! partition moving between log directories is read throughout its move.

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::{Condvar, Mutex};
use tokio::net::TcpListener;
use weir_broker::{Broker, BrokerConfig};
use weir_client::Client;
use weir_log::storage::{FsStorage, Storage, StorageFile};

/// What goes to paths containing `stalled` (appends, or renames) waits
/// while the stall is on, as a write to a failing or saturated disk does.
#[derive(Default)]
struct Stall {
    state: Mutex<StallState>,
    changed: Condvar,
}

#[derive(Default)]
struct StallState {
    /// A part of the paths that stall.
    stalled: Option<String>,
    /// Operations waiting in the stall now.
    waiting: usize,
}

impl Stall {
    fn start(&self, path_part: &str) {
        self.state.lock().stalled = Some(path_part.to_owned());
    }

    fn release(&self) {
        self.state.lock().stalled = None;
        self.changed.notify_all();
    }

    fn waiting(&self) -> usize {
        self.state.lock().waiting
    }

    /// Waits until something is held in the stall; `what` says what
    /// never came, if nothing does in time.
    async fn reached(&self, what: &str) {
        let deadline = tokio::time::Instant::now() + PROMPTLY;
        while self.waiting() == 0 {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn wait_if_stalled(&self, path: &Path) {
        let mut state = self.state.lock();
        let path = path.to_string_lossy();
        let stalls = |state: &StallState| {
            state
                .stalled
                .as_ref()
                .is_some_and(|part| path.contains(part.as_str()))
        };
        if !stalls(&state) {
            return;
        }
        state.waiting += 1;
        self.changed.notify_all();
        while stalls(&state) {
            self.changed.wait(&mut state);
        }
        state.waiting -= 1;
    }
}

struct StallingStorage {
    inner: FsStorage,
    /// Appends.
    stall: Arc<Stall>,
    /// Directory renames (by the path renamed).
    renames: Arc<Stall>,
}

impl StallingStorage {
    fn wrap(&self, path: &Path, file: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(StallingFile {
            path: path.to_owned(),
            inner: file,
            stall: self.stall.clone(),
        })
    }
}

impl Storage for StallingStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(path, self.inner.open(path)?))
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(path, self.inner.create(path)?))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn rename_dir(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.renames.wait_if_stalled(from);
        self.inner.rename_dir(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}

struct StallingFile {
    path: PathBuf,
    inner: Arc<dyn StorageFile>,
    stall: Arc<Stall>,
}

impl StorageFile for StallingFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.inner.read_at(buf, position)
    }
    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        self.stall.wait_if_stalled(&self.path);
        self.inner.append(bufs)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    fn descriptor(&self) -> io::Result<Option<Arc<std::fs::File>>> {
        self.inner.descriptor()
    }
}

struct ReleaseOnDrop(Vec<Arc<Stall>>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        for stall in &self.0 {
            stall.release();
        }
    }
}

fn record(value: &str) -> Vec<(Option<Bytes>, Option<Bytes>)> {
    vec![(None, Some(Bytes::copy_from_slice(value.as_bytes())))]
}

/// Long enough for anything that is not stuck, on a loaded machine.
const PROMPTLY: Duration = Duration::from_secs(20);

/// A broker serving from `dir` with `values` on a runtime of its own with
/// two workers, as on a two-core machine; the clients and their deadlines
/// run on the test's, so that a broker whose workers are all stuck fails
/// the test instead of hanging it. Its files go through a storage that
/// stalls as `stalls` ask.
struct InProcess {
    runtime: tokio::runtime::Runtime,
    stalls: Stalls,
    bootstrap: String,
    /// Dropped before the runtime: a failing test must not leave its
    /// threads stuck in a stall.
    _release: ReleaseOnDrop,
    _stop: tokio::sync::watch::Sender<bool>,
}

#[derive(Clone, Default)]
struct Stalls {
    appends: Arc<Stall>,
    renames: Arc<Stall>,
}

impl InProcess {
    async fn start(dir: &Path, values: &[(&str, &str)], log_dirs: Vec<PathBuf>) -> Self {
        let std_socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_socket.set_nonblocking(true).unwrap();
        let address = std_socket.local_addr().unwrap();
        let values: BTreeMap<String, String> = values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut config = BrokerConfig::new(
            1,
            dir.to_owned(),
            address,
            None,
            "127.0.0.1:0".parse().unwrap(),
            &values,
        )
        .unwrap();
        config.startup.log_dirs = log_dirs;
        let listener_name = config.startup.listeners[0].name.clone();
        let stalls = Stalls::default();
        let storage = Arc::new(StallingStorage {
            inner: FsStorage::default(),
            stall: stalls.appends.clone(),
            renames: stalls.renames.clone(),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let release = ReleaseOnDrop(vec![stalls.appends.clone(), stalls.renames.clone()]);
        let broker = runtime
            .spawn_blocking(move || {
                Broker::open_with_storage(config, Arc::new(weir_log::SystemClock), Some(storage))
            })
            .await
            .unwrap()
            .unwrap();
        broker.set_serving(true);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let served = broker.clone();
        runtime.spawn(async move {
            let socket = TcpListener::from_std(std_socket).unwrap();
            weir_broker::server::run_listener(served, &listener_name, socket, stopped).await
        });
        Self {
            runtime,
            stalls,
            bootstrap: address.to_string(),
            _release: release,
            _stop: stop,
        }
    }

    /// Leaves the broker's runtime without waiting for its tasks.
    fn stop(self) {
        let Self {
            runtime, _release, ..
        } = self;
        drop(_release);
        runtime.shutdown_background();
    }
}

/// A partition whose appends are stuck on its disk holds up its own
/// writers and readers, never produce and fetch of another partition.
#[tokio::test]
async fn produce_and_fetch_to_one_partition_are_answered_while_another_is_stalled_on_its_disk() {
    let dir = tempfile::tempdir().unwrap();
    let broker = InProcess::start(
        dir.path(),
        &[("offsets.topic.num.partitions", "1")],
        Vec::new(),
    )
    .await;
    let stall = broker.stalls.appends.clone();
    let bootstrap = broker.bootstrap.clone();
    let mut admin = Client::connect(&bootstrap).await.unwrap();
    for topic in ["fast", "stuck"] {
        admin.create_topic(topic, 1, &[]).await.unwrap();
    }
    let mut fast = Client::connect(&bootstrap).await.unwrap();
    assert_eq!(fast.produce("fast", 0, record("a0")).await.unwrap(), 0);
    let mut stuck_producers = Vec::new();
    for _ in 0..3 {
        let mut client = Client::connect(&bootstrap).await.unwrap();
        client.produce("stuck", 0, record("b0")).await.unwrap();
        stuck_producers.push(client);
    }

    // More writers to the stalled partition than the runtime has workers.
    stall.start("stuck-0");
    let stuck: Vec<_> = stuck_producers
        .into_iter()
        .map(|mut client| {
            tokio::spawn(async move { client.produce("stuck", 0, record("b")).await })
        })
        .collect();
    stall.reached("no append reached the stalled disk").await;

    // Fetches of the stalled partition wait for its log, which the
    // stalled write holds: more of them than the runtime has workers.
    let mut stuck_readers = Vec::new();
    for _ in 0..3 {
        stuck_readers.push(Client::connect(&bootstrap).await.unwrap());
    }
    let stuck_fetches: Vec<_> = stuck_readers
        .into_iter()
        .map(|mut client| {
            tokio::spawn(async move { client.fetch("stuck", 0, 0, 1 << 20, 0).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let produced = tokio::time::timeout(PROMPTLY, fast.produce("fast", 0, record("a1")))
        .await
        .expect("a produce to another partition waits for the stalled one")
        .unwrap();
    assert_eq!(produced, 1);
    let fetched = tokio::time::timeout(PROMPTLY, fast.fetch("fast", 0, 0, 1 << 20, 0))
        .await
        .expect("a fetch of another partition waits for the stalled one")
        .unwrap();
    let values: Vec<_> = fetched.iter().map(|r| r.value.clone().unwrap()).collect();
    assert_eq!(
        values,
        [Bytes::from_static(b"a0"), Bytes::from_static(b"a1")]
    );
    assert!(
        stuck.iter().all(|produce| !produce.is_finished()),
        "the stalled partition's produces were answered before its disk came back"
    );

    // Once the disk is back, every held write lands, in order.
    stall.release();
    for fetch in stuck_fetches {
        let fetched = tokio::time::timeout(PROMPTLY, fetch)
            .await
            .expect("a fetch of the held partition is answered once its disk is back")
            .unwrap()
            .unwrap();
        assert!(!fetched.is_empty(), "the held partition's records are read");
    }
    for produce in stuck {
        tokio::time::timeout(PROMPTLY, produce)
            .await
            .expect("a held write is answered once the disk is back")
            .unwrap()
            .unwrap();
    }
    let fetched = fast.fetch("stuck", 0, 0, 1 << 20, 0).await.unwrap();
    assert_eq!(fetched.len(), 6);
    broker.stop();
}

/// A move between log directories holds out the partition's writers while
/// it copies the last of the log and puts the copy in place; its readers
/// go on reading the old log meanwhile, and no worker waits.
#[tokio::test]
async fn a_partition_moving_to_another_log_dir_is_read_while_the_move_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let broker = InProcess::start(
        dir.path(),
        &[("offsets.topic.num.partitions", "1")],
        vec![first.clone(), second.clone()],
    )
    .await;
    let mut admin = Client::connect(&broker.bootstrap).await.unwrap();
    admin.create_topic("moving", 1, &[]).await.unwrap();
    let source = [&first, &second]
        .into_iter()
        .map(|d| d.join("moving-0"))
        .find(|d| d.exists())
        .expect("the partition's directory");
    let target = if source.starts_with(&first) {
        &second
    } else {
        &first
    };
    let mut writer = Client::connect(&broker.bootstrap).await.unwrap();
    for value in ["m0", "m1"] {
        writer.produce("moving", 0, record(value)).await.unwrap();
    }

    broker.stalls.renames.start(&source.to_string_lossy());
    let request =
        AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
            .with_path(StrBytes::from_string(target.to_string_lossy().into_owned()))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("moving")))
                .with_partitions(vec![0])])]);
    let response: AlterReplicaLogDirsResponse = admin
        .call(ApiKey::AlterReplicaLogDirs, &request)
        .await
        .unwrap();
    assert_eq!(response.results[0].partitions[0].error_code, 0);
    broker
        .stalls
        .renames
        .reached("the move never came to putting its copy in place")
        .await;

    // The move now holds out writers: a produce waits for it.
    let held = tokio::spawn(async move { writer.produce("moving", 0, record("m2")).await });
    // Readers, more than the runtime has workers, read the old log.
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(Client::connect(&broker.bootstrap).await.unwrap());
    }
    for reader in &mut readers {
        let fetched = tokio::time::timeout(PROMPTLY, reader.fetch("moving", 0, 0, 1 << 20, 0))
            .await
            .expect("a fetch of a moving partition waits for its move")
            .unwrap();
        let values: Vec<_> = fetched.iter().map(|r| r.value.clone().unwrap()).collect();
        assert_eq!(
            values,
            [Bytes::from_static(b"m0"), Bytes::from_static(b"m1")]
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !held.is_finished(),
        "a produce was answered while the move put its copy in place"
    );

    // Once the move is done, the held write lands in the moved log.
    broker.stalls.renames.release();
    let offset = tokio::time::timeout(PROMPTLY, held)
        .await
        .expect("the held produce is answered once the move is done")
        .unwrap()
        .unwrap();
    assert_eq!(offset, 2);
    // (A fetch reads one segment: the move sealed the one holding m0, m1.)
    let fetched = readers[0].fetch("moving", 0, 2, 1 << 20, 0).await.unwrap();
    let values: Vec<_> = fetched.iter().map(|r| r.value.clone().unwrap()).collect();
    assert_eq!(values, [Bytes::from_static(b"m2")]);
    assert!(
        target.join("moving-0").exists(),
        "the log is in its new directory"
    );
    assert!(!source.exists(), "the old directory is gone");
    broker.stop();
}

/// A group coordinator's write stuck on its disk holds up the requests
/// queued behind it on its shard, never the reads between its events
/// (ListGroups) nor, through them, the runtime's workers.
/// A broker with one `__consumer_offsets` partition, loaded and holding
/// the group "before" (with an offset of the topic "fast"), and a client.
async fn coordinating_a_group(dir: &Path) -> (InProcess, Client) {
    let broker = InProcess::start(dir, &[("offsets.topic.num.partitions", "1")], Vec::new()).await;
    let mut admin = Client::connect(&broker.bootstrap).await.unwrap();
    admin.create_topic("fast", 1, &[]).await.unwrap();
    // FindCoordinator creates `__consumer_offsets`; its coordinator is not
    // available until the partition is loaded.
    let committed = vec![("fast".to_owned(), 0, 1)];
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    let _ = admin.find_coordinator("before").await;
    while let Err(error) = admin.offset_commit_simple("before", &committed).await {
        assert!(tokio::time::Instant::now() < deadline, "{error}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (broker, admin)
}

/// ListGroups from more clients of the stalled coordinator than the
/// runtime has workers, each answered promptly with the group "before".
async fn groups_are_listed_promptly(broker: &InProcess) {
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(Client::connect(&broker.bootstrap).await.unwrap());
    }
    let reads: Vec<_> = readers
        .into_iter()
        .map(|mut client| tokio::spawn(async move { client.list_groups().await }))
        .collect();
    for read in reads {
        let listed = tokio::time::timeout(PROMPTLY, read)
            .await
            .expect("a group read waits for a coordinator's stalled write")
            .unwrap()
            .unwrap();
        assert!(listed.iter().any(|g| g.group_id == "before"), "{listed:?}");
    }
}

#[tokio::test]
async fn group_reads_are_answered_while_a_coordinator_write_is_stalled_on_its_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut admin) = coordinating_a_group(dir.path()).await;

    broker.stalls.appends.start("__consumer_offsets-0");
    let mut committer = Client::connect(&broker.bootstrap).await.unwrap();
    let held = tokio::spawn(async move {
        committer
            .offset_commit_simple("during", &[("fast".to_owned(), 0, 1)])
            .await
    });
    broker
        .stalls
        .appends
        .reached("the commit never reached the stalled disk")
        .await;

    groups_are_listed_promptly(&broker).await;
    let mut fast = Client::connect(&broker.bootstrap).await.unwrap();
    tokio::time::timeout(PROMPTLY, fast.produce("fast", 0, record("a0")))
        .await
        .expect("a produce waits for a coordinator's stalled write")
        .unwrap();
    assert!(
        !held.is_finished(),
        "a commit was answered before its write"
    );

    broker.stalls.appends.release();
    tokio::time::timeout(PROMPTLY, held)
        .await
        .expect("the held commit is answered once the disk is back")
        .unwrap()
        .unwrap();
    let listed = admin.list_groups().await.unwrap();
    assert!(listed.iter().any(|g| g.group_id == "during"), "{listed:?}");
    broker.stop();
}

#[tokio::test]
async fn group_reads_are_answered_while_a_group_membership_write_is_stalled_on_its_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, _admin) = coordinating_a_group(dir.path()).await;

    // A member joining a consumer group (KIP-848): its group's records are
    // written before it hears its epoch.
    broker.stalls.appends.start("__consumer_offsets-0");
    let mut member = Client::connect(&broker.bootstrap).await.unwrap();
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("joining")))
        .with_member_id(StrBytes::from_string(uuid::Uuid::new_v4().to_string()))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("fast"))]))
        .with_topic_partitions(Some(Vec::new()));
    let joining = tokio::spawn(async move {
        member
            .call::<_, ConsumerGroupHeartbeatResponse>(ApiKey::ConsumerGroupHeartbeat, &request)
            .await
    });
    broker
        .stalls
        .appends
        .reached("the join never reached the stalled disk")
        .await;

    groups_are_listed_promptly(&broker).await;
    assert!(
        !joining.is_finished(),
        "a member was given its epoch before its group's write"
    );

    broker.stalls.appends.release();
    let joined = tokio::time::timeout(PROMPTLY, joining)
        .await
        .expect("the join is answered once the disk is back")
        .unwrap()
        .unwrap();
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert!(joined.member_epoch >= 1, "{joined:?}");
    broker.stop();
}
