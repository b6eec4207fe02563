//! rota-core
