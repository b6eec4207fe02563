//! One wasmtime [`Engine`] per process (or per config), its epoch ticker, and the
//! policy modules it loads: compiled once, cached on disk, instantiated from a cached
//! [`InstancePre`].
//!
//! The sandbox: every call into the guest gets a deadline (epoch interruption: a
//! background thread ticks the engine's epoch; optionally fuel too, which is
//! deterministic and what tests use) and a [`StoreLimits`] memory cap.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, InstancePre, Linker, Module, Store, StoreLimits};

use crate::error::{HostError, Result};
use crate::guest::{Budget, Guest, GuestState};

/// The ABI this host speaks: major 1, minor 2 (`rota_check`) or later.
pub const ABI_MAJOR: u32 = 1;
/// The lowest ABI minor version this host accepts (1: `rota_state_file`, 2:
/// `rota_check`).
pub const ABI_MINOR: u32 = 2;

/// The policy module `make wasm` built, when it had been built at compile time.
#[cfg(rota_policy_bundled)]
pub const BUNDLED_POLICY: Option<&[u8]> = Some(include_bytes!(env!("ROTA_POLICY_WASM")));
#[cfg(not(rota_policy_bundled))]
pub const BUNDLED_POLICY: Option<&[u8]> = None;

/// The default number of other precompiled modules a cache keeps
/// ([`EngineConfig::cache_keep`]).
pub const CACHE_KEEP: usize = 8;

/// A temporary file of an interrupted cache write is deleted after this long.
const CACHE_TEMP_MAX_AGE: Duration = Duration::from_secs(3600);

/// Where precompiled modules are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheDir {
    /// `$ROTA_CACHE_DIR`, else `$XDG_CACHE_HOME/rota`, else `$HOME/.cache/rota`;
    /// no cache when none of them is set.
    Auto,
    /// This directory.
    Dir(PathBuf),
    /// No cache: every load compiles.
    Disabled,
}

impl CacheDir {
    fn resolve(&self) -> Option<PathBuf> {
        match self {
            CacheDir::Dir(dir) => Some(dir.clone()),
            CacheDir::Disabled => None,
            CacheDir::Auto => {
                let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
                var("ROTA_CACHE_DIR")
                    .map(PathBuf::from)
                    .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("rota")))
                    .or_else(|| var("HOME").map(|d| PathBuf::from(d).join(".cache").join("rota")))
            }
        }
    }
}

/// The sandbox and the cache.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Wall-clock budget of one call into the guest (epoch interruption). Zero turns
    /// the deadline off (and epoch interruption with it): only for measuring its cost.
    pub deadline: Duration,
    /// How often the epoch ticks; the deadline is rounded up to whole ticks.
    pub epoch_tick: Duration,
    /// Fuel per call, when set: a deterministic budget (tests use it).
    pub fuel: Option<u64>,
    /// The most linear memory a guest instance may have.
    pub memory_limit_bytes: usize,
    /// Where precompiled modules are kept.
    pub cache: CacheDir,
    /// How many precompiled modules the cache keeps besides the one being loaded:
    /// the most recently used ones (other module versions, other engine settings,
    /// other wasmtime versions). Older entries are deleted at every load.
    pub cache_keep: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            deadline: Duration::from_secs(2),
            epoch_tick: Duration::from_millis(10),
            fuel: None,
            memory_limit_bytes: 256 << 20,
            cache: CacheDir::Auto,
            cache_keep: CACHE_KEEP,
        }
    }
}

/// One wasmtime engine, its epoch ticker and its configuration. Cheap to clone.
#[derive(Clone)]
pub struct HostEngine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    engine: Engine,
    config: EngineConfig,
    /// Hex of the engine's compatibility hash (wasmtime version, target, settings).
    compat: String,
    deadline_ticks: u64,
    stop: Arc<AtomicBool>,
}

impl Drop for EngineInner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for HostEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostEngine")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl HostEngine {
    /// An engine with this sandbox and cache (and, with a deadline, its epoch thread).
    pub fn new(config: EngineConfig) -> Result<HostEngine> {
        let mut wasm_config = Config::new();
        let epochs = !config.deadline.is_zero();
        wasm_config.epoch_interruption(epochs);
        wasm_config.consume_fuel(config.fuel.is_some());
        // `ROTA_PERFMAP=1`: write /tmp/perf-PID.map so that `perf` names guest functions.
        if std::env::var_os("ROTA_PERFMAP").is_some_and(|v| v == "1") {
            wasm_config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&wasm_config).map_err(|e| HostError::Load {
            origin: "engine".into(),
            message: e.to_string(),
        })?;
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        let compat = format!("{:016x}", hasher.finish());
        let tick_ms = config.epoch_tick.as_millis().max(1);
        let deadline_ticks = u64::try_from(config.deadline.as_millis().div_ceil(tick_ms))
            .unwrap_or(u64::MAX)
            .max(1);
        let stop = Arc::new(AtomicBool::new(false));
        if epochs {
            spawn_ticker(engine.clone(), config.epoch_tick, stop.clone())?;
        }
        Ok(HostEngine {
            inner: Arc::new(EngineInner {
                engine,
                config,
                compat,
                deadline_ticks,
                stop,
            }),
        })
    }

    /// The process-wide engine with the default configuration (one `Engine` and one
    /// epoch thread for every roster that does not bring its own).
    pub fn shared() -> Result<HostEngine> {
        static SHARED: std::sync::OnceLock<HostEngine> = std::sync::OnceLock::new();
        if let Some(engine) = SHARED.get() {
            return Ok(engine.clone());
        }
        let engine = HostEngine::new(EngineConfig::default())?;
        Ok(SHARED.get_or_init(|| engine).clone())
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The bundled policy module.
    pub fn load_bundled(&self) -> Result<PolicyModule> {
        let bytes = BUNDLED_POLICY.ok_or(HostError::ModuleNotBuilt)?;
        self.load_bytes(bytes, "bundled")
    }

    /// A policy module from a file.
    pub fn load_file(&self, path: &Path) -> Result<PolicyModule> {
        let bytes = std::fs::read(path).map_err(|source| HostError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        self.load_bytes(&bytes, &path.display().to_string())
    }

    /// The module at `path`, or the bundled one.
    pub fn load(&self, path: Option<&Path>) -> Result<PolicyModule> {
        match path {
            Some(path) => self.load_file(path),
            None => self.load_bundled(),
        }
    }

    /// Compiles (or takes from the disk cache) and checks a module: every ABI export
    /// with its type, and the ABI version.
    pub fn load_bytes(&self, bytes: &[u8], source: &str) -> Result<PolicyModule> {
        let load_error = |message: String| HostError::Load {
            origin: source.to_string(),
            message,
        };
        let hash = hex(&Sha256::digest(bytes));
        let (module, cached) = self.compile_cached(bytes, &hash).map_err(load_error)?;
        let linker: Linker<GuestState> = Linker::new(&self.inner.engine);
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| load_error(e.to_string()))?;
        let module = PolicyModule {
            inner: Arc::new(ModuleInner {
                engine: self.clone(),
                pre,
                hash,
                source: source.to_string(),
                from_cache: cached,
            }),
        };
        // Instantiate once: the exports resolve with their types, the version is ours.
        let guest = module.instantiate()?;
        let version = guest.abi_version();
        let (major, minor) = (version >> 16, version & 0xffff);
        #[allow(clippy::absurd_extreme_comparisons)] // ABI_MINOR grows with the ABI
        let too_old = minor < ABI_MINOR;
        if major != ABI_MAJOR || too_old {
            return Err(HostError::AbiVersion {
                found_major: major,
                found_minor: minor,
                want_major: ABI_MAJOR,
                want_minor: ABI_MINOR,
            });
        }
        tracing::debug!(
            target: "rota::host",
            source,
            hash = %module.hash(),
            from_cache = cached,
            "policy module loaded"
        );
        Ok(module)
    }

    fn cache_path(&self, hash: &str) -> Option<PathBuf> {
        let dir = self.inner.config.cache.resolve()?;
        Some(dir.join(format!(
            "{}-{}.cwasm",
            &hash[..32.min(hash.len())],
            self.inner.compat
        )))
    }

    /// The compiled module, from the disk cache when a valid entry is there.
    fn compile_cached(&self, bytes: &[u8], hash: &str) -> Result<(Module, bool), String> {
        let engine = &self.inner.engine;
        let path = self.cache_path(hash);
        if let Some(path) = &path {
            match read_verified(path) {
                Ok(Some(artefact)) => {
                    // SAFETY: `artefact` is, byte for byte, what this host wrote with
                    // `Module::serialize` (its SHA-256 matches the digest written beside
                    // it, and it is read once, so it cannot change between the check and
                    // the load) for an engine with the same compatibility hash (it is
                    // in the name). wasmtime checks its header and version too.
                    match unsafe { Module::deserialize(engine, &artefact) } {
                        Ok(module) => {
                            // Its time of last use: what pruning keeps the newest of.
                            touch(path);
                            self.prune(path);
                            return Ok((module, true));
                        }
                        Err(e) => tracing::warn!(
                            target: "rota::host",
                            path = %path.display(),
                            error = %e,
                            "precompiled module unusable; compiling again"
                        ),
                    }
                }
                Ok(None) => {}
                Err(why) => tracing::warn!(
                    target: "rota::host",
                    path = %path.display(),
                    why,
                    "precompiled module failed its integrity check; compiling again"
                ),
            }
        }
        let module = Module::new(engine, bytes).map_err(|e| e.to_string())?;
        if let Some(path) = &path {
            match module.serialize() {
                Ok(artefact) => match write_entry(path, &artefact) {
                    Ok(()) => self.prune(path),
                    Err(e) => {
                        tracing::warn!(target: "rota::host", error = %e, "cannot cache the precompiled module")
                    }
                },
                Err(e) => {
                    tracing::warn!(target: "rota::host", error = %e, "cannot serialize the module")
                }
            }
        }
        Ok((module, false))
    }

    /// Prunes the cache around the entry in use (best effort: a failure is logged).
    fn prune(&self, in_use: &Path) {
        let Some(dir) = in_use.parent() else { return };
        match prune_cache(dir, in_use, self.inner.config.cache_keep) {
            Ok(0) => {}
            Ok(removed) => tracing::debug!(
                target: "rota::host",
                dir = %dir.display(),
                removed,
                "pruned the module cache"
            ),
            Err(e) => tracing::warn!(
                target: "rota::host",
                dir = %dir.display(),
                error = %e,
                "cannot prune the module cache"
            ),
        }
    }

    pub(crate) fn new_store(&self) -> Result<Store<GuestState>> {
        let limits: StoreLimits = wasmtime::StoreLimitsBuilder::new()
            .memory_size(self.inner.config.memory_limit_bytes)
            .instances(1)
            .memories(1)
            .tables(4)
            .build();
        let mut store = Store::new(&self.inner.engine, GuestState { limits });
        store.limiter(|state| &mut state.limits);
        self.budget().arm(&mut store)?;
        Ok(store)
    }

    /// What each call into a guest of this engine may spend.
    pub(crate) fn budget(&self) -> Budget {
        Budget {
            deadline_ticks: (!self.inner.config.deadline.is_zero())
                .then_some(self.inner.deadline_ticks),
            fuel: self.inner.config.fuel,
            _engine: self.inner.clone(),
        }
    }
}

/// The file beside a cache entry that holds its SHA-256 (hex): `<entry>.sha256`.
fn digest_path(entry: &Path) -> PathBuf {
    let mut name = entry.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// A cache entry's bytes when its digest file vouches for them; `None` when there is
/// no entry (or no digest: an entry of an older host, compiled again); `Err` when they
/// differ (a flipped bit, a truncated write, a tampered file).
fn read_verified(entry: &Path) -> Result<Option<Vec<u8>>, String> {
    let Ok(digest) = std::fs::read_to_string(digest_path(entry)) else {
        return Ok(None);
    };
    let artefact = match std::fs::read(entry) {
        Ok(artefact) => artefact,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let actual = hex(&Sha256::digest(&artefact));
    if actual == digest.trim() {
        Ok(Some(artefact))
    } else {
        Err(format!(
            "its SHA-256 is {actual}, its digest file says {}",
            digest.trim()
        ))
    }
}

/// Writes a cache entry, then its digest (both atomically): a digest never vouches
/// for an entry that is not all there.
fn write_entry(entry: &Path, artefact: &[u8]) -> std::io::Result<()> {
    crate::atomic::write_atomic(entry, artefact)?;
    crate::atomic::write_atomic(
        &digest_path(entry),
        hex(&Sha256::digest(artefact)).as_bytes(),
    )
}

/// Whether `name` is a cache entry's: `<32 hex>-<16 hex>.cwasm` (module hash, engine
/// compatibility hash), or its digest (`.cwasm.sha256`). Nothing else in the folder is
/// ever deleted.
fn is_cache_file(name: &str) -> bool {
    is_cache_entry(name.strip_suffix(".sha256").unwrap_or(name))
}

/// Whether `name` is a cache entry's: `<32 hex>-<16 hex>.cwasm`.
fn is_cache_entry(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".cwasm") else {
        return false;
    };
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    matches!(stem.split_once('-'), Some((module, compat)) if hex(module, 32) && hex(compat, 16))
}

/// Whether `name` is a temporary file of a cache write (`.<entry>.tmp-<pid>-<n>`, of
/// an entry or of its digest).
fn is_cache_temp(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|rest| rest.split_once(".tmp-"))
        .is_some_and(|(entry, _)| is_cache_file(entry))
}

/// Marks a cache entry as used now (best effort).
#[allow(clippy::disallowed_methods)] // the host does IO: file times of its cache
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
}

/// Deletes the cache entries of `dir` beyond the `keep` most recently used ones
/// besides `in_use` (which is never deleted), and temporary files of interrupted
/// writes older than an hour. Entries of other module versions, engine settings and
/// wasmtime versions are never loaded again once superseded, so they age out. Returns
/// how many files it deleted.
#[allow(clippy::disallowed_methods)] // the host does IO: file times of its cache
pub(crate) fn prune_cache(dir: &Path, in_use: &Path, keep: usize) -> std::io::Result<usize> {
    let now = std::time::SystemTime::now();
    let mut entries = Vec::new();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if path == in_use || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        if is_cache_entry(name) {
            entries.push((modified, path));
        } else if is_cache_file(name) {
            // A digest whose entry is gone (or is the one in use) goes with its entry.
            let entry = path.with_extension("");
            if entry != in_use && !entry.exists() && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        } else if is_cache_temp(name)
            && now.duration_since(modified).unwrap_or_default() > CACHE_TEMP_MAX_AGE
            && std::fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    // Newest first; the name breaks ties, so the order never depends on the folder's.
    entries.sort_by(|a, b| b.cmp(a));
    for (_, path) in entries.into_iter().skip(keep) {
        for file in [digest_path(&path), path] {
            match std::fs::remove_file(&file) {
                Ok(()) => removed += 1,
                // Another process pruned it first (or an older host wrote no digest).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

fn spawn_ticker(engine: Engine, tick: Duration, stop: Arc<AtomicBool>) -> Result<()> {
    let tick = tick.max(Duration::from_millis(1));
    std::thread::Builder::new()
        .name("rota-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                engine.increment_epoch();
            }
        })
        .map(drop)
        .map_err(|e| HostError::Load {
            origin: "engine".into(),
            message: format!("cannot start the epoch thread: {e}"),
        })
}

/// A stable `Hasher` (std's `DefaultHasher` may change between Rust releases).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A loaded, checked policy module. Cheap to clone.
#[derive(Clone)]
pub struct PolicyModule {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    engine: HostEngine,
    pre: InstancePre<GuestState>,
    hash: String,
    source: String,
    from_cache: bool,
}

impl std::fmt::Debug for PolicyModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyModule")
            .field("source", &self.inner.source)
            .field("hash", &self.inner.hash)
            .finish_non_exhaustive()
    }
}

impl PolicyModule {
    /// SHA-256 of the module's bytes, in hex.
    pub fn hash(&self) -> &str {
        &self.inner.hash
    }

    /// Where it came from: a path, or "bundled".
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// Whether the compiled code came from the disk cache.
    pub fn from_cache(&self) -> bool {
        self.inner.from_cache
    }

    /// The engine it was compiled for.
    pub fn engine(&self) -> &HostEngine {
        &self.inner.engine
    }

    /// Every violation of `document` by this module's rules (`[]` when valid); the
    /// options' `kinds` are checked too.
    pub fn validate(
        &self,
        document: &serde_json::Value,
        options: &serde_json::Value,
    ) -> Result<Vec<rota_core::Violation>> {
        let mut guest = self.instantiate()?;
        let result = guest
            .validate(
                document.to_string().as_bytes(),
                options.to_string().as_bytes(),
            )
            .map_err(|e| e.into_host("rota_validate"))?;
        if let Some(error) = result.get("error") {
            return Err(HostError::from_policy_json(error));
        }
        serde_json::from_value(result.get("ok").cloned().unwrap_or_default())
            .map_err(|e| HostError::Abi(format!("rota_validate: {e}")))
    }

    /// `validate`'s violations and the warnings beside them (a literal secret in
    /// `env`), by this module's rules (`rota_check`).
    pub fn check(
        &self,
        document: &serde_json::Value,
        options: &serde_json::Value,
    ) -> Result<rota_core::Check> {
        let mut guest = self.instantiate()?;
        let result = guest
            .check(
                document.to_string().as_bytes(),
                options.to_string().as_bytes(),
            )
            .map_err(|e| e.into_host("rota_check"))?;
        check_of(result)
    }

    /// A fresh instance in a fresh store.
    pub fn instantiate(&self) -> Result<Guest> {
        let mut store = self.inner.engine.new_store()?;
        let instance = self
            .inner
            .pre
            .instantiate(&mut store)
            .map_err(|e| HostError::Load {
                origin: self.inner.source.clone(),
                message: e.to_string(),
            })?;
        Guest::new(self.inner.engine.budget(), store, instance)
    }
}

/// A `rota_check` answer as a [`rota_core::Check`].
pub(crate) fn check_of(mut result: serde_json::Value) -> Result<rota_core::Check> {
    if let Some(error) = result.get("error") {
        return Err(HostError::from_policy_json(error));
    }
    fn list<T: serde::de::DeserializeOwned>(
        result: &mut serde_json::Value,
        key: &str,
    ) -> Result<Vec<T>> {
        let value = result
            .get_mut("ok")
            .and_then(|ok| ok.get_mut(key))
            .map(serde_json::Value::take)
            .unwrap_or_default();
        serde_json::from_value(value).map_err(|e| HostError::Abi(format!("rota_check: {key}: {e}")))
    }
    Ok(rota_core::Check {
        violations: list(&mut result, "violations")?,
        warnings: list(&mut result, "warnings")?,
    })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // file times of a cache
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn entry(module: char, compat: char) -> String {
        format!(
            "{}-{}.cwasm",
            module.to_string().repeat(32),
            compat.to_string().repeat(16)
        )
    }

    /// Writes `name` in `dir`, last used `age_s` seconds ago.
    fn file(dir: &Path, name: &str, age_s: u64) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, b"x").expect("write");
        let file = std::fs::File::options()
            .append(true)
            .open(&path)
            .expect("open");
        file.set_modified(SystemTime::now() - Duration::from_secs(age_s))
            .expect("set mtime");
        path
    }

    #[test]
    fn cache_entry_names() {
        assert!(is_cache_entry(&entry('a', '0')));
        assert!(!is_cache_entry("a-0.cwasm"));
        assert!(!is_cache_entry(&entry('g', '0')));
        assert!(!is_cache_entry(&entry('a', '0').replace(".cwasm", ".wasm")));
        assert!(is_cache_temp(&format!(".{}.tmp-12-0", entry('a', '0'))));
        assert!(!is_cache_temp(".state.json.tmp-12-0"));
    }

    #[test]
    fn pruning_keeps_the_entry_in_use_and_the_newest_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dir = dir.path();
        // The entry in use is the oldest of all: it stays anyway.
        let in_use = file(dir, &entry('a', '1'), 1000);
        // Other modules and other engines (compatibility hashes), newest first.
        let others: Vec<PathBuf> = ['b', 'c', 'd', 'e', 'f']
            .iter()
            .enumerate()
            .map(|(i, m)| {
                file(
                    dir,
                    &entry(*m, if i % 2 == 0 { '1' } else { '2' }),
                    10 * i as u64,
                )
            })
            .collect();
        let fresh_temp = file(dir, &format!(".{}.tmp-1-0", entry('b', '1')), 10);
        let old_temp = file(dir, &format!(".{}.tmp-1-1", entry('b', '1')), 7200);
        let unrelated = file(dir, "notes.txt", 100_000);
        let old_unrelated = file(dir, "0123.cwasm", 100_000);

        let removed = prune_cache(dir, &in_use, 3).expect("prune");
        assert_eq!(removed, 3, "two old entries and an old temp file");
        assert!(in_use.exists());
        for (i, path) in others.iter().enumerate() {
            assert_eq!(path.exists(), i < 3, "{} (newest {})", path.display(), i);
        }
        assert!(fresh_temp.exists() && !old_temp.exists());
        assert!(unrelated.exists() && old_unrelated.exists());

        // Pruning again changes nothing; keeping none leaves only the one in use.
        assert_eq!(prune_cache(dir, &in_use, 3).expect("prune"), 0);
        assert_eq!(prune_cache(dir, &in_use, 0).expect("prune"), 3);
        assert!(in_use.exists());
    }
}
