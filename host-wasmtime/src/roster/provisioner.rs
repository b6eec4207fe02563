//! [`Provisioner`]: who creates and deletes machines and runs preflights for the
//! roster, and [`NoProvisioner`], the default. A leaf of the roster.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

/// A boxed future, for the [`Provisioner`] trait.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Carries out the scheduler seed's machine work for executors with `provision`, and
/// preflights. The default one has no machines (creation fails, so the core pauses
/// that executor) and cannot preflight.
pub trait Provisioner: Send + Sync + 'static {
    /// Creates a machine for `request` on `executor`; its hold (any JSON) on success.
    fn create_machine(&self, executor: &str, request: &str) -> BoxFuture<Result<Value, String>>;
    /// Deletes a machine a released lease held. The lease's slot frees when this
    /// ends; an error frees it too, and the core names the machine for a sweep.
    fn delete_machine(&self, executor: &str, hold: Value) -> BoxFuture<Result<(), String>>;
    /// Checks an executor: every one before the roster serves, and those a reload
    /// adds or grows (the scheduler seed's preflight).
    fn preflight(&self, executor: &str) -> BoxFuture<Result<(), String>>;
    /// Whether `preflight` checks anything: then the roster preflights at start and
    /// on reloads unless the builder says otherwise (`RosterBuilder::preflight`).
    fn can_preflight(&self) -> bool {
        true
    }
}

/// No machines; no preflight (every one would pass).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProvisioner;

impl Provisioner for NoProvisioner {
    fn create_machine(&self, _executor: &str, _request: &str) -> BoxFuture<Result<Value, String>> {
        Box::pin(async { Err("this host has no machine provisioner".to_string()) })
    }
    fn delete_machine(&self, _executor: &str, _hold: Value) -> BoxFuture<Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn preflight(&self, _executor: &str) -> BoxFuture<Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn can_preflight(&self) -> bool {
        false
    }
}
