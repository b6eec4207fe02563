//! rota-host: loads the rota policy module in wasmtime and does the IO it asks for.
