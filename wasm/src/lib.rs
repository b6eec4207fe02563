//! rota-core's WebAssembly boundary. Built three times by the pipeline (`make wasm`):
//! with feature `abi` it is the plain-ABI module for wasmtime hosts (zero imports);
//! with feature `js` it is the wasm-bindgen module for browsers (the web build, made
//! for size); with `js` and `fast-step` (the binary step behind `Policy#handle`) it is
//! the module the package's Node entry loads (made for speed: a Node process reads it
//! from disk, so its size matters less than its cost per input).
//! All speak the JSON of `rota_core::json`, so one set of vectors tests them all.

#[cfg(feature = "abi")]
pub mod abi;
#[cfg(feature = "fast-step")]
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
