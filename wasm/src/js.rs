//! The wasm-bindgen exports for JS (Node and browsers).
