//! An in-memory [`Storage`] that remembers what was synced, for crash and
//! fault-injection tests.
//!
//! The model: a file's bytes are durable up to the length of its last `sync`
//! (a `truncate` below that length is durable at once). A file created since
//! the last `sync_dir` of its directory may vanish in a crash; renames and
//! removals are taken as durable at once. [`SimStorage::crash`] keeps the
//! durable bytes and, depending on the [`CrashMode`], part of what was not
//! synced, possibly torn into garbage.

use std::collections::{BTreeMap, HashSet};
use std::io::{self, IoSlice};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::storage::{Storage, StorageFile};

/// What survives of unsynced data in a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Only synced bytes and synced directory entries survive.
    DropUnsynced,
    /// Each file keeps a random part of its unsynced tail, whose last bytes
    /// may be garbage; unsynced creations survive or vanish at random.
    Torn { seed: u64 },
}

#[derive(Default)]
struct Node {
    data: Vec<u8>,
    synced_len: usize,
}

#[derive(Default)]
struct Faults {
    /// Bytes that appends may still write before failing with ENOSPC.
    space_left: Option<u64>,
    fail_syncs: bool,
    fail_reads: bool,
    /// Changes (creations, renames, removals, writes, truncations, syncs)
    /// that may still succeed before every change fails with EIO.
    changes_left: Option<u64>,
}

impl Faults {
    /// Counts one change against [`Faults::changes_left`].
    fn change(&mut self) -> io::Result<()> {
        match &mut self.changes_left {
            Some(0) => Err(io::Error::other("simulated EIO: no more changes allowed")),
            Some(left) => {
                *left -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

#[derive(Default)]
struct State {
    files: BTreeMap<PathBuf, Arc<Mutex<Node>>>,
    dirs: HashSet<PathBuf>,
    /// Files created since their directory was last synced.
    unsynced_creations: HashSet<PathBuf>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    faults: Mutex<Faults>,
    syncs: AtomicU64,
}

/// An in-memory file system shared by its clones.
#[derive(Clone, Default)]
pub struct SimStorage {
    shared: Arc<Shared>,
}

impl SimStorage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates a power loss: every open handle is cut off and the files
    /// keep what the [`CrashMode`] says survives.
    pub fn crash(&self, mode: CrashMode) {
        let mut rng = match mode {
            CrashMode::DropUnsynced => None,
            CrashMode::Torn { seed } => Some(SplitMix(seed)),
        };
        let mut state = self.shared.state.lock();
        let unsynced = std::mem::take(&mut state.unsynced_creations);
        let old = std::mem::take(&mut state.files);
        for (path, node) in old {
            let node = node.lock();
            if unsynced.contains(&path) && rng.as_mut().is_none_or(|r| r.next() % 2 == 0) {
                continue;
            }
            let mut data = node.data[..node.synced_len].to_vec();
            if let Some(rng) = rng.as_mut() {
                let unsynced_tail = &node.data[node.synced_len..];
                if !unsynced_tail.is_empty() {
                    let keep = (rng.next() % (unsynced_tail.len() as u64 + 1)) as usize;
                    data.extend_from_slice(&unsynced_tail[..keep]);
                    if keep > 0 && rng.next() % 3 == 0 {
                        // Only unsynced bytes can be torn.
                        let garbage = (rng.next() % 16 + 1) as usize;
                        let from = data.len().saturating_sub(garbage).max(node.synced_len);
                        for byte in &mut data[from..] {
                            *byte = rng.next() as u8;
                        }
                    }
                }
            }
            let synced_len = data.len();
            state
                .files
                .insert(path, Arc::new(Mutex::new(Node { data, synced_len })));
        }
    }

    /// Appends fail with ENOSPC once `bytes` more have been written (the
    /// failing append writes what still fits); `None` lifts the limit.
    pub fn set_space_left(&self, bytes: Option<u64>) {
        self.shared.faults.lock().space_left = bytes;
    }

    /// Lets `changes` more changes (file or directory creations, renames,
    /// removals, appends, truncations, syncs) succeed, then fails every
    /// change with EIO, as if the machine stopped there; `None` lifts the
    /// limit. With [`SimStorage::crash`] this cuts an operation off at any
    /// step.
    pub fn fail_changes_after(&self, changes: Option<u64>) {
        self.shared.faults.lock().changes_left = changes;
    }

    /// How many more changes may succeed (`None`: no limit).
    pub fn changes_left(&self) -> Option<u64> {
        self.shared.faults.lock().changes_left
    }

    /// Makes every `sync` fail with EIO.
    pub fn fail_syncs(&self, fail: bool) {
        self.shared.faults.lock().fail_syncs = fail;
    }

    /// Makes every read fail with EIO.
    pub fn fail_reads(&self, fail: bool) {
        self.shared.faults.lock().fail_reads = fail;
    }

    /// How many file syncs have succeeded.
    pub fn sync_count(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// A copy of a file's current bytes.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        state.files.get(path).map(|n| n.lock().data.clone())
    }

    /// Replaces a file's bytes, as durable (to corrupt a log on purpose).
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) {
        let mut state = self.shared.state.lock();
        let synced_len = data.len();
        state.files.insert(
            path.to_owned(),
            Arc::new(Mutex::new(Node { data, synced_len })),
        );
    }

    fn file(&self, path: &Path) -> Arc<dyn StorageFile> {
        let state = self.shared.state.lock();
        Arc::new(SimFile {
            node: state.files[path].clone(),
            shared: self.shared.clone(),
        })
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl Storage for SimStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.shared.state.lock();
        for ancestor in dir.ancestors() {
            state.dirs.insert(ancestor.to_owned());
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.shared.state.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(state
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        if !self.shared.state.lock().files.contains_key(path) {
            return Err(not_found(path));
        }
        Ok(self.file(path))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.shared.faults.lock().change()?;
        {
            let mut state = self.shared.state.lock();
            let parent = path.parent().unwrap_or(Path::new(""));
            if !state.dirs.contains(parent) {
                return Err(not_found(parent));
            }
            state.files.insert(path.to_owned(), Arc::default());
            state.unsynced_creations.insert(path.to_owned());
        }
        Ok(self.file(path))
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.shared.state.lock();
        state.files.contains_key(path) || state.dirs.contains(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.faults.lock().change()?;
        let mut state = self.shared.state.lock();
        let node = state.files.remove(from).ok_or_else(|| not_found(from))?;
        state.files.insert(to.to_owned(), node);
        if state.unsynced_creations.remove(from) {
            state.unsynced_creations.insert(to.to_owned());
        }
        Ok(())
    }

    /// The directory and what is in it move at once; as if its parent
    /// were synced right after (a crash never undoes it).
    fn rename_dir(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.faults.lock().change()?;
        let mut state = self.shared.state.lock();
        if !state.dirs.contains(from) {
            return Err(not_found(from));
        }
        let moved = |path: &Path| path.strip_prefix(from).ok().map(|rest| to.join(rest));
        let dirs: Vec<PathBuf> = state.dirs.iter().filter_map(|d| moved(d)).collect();
        state.dirs.retain(|d| !d.starts_with(from));
        state.dirs.extend(dirs);
        let files: Vec<PathBuf> = state
            .files
            .keys()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for path in files {
            let node = state.files.remove(&path).expect("listed above");
            let new = moved(&path).expect("under the renamed directory");
            if state.unsynced_creations.remove(&path) {
                state.unsynced_creations.insert(new.clone());
            }
            state.files.insert(new, node);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.shared.faults.lock().change()?;
        let mut state = self.shared.state.lock();
        state.unsynced_creations.remove(path);
        state
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.shared.faults.lock().change()?;
        let mut state = self.shared.state.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        state.files.retain(|path, _| !path.starts_with(dir));
        state
            .unsynced_creations
            .retain(|path| !path.starts_with(dir));
        state.dirs.retain(|path| !path.starts_with(dir));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut faults = self.shared.faults.lock();
        if faults.fail_syncs {
            return Err(io::Error::other("simulated EIO on directory sync"));
        }
        faults.change()?;
        drop(faults);
        let mut state = self.shared.state.lock();
        state.unsynced_creations.retain(|p| p.parent() != Some(dir));
        Ok(())
    }
}

struct SimFile {
    node: Arc<Mutex<Node>>,
    shared: Arc<Shared>,
}

impl StorageFile for SimFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        if self.shared.faults.lock().fail_reads {
            return Err(io::Error::other("simulated EIO on read"));
        }
        let node = self.node.lock();
        let start = (position as usize).min(node.data.len());
        let n = buf.len().min(node.data.len() - start);
        buf[..n].copy_from_slice(&node.data[start..start + n]);
        Ok(n)
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let mut faults = self.shared.faults.lock();
        faults.change()?;
        let allowed = match faults.space_left {
            Some(left) if left < total => {
                faults.space_left = Some(0);
                Some(left as usize)
            }
            Some(left) => {
                faults.space_left = Some(left - total);
                None
            }
            None => None,
        };
        drop(faults);
        let mut node = self.node.lock();
        let mut budget = allowed.unwrap_or(usize::MAX);
        for buf in bufs {
            let n = buf.len().min(budget);
            node.data.extend_from_slice(&buf[..n]);
            budget -= n;
        }
        match allowed {
            Some(_) => Err(io::Error::from_raw_os_error(28)), // ENOSPC
            None => Ok(()),
        }
    }

    fn len(&self) -> u64 {
        self.node.lock().data.len() as u64
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.shared.faults.lock().change()?;
        let mut node = self.node.lock();
        node.data.resize(len as usize, 0);
        node.synced_len = node.synced_len.min(len as usize);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut faults = self.shared.faults.lock();
        if faults.fail_syncs {
            return Err(io::Error::from_raw_os_error(5)); // EIO
        }
        faults.change()?;
        drop(faults);
        let mut node = self.node.lock();
        node.synced_len = node.data.len();
        self.shared.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn descriptor(&self) -> io::Result<Option<Arc<std::fs::File>>> {
        Ok(None)
    }
}

/// A tiny deterministic generator, enough to pick crash outcomes.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
