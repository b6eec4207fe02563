//! Atomic file writes, for the state file and the module cache: a temporary file
//! `.<file name>.tmp-<pid>-<n>` in the same folder, fsync, rename over the file, fsync
//! the folder. Readers see the old file or the new one, never a part; a temporary
//! file left behind is a killed writer's (the state file and the cache each clear
//! theirs by this naming).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The folder `path` is in (`.` for a bare file name).
pub(crate) fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The file name of `path` (`state` when it has none).
pub(crate) fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into())
}

/// How the temporary files of writes to `path` begin: `.<file name>.tmp-`.
pub(crate) fn temp_prefix(path: &Path) -> String {
    format!(".{}.tmp-", name_of(path))
}

/// Writes `bytes` to `path` so that readers see the old file or the new one, never a
/// part: a temporary file in the same folder, fsync, rename over, fsync the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = dir_of(path);
    std::fs::create_dir_all(&dir)?;
    let temp = dir.join(format!(
        "{}{}-{}",
        temp_prefix(path),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut out = std::fs::File::create(&temp)?;
        out.write_all(bytes)?;
        out.sync_all()?;
        drop(out);
        std::fs::rename(&temp, path)?;
        // The rename is durable once the folder is synced (best effort: not every
        // platform opens folders).
        if let Ok(folder) = std::fs::File::open(&dir) {
            let _ = folder.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
