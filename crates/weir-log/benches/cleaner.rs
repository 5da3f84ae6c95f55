//! Throughput of the log cleaner on real files: one full pass over a dirty
//! log of about 100 MB (records of about 1 KiB over 10 000 keys, in 8 MiB
//! segments), in MB of log cleaned per second. The pass reads the log twice
//! (offset map, then rewrite) and writes what survives: the latest record
//! of each key, about 10 MB.
//!
//! ```sh
//! cargo bench -p weir-log --bench cleaner
//! ```
//!
//! Logs live under `target/tmp` (or `$WEIR_BENCH_DIR`). Each pass cleans a
//! fresh copy of the same log, just written and so in the page cache (as
//! the recently written segments a cleaner usually meets are); copying is
//! not measured, the fsyncs of the cleaned segments are. Under `cargo test
//! --benches` it runs once on a 4 MB log.

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use kafka_protocol::records::Compression;
use tempfile::TempDir;
use weir_log::testing::KeyedBatch;
use weir_log::{
    CleanOutcome, Cleaner, CleanerConfig, CleanupPolicy, Clock, Log, LogConfig, SystemClock,
};

const KEYS: usize = 10_000;
const RECORDS_PER_BATCH: usize = 16;
const VALUE_SIZE: usize = 1000;

fn full_run() -> bool {
    static FULL: OnceLock<bool> = OnceLock::new();
    *FULL.get_or_init(|| {
        let args: Vec<String> = std::env::args().collect();
        args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test" || a == "--list")
    })
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
        .prefix("weir-bench-cleaner-")
        .tempdir_in(&root)
        .expect("create a temporary directory")
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 * 1024 * 1024,
        retention_ms: -1,
        cleanup_policy: CleanupPolicy::COMPACT,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

/// Writes a dirty log of about `bytes` into `dir`: updates of the keys in
/// turn (a key every 10 000 records), values that do not compress. Returns
/// the size of the cleanable part.
fn build_log(dir: &Path, bytes: u64, compression: Compression) -> u64 {
    let log = Log::open(dir, config()).expect("open");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut record = 0usize;
    let now = SystemClock.now_ms();
    while log.size_bytes() < bytes {
        let mut batch = KeyedBatch::new().timestamp(now).compression(compression);
        for _ in 0..RECORDS_PER_BATCH {
            let key = format!("key-{:05}", record % KEYS);
            let value: Vec<u8> = (0..VALUE_SIZE)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            batch = batch.record(Some(key.as_bytes()), Some(value.as_slice()));
            record += 1;
        }
        log.append(&batch.build(), 0).expect("append");
    }
    log.roll().expect("roll");
    let size = log.size_bytes();
    log.close().expect("close");
    size
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

fn bench_clean(c: &mut Criterion, name: &str, compression: Compression) {
    let size = if full_run() { 100_000_000 } else { 4_000_000 };
    let template = tempdir();
    let log_bytes = build_log(template.path(), size, compression);
    let mut group = c.benchmark_group("cleaner");
    group.sampling_mode(SamplingMode::Flat);
    // Ten samples of one or two passes: each pass needs a fresh 100 MB copy.
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    group.throughput(Throughput::BytesDecimal(log_bytes));
    let mut figures = Vec::new();
    group.bench_function(name, |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let copy = tempdir();
                copy_dir(template.path(), copy.path());
                let log = Log::open(copy.path(), config()).expect("open the copy");
                let mut cleaner = Cleaner::new(CleanerConfig::default());
                let started = Instant::now();
                let stats = cleaner.clean(&log, u64::MAX).expect("clean");
                let elapsed = started.elapsed();
                assert_eq!(stats.outcome, CleanOutcome::Cleaned);
                assert!(stats.keys > 0 && stats.keys <= KEYS as u64);
                figures.push((elapsed, stats.bytes_read, stats.bytes_written));
                total += elapsed;
                black_box(stats);
            }
            total
        })
    });
    group.finish();
    if let Some((elapsed, read, written)) = figures.iter().min_by_key(|f| f.0) {
        println!(
            "cleaner/{name}: {:.1} MB log in {:.2} s at best: {:.0} MB/s of log ({:.0} MB/s read, {:.1} MB written)",
            log_bytes as f64 / 1e6,
            elapsed.as_secs_f64(),
            log_bytes as f64 / 1e6 / elapsed.as_secs_f64(),
            *read as f64 / 1e6 / elapsed.as_secs_f64(),
            *written as f64 / 1e6,
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_clean(&mut c, "uncompressed", Compression::None);
    bench_clean(&mut c, "lz4", Compression::Lz4);
    c.final_summary();
}
