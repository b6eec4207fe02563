//! rota-core's WebAssembly boundary. With feature `abi` it is the plain-ABI module for
//! wasmtime hosts (zero imports); with feature `js` it is the wasm-bindgen module of
//! the npm package (`js.rs`), which the pipeline (`make wasm`) builds twice from the
//! same code: made for speed for Node (with feature `binary`: the binary step behind
//! `Policy#handle`, `binary.rs`), made for size for browsers (without it).
//! All speak the JSON of `rota_core::json`, so one set of vectors tests them all.

#[cfg(feature = "abi")]
pub mod abi;
#[cfg(all(feature = "js", feature = "binary"))]
mod binary;
#[cfg(feature = "js")]
pub mod js;

#[cfg(all(
    feature = "js",
    target_arch = "wasm32",
    not(target_feature = "atomics")
))]
mod alloc;

/// The js build's allocator: free lists of small blocks in front of talc, made for
/// single-threaded WebAssembly, in place of the std's dlmalloc (slow in the
/// size-optimized std this build uses; every input allocates a few small blocks).
#[cfg(all(
    feature = "js",
    target_arch = "wasm32",
    not(target_feature = "atomics")
))]
#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator::new();
