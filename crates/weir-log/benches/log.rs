//! Benchmarks of the partition log on real files (see `BENCHMARKS.md` at the
//! repository root for the method and the figures).
//!
//! ```sh
//! cargo bench -p weir-log                  # everything, about 5 minutes
//! cargo bench -p weir-log -- reopen        # one group
//! ```
//!
//! Logs live in temporary directories under `target/tmp` (or
//! `$WEIR_BENCH_DIR`), so on the disk the workspace is on, not on tmpfs.
//! Before the first group the disk baseline `scripts/disk-speed.sh` runs
//! (unless `WEIR_DISK_MB_S`, `WEIR_DISK_READ_MB_S` and `WEIR_FSYNC_US` are
//! set), and a summary at the end quotes the results as ratios of it.
//!
//! Under `cargo test --benches` every benchmark runs once on small logs.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::hint::black_box;
use std::io;
use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tempfile::TempDir;
use weir_log::batch::BatchHeader;
use weir_log::storage::{FsStorage, Storage, StorageFile};
use weir_log::testing::BatchBuilder;
use weir_log::{Log, LogConfig, SystemClock};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;

// ---------------------------------------------------------------------------
// Set-up shared by the groups.

/// `cargo bench` passes `--bench`; `cargo test --benches` does not, and then
/// every log is small so that the run only checks that the code works.
fn full_run() -> bool {
    static FULL: OnceLock<bool> = OnceLock::new();
    *FULL.get_or_init(|| {
        let args: Vec<String> = std::env::args().collect();
        args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test" || a == "--list")
    })
}

/// `full` bytes in a real run, `small` under `cargo test --benches`.
fn scaled(full: u64, small: u64) -> u64 {
    if full_run() {
        full
    } else {
        small
    }
}

fn bench_root() -> PathBuf {
    std::env::var_os("WEIR_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

fn tempdir() -> TempDir {
    let root = bench_root();
    fs::create_dir_all(&root).expect("create the benchmark directory");
    tempfile::Builder::new()
        .prefix("weir-bench-")
        .tempdir_in(&root)
        .expect("create a temporary directory")
}

/// Device and file-system type of the mount holding `path`.
fn filesystem_of(path: &Path) -> Option<(String, String)> {
    let path = path.canonicalize().ok()?;
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (device, mount, fstype) = (fields.next()?, fields.next()?, fields.next()?);
            path.starts_with(mount)
                .then(|| (mount.len(), device.to_owned(), fstype.to_owned()))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, device, fstype)| (device, fstype))
}

/// Wall-clock milliseconds, as a producer stamps its records.
fn now_ms() -> i64 {
    use weir_log::Clock as _;
    SystemClock.now_ms()
}

/// A batch of `size` bytes made of records of about 1 KiB, stamped now.
///
/// The timestamp matters: the log rolls a segment when the first timestamp
/// of the active segment is `segment.ms` (7 days) older than the clock, so
/// batches stamped in the past would roll a new segment on every append.
fn batch_of(size: usize) -> Vec<u8> {
    BatchBuilder::sized((size / KIB).max(1), size)
        .timestamp(now_ms())
        .build()
}

fn records_in(batch: &[u8]) -> u64 {
    BatchHeader::parse(batch, 0)
        .expect("a batch")
        .record_count() as u64
}

/// Appends `batch` until the log holds `count` batches.
fn fill(log: &Log, batch: &[u8], count: u64) {
    for _ in 0..count {
        log.append(batch, 0).expect("append");
    }
}

/// Makes the files of `dir` durable behind the log's back (so that their
/// pages are clean and the disk is quiet before a measurement), without
/// moving the log's recovery point.
fn sync_files(dir: &Path) {
    for entry in fs::read_dir(dir).expect("list the log directory") {
        let path = entry.expect("directory entry").path();
        if path.is_file() {
            File::open(&path)
                .and_then(|f| f.sync_all())
                .expect("sync a log file");
        }
    }
}

/// Evicts the (synced) files of `dir` from the page cache, so that the next
/// read comes from the disk: GNU dd with `count=0` and `iflag=nocache` asks
/// the kernel to drop the whole file (`posix_fadvise(DONTNEED)`).
fn drop_page_cache(dir: &Path) {
    sync_files(dir);
    for entry in fs::read_dir(dir).expect("list the log directory") {
        let path = entry.expect("directory entry").path();
        if !path.is_file() {
            continue;
        }
        let status = Command::new("dd")
            .arg(format!("if={}", path.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .status()
            .expect("run dd");
        assert!(
            status.success(),
            "dd could not drop the cache of {}",
            path.display()
        );
    }
}

// ---------------------------------------------------------------------------
// The disk baseline and the summary printed at the end.

#[derive(Debug, Clone, Copy, Default)]
struct DiskBaseline {
    /// `dd bs=1M count=1024 conv=fdatasync`, MB/s.
    write_mb_s: Option<f64>,
    /// `dd bs=1M` of a file evicted from the page cache, MB/s.
    read_mb_s: Option<f64>,
    /// `dd bs=4k count=1000 oflag=dsync`, µs per write.
    fsync_us: Option<f64>,
}

fn env_f64(name: &str) -> Option<f64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The figures of `scripts/disk-speed.sh`, from the environment or by running
/// it on the benchmark directory.
fn disk_baseline() -> DiskBaseline {
    static BASELINE: OnceLock<DiskBaseline> = OnceLock::new();
    *BASELINE.get_or_init(|| {
        let from_env = DiskBaseline {
            write_mb_s: env_f64("WEIR_DISK_MB_S"),
            read_mb_s: env_f64("WEIR_DISK_READ_MB_S"),
            fsync_us: env_f64("WEIR_FSYNC_US"),
        };
        if from_env.write_mb_s.is_some() || !full_run() {
            return from_env;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/disk-speed.sh");
        let root = bench_root();
        let _ = fs::create_dir_all(&root);
        println!("disk baseline: {} {}", script.display(), root.display());
        let output = match Command::new("bash").arg(&script).arg(&root).output() {
            Ok(output) if output.status.success() => output,
            Ok(output) => {
                eprintln!(
                    "disk baseline failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
                return from_env;
            }
            Err(error) => {
                eprintln!("disk baseline not run: {error}");
                return from_env;
            }
        };
        let text = String::from_utf8_lossy(&output.stdout);
        print!("{text}");
        let value = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.trim().parse().ok())
        };
        DiskBaseline {
            write_mb_s: value("WEIR_DISK_MB_S"),
            read_mb_s: value("WEIR_DISK_READ_MB_S"),
            fsync_us: value("WEIR_FSYNC_US"),
        }
    })
}

/// Lines of the final summary, with figures derived from the timed runs
/// (warm-up included) rather than from criterion's estimates.
static SUMMARY: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn summarize(name: impl Into<String>, figures: String) {
    SUMMARY
        .lock()
        .expect("summary")
        .push((name.into(), figures));
}

fn ratio(value: f64, of: Option<f64>) -> String {
    match of {
        Some(of) if of > 0.0 => format!("{:.2}x", value / of),
        _ => "n/a".to_owned(),
    }
}

/// Total work and time of the timed runs of one benchmark.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    iterations: u64,
    elapsed: Duration,
}

impl Tally {
    fn add(&mut self, iterations: u64, elapsed: Duration) {
        self.iterations += iterations;
        self.elapsed += elapsed;
    }
    fn per_second(&self) -> f64 {
        self.iterations as f64 / self.elapsed.as_secs_f64()
    }
    fn mean(&self) -> Duration {
        self.elapsed / self.iterations.max(1) as u32
    }
}

// ---------------------------------------------------------------------------
// 1. append: one batch per iteration into the page cache, no fsync.

fn bench_append(c: &mut Criterion) {
    let disk = disk_baseline();
    let mut group = c.benchmark_group("append");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(20);
    for (label, size) in [("1KiB", KIB), ("16KiB", 16 * KIB), ("1MiB", MIB)] {
        let batch = batch_of(size);
        let len = batch.len() as u64;
        group.throughput(Throughput::ElementsAndBytes {
            elements: 1,
            bytes: len,
        });
        let mut tally = Tally::default();
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            // A fresh log per sample (default config: 1 GiB segments, no
            // flush), so the files never grow beyond one sample's worth.
            b.iter_custom(|iters| {
                let dir = tempdir();
                let log = Log::open(dir.path(), LogConfig::default()).expect("open");
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(log.append(black_box(&batch), 0).expect("append"));
                }
                let elapsed = start.elapsed();
                tally.add(iters, elapsed);
                let segments = log.segment_base_offsets().len() as u64;
                assert!(
                    segments <= 1 + iters * len / GIB,
                    "unexpected segment rolls"
                );
                drop(log);
                drop(dir);
                elapsed
            });
        });
        if tally.iterations == 0 {
            continue;
        }
        let batches_s = tally.per_second();
        let mb_s = batches_s * len as f64 / 1e6;
        summarize(
            format!("append/{label} ({len} B batches, no fsync)"),
            format!(
                "{mb_s:.0} MB/s, {batches_s:.0} batches/s, {:.0} records/s, {} of dd write speed",
                batches_s * records_in(&batch) as f64,
                ratio(mb_s, disk.write_mb_s)
            ),
        );
    }
    group.finish();
}

// ---------------------------------------------------------------------------
// 2. append_group_commit: append + flush_to from concurrent threads.

/// Real files, with the fsyncs counted and timed.
#[derive(Debug, Default)]
struct SyncCounter {
    syncs: AtomicU64,
    sync_nanos: AtomicU64,
}

impl SyncCounter {
    fn snapshot(&self) -> (u64, u64) {
        (
            self.syncs.load(Ordering::Relaxed),
            self.sync_nanos.load(Ordering::Relaxed),
        )
    }
    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let result = f();
        self.sync_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.syncs.fetch_add(1, Ordering::Relaxed);
        result
    }
}

struct CountingStorage {
    inner: FsStorage,
    counter: Arc<SyncCounter>,
}

struct CountingFile {
    inner: Arc<dyn StorageFile>,
    counter: Arc<SyncCounter>,
}

impl CountingStorage {
    fn wrap(&self, file: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(CountingFile {
            inner: file,
            counter: self.counter.clone(),
        })
    }
}

impl Storage for CountingStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.inner.open(path).map(|f| self.wrap(f))
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.inner.create(path).map(|f| self.wrap(f))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn rename_dir(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename_dir(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.counter.time(|| self.inner.sync_dir(dir))
    }
}

impl StorageFile for CountingFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.inner.read_at(buf, position)
    }
    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        self.inner.append(bufs)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
    fn sync(&self) -> io::Result<()> {
        self.counter.time(|| self.inner.sync())
    }
    fn descriptor(&self) -> io::Result<Option<Arc<std::fs::File>>> {
        self.inner.descriptor()
    }
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, position)
    }
}

fn bench_group_commit(c: &mut Criterion) {
    let disk = disk_baseline();
    let mut group = c.benchmark_group("append_group_commit");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    let batch = batch_of(KIB);
    let len = batch.len() as u64;
    for threads in [1u64, 8, 64] {
        let dir = tempdir();
        let counter = Arc::new(SyncCounter::default());
        let storage = Arc::new(CountingStorage {
            inner: FsStorage::default(),
            counter: counter.clone(),
        });
        let log = Arc::new(
            Log::open_with(
                dir.path(),
                LogConfig::default(),
                storage,
                Arc::new(SystemClock),
            )
            .expect("open"),
        );
        log.flush().expect("flush the new segment");
        group.throughput(Throughput::ElementsAndBytes {
            elements: 1,
            bytes: len,
        });
        let mut tally = Tally::default();
        let (syncs_before, nanos_before) = counter.snapshot();
        group.bench_function(BenchmarkId::new("threads", threads), |b| {
            // One iteration is one durable batch; a sample's batches are
            // shared out among the threads.
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|scope| {
                    for t in 0..threads {
                        let n = iters / threads + u64::from(t < iters % threads);
                        let (log, batch) = (&log, &batch);
                        scope.spawn(move || {
                            for _ in 0..n {
                                let info = log.append(batch, 0).expect("append");
                                log.flush_to(info.last_offset + 1).expect("flush");
                            }
                        });
                    }
                });
                let elapsed = start.elapsed();
                tally.add(iters, elapsed);
                elapsed
            });
        });
        if tally.iterations == 0 {
            continue;
        }
        let (syncs_after, nanos_after) = counter.snapshot();
        let syncs = syncs_after - syncs_before;
        let sync_us = (nanos_after - nanos_before) as f64 / syncs.max(1) as f64 / 1e3;
        let batches_s = tally.per_second();
        let mb_s = batches_s * len as f64 / 1e6;
        let fsync_limited = disk.fsync_us.map(|us| 1e6 / us);
        summarize(
            format!("append_group_commit/{threads} threads ({len} B batches)"),
            format!(
                "{batches_s:.0} durable batches/s, {mb_s:.2} MB/s, {:.1} batches per fsync \
                 ({syncs} fsyncs, mean {sync_us:.0} µs each), {} of dd's fsyncs/s",
                tally.iterations as f64 / syncs.max(1) as f64,
                ratio(batches_s, fsync_limited)
            ),
        );
        drop(log);
        drop(dir);
    }
    group.finish();
}

// ---------------------------------------------------------------------------
// 3. read: the whole log, 1 MiB at a time.

/// Offset of the record after the last batch of `bytes`.
fn next_offset_after(bytes: &[u8]) -> u64 {
    let mut position = 0;
    let mut next = 0;
    while position < bytes.len() {
        let header = BatchHeader::parse(&bytes[position..], position).expect("a batch");
        next = header.next_offset() as u64;
        position += header.total_size();
    }
    next
}

/// A log of `target` bytes of 16 KiB batches in one segment, flushed.
struct ReadFixture {
    log: Log,
    dir: TempDir,
    end: u64,
    size: u64,
    batch_len: u64,
    batch_records: u64,
}

impl ReadFixture {
    fn build(target: u64) -> Self {
        let batch = batch_of(16 * KIB);
        let batch_len = batch.len() as u64;
        let batch_records = records_in(&batch);
        let dir = tempdir();
        let log = Log::open(dir.path(), LogConfig::default()).expect("open");
        fill(&log, &batch, target / batch_len);
        log.flush().expect("flush");
        let end = log.log_end_offset();
        let size = log.size_bytes();
        assert_eq!(size, target / batch_len * batch_len);
        assert_eq!(
            log.segment_base_offsets().len(),
            1,
            "unexpected segment rolls"
        );
        let fixture = Self {
            log,
            dir,
            end,
            size,
            batch_len,
            batch_records,
        };
        assert_eq!(fixture.read_all(true), size, "the reads missed bytes");
        fixture
    }

    /// Reads the log from offset 0 to its end with 1 MiB reads; returns the
    /// number of bytes read.
    fn read_all(&self, copy: bool) -> u64 {
        let mut offset = 0;
        let mut total = 0;
        while offset < self.end {
            let slice = self.log.read(offset, MIB, u64::MAX).expect("read");
            total += slice.len();
            offset = if copy {
                let bytes = slice.to_bytes().expect("read the slice");
                next_offset_after(&bytes)
            } else {
                // The sendfile path: only the region is needed. Every batch
                // of this log has the same size and record count.
                slice.first_offset() + slice.len() / self.batch_len * self.batch_records
            };
            black_box(&slice);
        }
        total
    }
}

fn bench_read(c: &mut Criterion) {
    let disk = disk_baseline();
    let target = scaled(256 * MIB as u64, 8 * MIB as u64);
    let batch_len = batch_of(16 * KIB).len() as u64;
    let size = target / batch_len * batch_len;
    let mut fixture: Option<ReadFixture> = None;
    let mut group = c.benchmark_group("read");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Bytes(size));
    let size_label = format!("{}MiB", size / MIB as u64);
    for (name, copy, cold) in [
        ("to_bytes", true, false),
        ("slice_only", false, false),
        ("to_bytes_cold_cache", true, true),
    ] {
        let mut tally = Tally::default();
        group.bench_function(BenchmarkId::new(name, &size_label), |b| {
            let f = fixture.get_or_insert_with(|| ReadFixture::build(target));
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    if cold {
                        drop_page_cache(f.dir.path());
                    }
                    let start = Instant::now();
                    black_box(f.read_all(copy));
                    elapsed += start.elapsed();
                }
                tally.add(iters, elapsed);
                elapsed
            });
        });
        if let Some(f) = fixture.as_ref().filter(|_| tally.iterations > 0) {
            let secs = tally.mean().as_secs_f64();
            let mb_s = f.size as f64 / secs / 1e6;
            let reads = f.size.div_ceil(MIB as u64) as f64;
            let name = format!(
                "read/{name} ({} MiB of {} B batches, 1 MiB reads)",
                f.size / MIB as u64,
                f.batch_len
            );
            let figures = if copy {
                format!(
                    "{mb_s:.0} MB/s, {:.0} reads/s, {} of dd's cold read speed",
                    reads / secs,
                    ratio(mb_s, disk.read_mb_s)
                )
            } else {
                format!(
                    "{:.2} µs per read() call without copying the bytes",
                    secs / reads * 1e6
                )
            };
            summarize(name, figures);
        }
    }
    group.finish();
}

// ---------------------------------------------------------------------------
// 4. offset_for_timestamp in a log of many segments.

/// Five full segments and a half-full active one, of 16 KiB batches of 16
/// records; record `n` (offset `n`) has timestamp `t0 + n`.
struct TimestampFixture {
    log: Log,
    _dir: TempDir,
    t0: i64,
    end: u64,
    active_base: u64,
    segments: usize,
}

impl TimestampFixture {
    fn build(segment_bytes: u64) -> Self {
        let records_per_batch = 16;
        let template = batch_of(16 * KIB);
        let value_size = template.len() / records_per_batch - 12;
        let per_segment = segment_bytes / template.len() as u64;
        let batches = 5 * per_segment + per_segment / 2;
        let dir = tempdir();
        let config = LogConfig {
            segment_bytes,
            ..Default::default()
        };
        let log = Log::open(dir.path(), config).expect("open");
        let t0 = now_ms();
        for k in 0..batches {
            let batch = BatchBuilder::new(records_per_batch)
                .timestamp(t0 + (k * records_per_batch as u64) as i64)
                .value_size(value_size)
                .build();
            log.append(&batch, 0).expect("append");
        }
        log.flush().expect("flush");
        let end = log.log_end_offset();
        let bases = log.segment_base_offsets();
        let active_base = *bases.last().expect("a segment");
        for offset in [0, end / 3, active_base, end - 1] {
            let found = log
                .offset_for_timestamp(t0 + offset as i64)
                .expect("lookup")
                .expect("found");
            assert_eq!(
                found.offset, offset,
                "timestamp lookup answers the wrong offset"
            );
        }
        sync_files(dir.path());
        assert_eq!(bases.len(), 6, "unexpected segment rolls");
        Self {
            log,
            _dir: dir,
            t0,
            end,
            active_base,
            segments: bases.len(),
        }
    }
}

fn bench_offset_for_timestamp(c: &mut Criterion) {
    let segment_bytes = scaled(64 * MIB as u64, 2 * MIB as u64);
    let mut fixture: Option<TimestampFixture> = None;
    let mut group = c.benchmark_group("offset_for_timestamp");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let label = format!("6x{}MiB_segments", segment_bytes / MIB as u64);
    for (name, active_only) in [
        ("random_any_segment", false),
        ("random_active_segment", true),
    ] {
        let mut tally = Tally::default();
        group.bench_function(BenchmarkId::new(name, &label), |b| {
            let f = fixture.get_or_insert_with(|| TimestampFixture::build(segment_bytes));
            let from = if active_only { f.active_base } else { 0 };
            let mut rng = StdRng::seed_from_u64(7);
            let targets: Vec<i64> = (0..4096)
                .map(|_| f.t0 + rng.random_range(from..f.end) as i64)
                .collect();
            let mut next = 0;
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let ts = targets[next % targets.len()];
                    next += 1;
                    black_box(f.log.offset_for_timestamp(black_box(ts)).expect("lookup"));
                }
                let elapsed = start.elapsed();
                tally.add(iters, elapsed);
                elapsed
            });
        });
        if let Some(f) = fixture.as_ref().filter(|_| tally.iterations > 0) {
            summarize(
                format!(
                    "offset_for_timestamp/{name} ({} segments of {} MiB, {} MiB)",
                    f.segments,
                    segment_bytes / MIB as u64,
                    f.log.size_bytes() / MIB as u64
                ),
                format!(
                    "{:.1} µs per lookup, {:.0} lookups/s",
                    tally.mean().as_secs_f64() * 1e6,
                    tally.per_second()
                ),
            );
        }
    }
    group.finish();
}

// ---------------------------------------------------------------------------
// 5. reopen: clean versus unclean, warm and cold page cache.

/// The state a reopen benchmark needs its log in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Dropped without a flush since it was written: the recovery point is
    /// where it was before the appends (0).
    UncleanNeverFlushed,
    /// Flushed, then dropped: the recovery point is the active segment.
    UncleanFlushed,
    /// Closed with `Log::close`.
    Clean,
}

/// A log of `batches` 16 KiB batches, moved between shutdown states.
struct ReopenFixture {
    dir: TempDir,
    config: LogConfig,
    end: u64,
    state: State,
}

impl ReopenFixture {
    fn build(config: LogConfig, batches: u64, segments: usize) -> Self {
        let batch = batch_of(16 * KIB);
        let dir = tempdir();
        let log = Log::open(dir.path(), config.clone()).expect("open");
        fill(&log, &batch, batches);
        assert_eq!(log.segment_base_offsets().len(), segments);
        let end = log.log_end_offset();
        drop(log);
        sync_files(dir.path());
        Self {
            dir,
            config,
            end,
            state: State::UncleanNeverFlushed,
        }
    }

    fn open(&self) -> Log {
        Log::open(self.dir.path(), self.config.clone()).expect("reopen")
    }

    fn ensure(&mut self, state: State) {
        if self.state == state {
            return;
        }
        let log = self.open();
        match state {
            State::Clean => log.close().expect("close"),
            State::UncleanFlushed => {
                log.flush().expect("flush");
                drop(log);
            }
            State::UncleanNeverFlushed => panic!("a flushed log cannot be unflushed"),
        }
        sync_files(self.dir.path());
        self.state = state;
    }
}

/// Opens the fixture's log repeatedly in `state`, timing `Log::open` only;
/// between iterations the log is closed (clean) or dropped (unclean) again.
fn bench_open(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    fixture: &mut Option<ReopenFixture>,
    build: impl Fn() -> ReopenFixture,
    state: State,
    cold: bool,
    scanned_bytes: u64,
) {
    let mut tally = Tally::default();
    // Ten opens that each read the whole log from the disk take longer
    // than the group's default.
    let long = cold && scanned_bytes > GIB / 2;
    group.measurement_time(Duration::from_secs(if long { 15 } else { 5 }));
    group.bench_function(name, |b| {
        let f = fixture.get_or_insert_with(&build);
        f.ensure(state);
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                if cold {
                    drop_page_cache(f.dir.path());
                }
                let start = Instant::now();
                let log = f.open();
                elapsed += start.elapsed();
                assert_eq!(log.log_end_offset(), f.end, "reopen lost records");
                match state {
                    State::Clean => log.close().expect("close"),
                    State::UncleanFlushed | State::UncleanNeverFlushed => drop(log),
                }
            }
            tally.add(iters, elapsed);
            elapsed
        });
    });
    if tally.iterations == 0 {
        return;
    }
    let mean = tally.mean();
    let scan = if scanned_bytes > 0 {
        let mb_s = scanned_bytes as f64 / mean.as_secs_f64() / 1e6;
        let versus_disk = if cold {
            format!(
                ", {} of dd's cold read speed",
                ratio(mb_s, disk_baseline().read_mb_s)
            )
        } else {
            String::new()
        };
        format!(
            ", {} MiB scanned at {mb_s:.0} MB/s{versus_disk}",
            scanned_bytes / MIB as u64
        )
    } else {
        ", nothing scanned".to_owned()
    };
    summarize(
        format!("reopen/{name}"),
        format!("{:.1} ms per open{scan}", mean.as_secs_f64() * 1e3),
    );
}

fn bench_reopen(c: &mut Criterion) {
    let len = batch_of(16 * KIB).len() as u64;
    let small_segment = scaled(128 * MIB as u64, 4 * MIB as u64);
    // Eight full small segments: at most 1 GiB, and one segment of the
    // default size (1 GiB) holds it all.
    let batches = 8 * (small_segment / len);
    let log_bytes = batches * len;
    assert!(log_bytes <= GIB);
    let size = format!("{}MiB", log_bytes / MIB as u64);

    let mut group = c.benchmark_group("reopen");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);

    // One segment of the default size. Its recovery point stays at 0
    // whatever is flushed, as it only moves at segment boundaries: every
    // unclean open scans the whole log.
    let mut big = None;
    let build_big = || ReopenFixture::build(LogConfig::default(), batches, 1);
    for (state, cold) in [
        (State::UncleanNeverFlushed, false),
        (State::UncleanNeverFlushed, true),
        (State::Clean, false),
        (State::Clean, true),
    ] {
        let kind = if state == State::Clean {
            "clean"
        } else {
            "unclean"
        };
        let cache = if cold { "cold_cache" } else { "warm_cache" };
        let scanned = if state == State::Clean { 0 } else { log_bytes };
        let name = format!("{kind}/1GiB_segments_{size}/{cache}");
        bench_open(&mut group, &name, &mut big, build_big, state, cold, scanned);
    }
    drop(big);

    // Eight small segments: never flushed (everything scanned), then flushed
    // once (only the active, last segment scanned).
    let mut small = None;
    let small_config = LogConfig {
        segment_bytes: small_segment,
        ..Default::default()
    };
    let build_small = || ReopenFixture::build(small_config.clone(), batches, 8);
    let label = format!("8x{}MiB_segments_{size}", small_segment / MIB as u64);
    for (state, kind, cold, scanned) in [
        (
            State::UncleanNeverFlushed,
            "unclean_never_flushed",
            false,
            log_bytes,
        ),
        (
            State::UncleanFlushed,
            "unclean_flushed",
            false,
            log_bytes / 8,
        ),
        (
            State::UncleanFlushed,
            "unclean_flushed",
            true,
            log_bytes / 8,
        ),
        (State::Clean, "clean", false, 0),
    ] {
        let cache = if cold { "cold_cache" } else { "warm_cache" };
        let name = format!("{kind}/{label}/{cache}");
        bench_open(
            &mut group,
            &name,
            &mut small,
            build_small,
            state,
            cold,
            scanned,
        );
    }
    group.finish();
}

// ---------------------------------------------------------------------------

/// The load average and the CPU and I/O pressure (share of the last 60 s in
/// which some task waited for a CPU or the disk): other work on the machine
/// skews the figures.
fn machine_load() -> String {
    let read = |path: &str| fs::read_to_string(path).unwrap_or_default();
    let pressure = |path: &str| {
        read(path)
            .lines()
            .find(|l| l.starts_with("some"))
            .and_then(|l| l.split_whitespace().find(|f| f.starts_with("avg60=")))
            .map_or("n/a".to_owned(), |f| format!("{}%", &f[6..]))
    };
    let loadavg = read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "load average {loadavg}; CPU pressure (avg60) {}, I/O pressure (avg60) {}",
        pressure("/proc/pressure/cpu"),
        pressure("/proc/pressure/io")
    )
}

fn print_summary() {
    let rows = SUMMARY.lock().expect("summary");
    if rows.is_empty() {
        return;
    }
    let disk = disk_baseline();
    let mut out = String::from("\n== weir-log summary (means over all timed runs) ==\n");
    let show = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.0}"));
    let _ = writeln!(out, "machine at the end: {}", machine_load());
    let _ = writeln!(
        out,
        "disk baseline: write {} MB/s, cold read {} MB/s, fsync {} µs",
        show(disk.write_mb_s),
        show(disk.read_mb_s),
        show(disk.fsync_us)
    );
    for (name, figures) in rows.iter() {
        let _ = writeln!(out, "{name:<72} {figures}");
    }
    print!("{out}");
}

fn main() {
    let root = bench_root();
    let _ = fs::create_dir_all(&root);
    if full_run() {
        match filesystem_of(&root) {
            Some((device, fstype)) => {
                println!("benchmark logs in {} ({device}, {fstype})", root.display());
                if fstype == "tmpfs" {
                    eprintln!("warning: {} is tmpfs, not a disk", root.display());
                }
            }
            None => println!("benchmark logs in {}", root.display()),
        }
        println!("machine at the start: {}", machine_load());
        disk_baseline();
    }
    let mut criterion = Criterion::default().configure_from_args();
    bench_append(&mut criterion);
    bench_group_commit(&mut criterion);
    bench_read(&mut criterion);
    bench_offset_for_timestamp(&mut criterion);
    bench_reopen(&mut criterion);
    criterion.final_summary();
    print_summary();
}
