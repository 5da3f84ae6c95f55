//! A bounded set of open file descriptors shared by many files, so that a
//! broker with tens of thousands of segment files stays within the
//! process's open-file limit.
//!
//! A [`CachedFile`] opens its descriptor on first use and keeps it until
//! the cache, full, closes it again: a clock sweep (second chance) picks a
//! file not used since the last sweep. Users hold the descriptor only for
//! the duration of one call, or (a [`crate::LogSlice`] being sent) as an
//! `Arc<File>` of their own, which keeps it open past an eviction.
//!
//! Renames and removals go through the cache: a file renamed reopens under
//! its new name; a file removed keeps its descriptor (pinned, never
//! evicted) for as long as it is referenced, as an open file would.
//!
//! Closing a descriptor with unsynced writes loses nothing: the data stays
//! in the page cache, and an fdatasync through a later descriptor writes it
//! out, and reports a writeback error no descriptor has yet seen (Linux ≥
//! 4.16).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use indexmap::IndexMap;
use parking_lot::{Mutex, RwLock};

/// The descriptors of one storage, at most `capacity` of them open (more
/// only while callers hold some, or files removed from their directory
/// are still referenced).
pub(crate) struct FdCache {
    capacity: usize,
    state: Mutex<CacheState>,
    next_id: AtomicU64,
}

#[derive(Default)]
struct CacheState {
    /// The files whose descriptor is open, by id, in the order the clock
    /// hand visits them.
    open: IndexMap<u64, Weak<CachedFile>>,
    hand: usize,
    /// Every live file by its current path, to follow renames and removals.
    by_path: HashMap<PathBuf, Weak<CachedFile>>,
}

impl FdCache {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity: capacity.max(1),
            state: Mutex::default(),
            next_id: AtomicU64::new(0),
        })
    }

    /// How many descriptors the cache holds open now.
    pub(crate) fn open_count(&self) -> usize {
        self.state.lock().open.len()
    }

    /// The file at `path`, opened now (to learn its length, and to fail
    /// here when it cannot be opened).
    pub(crate) fn open(self: &Arc<Self>, path: &Path, create: bool) -> io::Result<Arc<CachedFile>> {
        let file = open_file(path, create)?;
        let len = file.metadata()?.len();
        let cached = Arc::new_cyclic(|me| CachedFile {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            me: me.clone(),
            path: Mutex::new(path.to_owned()),
            descriptor: RwLock::new(Some(Arc::new(file))),
            referenced: AtomicBool::new(true),
            pinned: AtomicBool::new(false),
            len: AtomicU64::new(len),
            cache: self.clone(),
        });
        let mut state = self.state.lock();
        state
            .by_path
            .insert(path.to_owned(), Arc::downgrade(&cached));
        state.open.insert(cached.id, Arc::downgrade(&cached));
        drop(state);
        self.evict_beyond_capacity();
        Ok(cached)
    }

    /// Follows a rename: a live file at `from` reopens at `to` from now on.
    pub(crate) fn renamed(&self, from: &Path, to: &Path) {
        let mut state = self.state.lock();
        let Some(weak) = state.by_path.remove(from) else {
            return;
        };
        // Dropped only once the lock is released: the last reference's
        // drop takes the lock.
        let file = weak.upgrade();
        if let Some(file) = &file {
            *file.path.lock() = to.to_owned();
            state.by_path.insert(to.to_owned(), weak);
        }
        drop(state);
    }

    /// Follows the rename of a directory: every live file under `from`
    /// reopens under `to` from now on.
    pub(crate) fn renamed_dir(&self, from: &Path, to: &Path) {
        let mut state = self.state.lock();
        let moved: Vec<PathBuf> = state
            .by_path
            .keys()
            .filter(|path| path.starts_with(from))
            .cloned()
            .collect();
        // Dropped only once the lock is released, as in `renamed`.
        let mut live = Vec::with_capacity(moved.len());
        for old in moved {
            let Some(weak) = state.by_path.remove(&old) else {
                continue;
            };
            let Some(file) = weak.upgrade() else { continue };
            let new = match old.strip_prefix(from) {
                Ok(rest) => to.join(rest),
                Err(_) => continue,
            };
            *file.path.lock() = new.clone();
            state.by_path.insert(new, weak);
            live.push(file);
        }
        drop(state);
        drop(live);
    }

    /// Before `path` is removed: a live file there keeps (or reopens) its
    /// descriptor for good, as the name will be gone.
    pub(crate) fn removing(&self, path: &Path) {
        let file = self.state.lock().by_path.remove(path);
        if let Some(file) = file.and_then(|weak| weak.upgrade()) {
            file.pinned.store(true, Ordering::Release);
            // Best effort: if it cannot be opened now, reads of the removed
            // file fail as they would have anyway.
            let _ = file.descriptor();
        }
    }

    /// Closes descriptors, least recently used first, until at most
    /// `capacity` are open.
    fn evict_beyond_capacity(&self) {
        // Files visited are dropped only once the lock is released (the
        // last reference's drop takes the lock), and evicted descriptors
        // closed then too: `close` is a system call every open waits for
        // while the lock is held.
        let mut visited = Vec::new();
        let mut closing = Vec::new();
        let mut state = self.state.lock();
        // Two turns of the clock: the first clears reference bits, the
        // second finds a file not used since.
        let mut budget = 2 * state.open.len() + 1;
        while state.open.len() > self.capacity && budget > 0 {
            budget -= 1;
            if state.hand >= state.open.len() {
                state.hand = 0;
            }
            let hand = state.hand;
            let (_, weak) = state.open.get_index(hand).expect("hand within range");
            let Some(file) = weak.upgrade() else {
                state.open.swap_remove_index(hand);
                continue;
            };
            if file.pinned.load(Ordering::Acquire) || file.referenced.swap(false, Ordering::AcqRel)
            {
                state.hand += 1;
            } else {
                // Only `CachedFile::descriptor` takes this lock besides, and
                // it never waits for the cache's lock while holding it.
                closing.extend(file.descriptor.write().take());
                state.open.swap_remove_index(hand);
            }
            visited.push(file);
        }
        drop(state);
        drop(closing);
    }

    fn reopened(&self, file: &CachedFile) {
        self.state.lock().open.insert(file.id, file.me.clone());
        self.evict_beyond_capacity();
    }

    fn dropped(&self, file: &CachedFile) {
        let mut state = self.state.lock();
        state.open.swap_remove(&file.id);
        let path = file.path.lock();
        if state
            .by_path
            .get(&*path)
            .is_some_and(|weak| weak.as_ptr() == file.me.as_ptr())
        {
            state.by_path.remove(&*path);
        }
    }
}

fn open_file(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(create)
        .open(path)
}

/// One file of an [`FdCache`]: its descriptor opened on demand.
pub(crate) struct CachedFile {
    id: u64,
    me: Weak<CachedFile>,
    path: Mutex<PathBuf>,
    descriptor: RwLock<Option<Arc<File>>>,
    /// Used since the clock hand last passed.
    referenced: AtomicBool,
    /// Removed from its directory: the descriptor cannot be reopened.
    pinned: AtomicBool,
    /// The file's length: appends come from one writer at a time (the
    /// log holds its lock), reads from anywhere.
    pub(crate) len: AtomicU64,
    cache: Arc<FdCache>,
}

impl CachedFile {
    pub(crate) fn path(&self) -> PathBuf {
        self.path.lock().clone()
    }

    /// The descriptor if it is open: nothing is reopened.
    pub(crate) fn descriptor_if_open(&self) -> Option<Arc<File>> {
        let file = self.descriptor.read().clone()?;
        self.referenced.store(true, Ordering::Release);
        Some(file)
    }

    /// The open descriptor, reopened if the cache had closed it.
    pub(crate) fn descriptor(&self) -> io::Result<Arc<File>> {
        self.referenced.store(true, Ordering::Release);
        if let Some(file) = &*self.descriptor.read() {
            return Ok(file.clone());
        }
        let mut slot = self.descriptor.write();
        if let Some(file) = &*slot {
            return Ok(file.clone());
        }
        let file = Arc::new(open_file(&self.path(), false)?);
        *slot = Some(file.clone());
        drop(slot);
        self.cache.reopened(self);
        Ok(file)
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        self.cache.dropped(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(cache: &Arc<FdCache>, dir: &Path, n: usize) -> Vec<Arc<CachedFile>> {
        (0..n)
            .map(|i| cache.open(&dir.join(format!("f{i}")), true).unwrap())
            .collect()
    }

    #[test]
    fn never_holds_more_descriptors_than_its_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FdCache::new(4);
        let files = files(&cache, dir.path(), 10);
        assert_eq!(cache.open_count(), 4);
        for (i, file) in files.iter().enumerate() {
            use std::os::unix::fs::FileExt;
            file.descriptor()
                .unwrap()
                .write_all_at(&[i as u8], 0)
                .unwrap();
            assert!(cache.open_count() <= 4);
        }
        for (i, file) in files.iter().enumerate() {
            use std::os::unix::fs::FileExt;
            let mut byte = [0u8];
            file.descriptor()
                .unwrap()
                .read_exact_at(&mut byte, 0)
                .unwrap();
            assert_eq!(byte[0], i as u8);
        }
        drop(files);
        assert_eq!(cache.open_count(), 0);
    }

    #[test]
    fn the_least_recently_used_descriptor_goes_first() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FdCache::new(3);
        let files = files(&cache, dir.path(), 3);
        // A sweep clears every reference bit; then f0 is used again.
        cache.state.lock().open.values().for_each(|w| {
            w.upgrade()
                .unwrap()
                .referenced
                .store(false, Ordering::Release);
        });
        files[0].descriptor().unwrap();
        let f3 = cache.open(&dir.path().join("f3"), true).unwrap();
        let open = |f: &CachedFile| f.descriptor.read().is_some();
        assert!(open(&files[0]) && open(&f3));
        assert_eq!(
            [open(&files[1]), open(&files[2])],
            [false, true],
            "f1 was the least recently used"
        );
    }

    #[test]
    fn a_held_descriptor_outlives_eviction() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FdCache::new(1);
        let a = cache.open(&dir.path().join("a"), true).unwrap();
        let held = a.descriptor().unwrap();
        let _b = cache.open(&dir.path().join("b"), true).unwrap();
        assert!(a.descriptor.read().is_none(), "evicted from the cache");
        use std::os::unix::fs::FileExt;
        held.write_all_at(b"still open", 0).unwrap();
    }

    #[test]
    fn renamed_files_reopen_under_their_new_name_and_removed_ones_stay_readable() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = FdCache::new(1);
        let (old, new) = (dir.path().join("old"), dir.path().join("new"));
        let moved = cache.open(&old, true).unwrap();
        moved
            .descriptor()
            .unwrap()
            .write_all_at(b"moved", 0)
            .unwrap();
        std::fs::rename(&old, &new).unwrap();
        cache.renamed(&old, &new);
        let gone_path = dir.path().join("gone");
        let gone = cache.open(&gone_path, true).unwrap();
        gone.descriptor().unwrap().write_all_at(b"gone", 0).unwrap();
        cache.removing(&gone_path);
        std::fs::remove_file(&gone_path).unwrap();
        // The pinned file stays open; the renamed one was evicted and
        // reopens by its new name.
        let mut buf = [0u8; 5];
        moved
            .descriptor()
            .unwrap()
            .read_exact_at(&mut buf, 0)
            .unwrap();
        assert_eq!(&buf, b"moved");
        let mut buf = [0u8; 4];
        gone.descriptor()
            .unwrap()
            .read_exact_at(&mut buf, 0)
            .unwrap();
        assert_eq!(&buf, b"gone");
    }

    #[test]
    fn files_of_a_renamed_directory_reopen_under_its_new_name() {
        use std::os::unix::fs::FileExt;
        let root = tempfile::tempdir().unwrap();
        let (old_dir, new_dir) = (root.path().join("p-0"), root.path().join("p-0.moved"));
        std::fs::create_dir(&old_dir).unwrap();
        let cache = FdCache::new(1);
        let a = cache.open(&old_dir.join("a"), true).unwrap();
        a.descriptor().unwrap().write_all_at(b"a", 0).unwrap();
        let b = cache.open(&old_dir.join("b"), true).unwrap();
        b.descriptor().unwrap().write_all_at(b"b", 0).unwrap();
        std::fs::rename(&old_dir, &new_dir).unwrap();
        cache.renamed_dir(&old_dir, &new_dir);
        // Each read evicts the other's descriptor, so both reopen.
        for _ in 0..2 {
            for (file, expected) in [(&a, b"a"), (&b, b"b")] {
                let mut buf = [0u8; 1];
                file.descriptor()
                    .unwrap()
                    .read_exact_at(&mut buf, 0)
                    .unwrap();
                assert_eq!(&buf, expected);
            }
        }
        assert_eq!(a.path(), new_dir.join("a"));
    }
}
