//! rota-core's WebAssembly boundary. Built twice by the pipeline (`make wasm`):
//! with feature `abi` it is the plain-ABI module for wasmtime hosts (zero imports),
//! with feature `js` it is the wasm-bindgen module for Node and browsers.
//! Both speak the JSON of `rota_core::json`, so one set of vectors tests both.

#[cfg(feature = "abi")]
pub mod abi;
#[cfg(feature = "js")]
pub mod js;
