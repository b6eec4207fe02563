//! One instance of the policy module: the plain ABI, call by call.
//!
//! The calling convention is in `wasm/src/abi.rs`: arguments are JSON written into
//! buffers from the guest's `alloc`; every result is `ptr << 32 | len` of a buffer the
//! guest owns until its next call, which the host copies out at once. Each call is
//! armed with the engine's deadline (and fuel) first.

use std::any::Any;
use std::sync::Arc;

use serde_json::Value;
use wasmtime::{Instance, Memory, Store, StoreLimits, Trap, TypedFunc, WasmParams, WasmResults};

use crate::error::{GuestFailure, HostError, Result};

/// What a guest's store holds.
pub struct GuestState {
    pub(crate) limits: StoreLimits,
}

/// What each call into a guest may spend, set before the call: an epoch deadline (in
/// ticks of the engine's epoch; `None`: no deadline) and fuel (`None`: unmetered). The
/// engine's configuration gives it ([`crate::engine::HostEngine`]).
#[derive(Clone)]
pub(crate) struct Budget {
    pub(crate) deadline_ticks: Option<u64>,
    pub(crate) fuel: Option<u64>,
    /// The engine, held while an instance of it lives: its epoch ticker, which makes
    /// the deadline fire, stops when the engine goes.
    pub(crate) _engine: Arc<dyn Any + Send + Sync>,
}

impl Budget {
    /// Sets the deadline (and fuel) for the next call.
    pub(crate) fn arm(&self, store: &mut Store<GuestState>) -> Result<()> {
        if let Some(ticks) = self.deadline_ticks {
            store.set_epoch_deadline(ticks);
        }
        if let Some(fuel) = self.fuel {
            store
                .set_fuel(fuel)
                .map_err(|e| HostError::Abi(format!("cannot set fuel: {e}")))?;
        }
        Ok(())
    }
}

/// A call into the guest that did not give an ABI result.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// It trapped or overran: the instance is unusable now.
    Failed(GuestFailure, String),
    /// It answered something that is not the ABI's JSON.
    Abi(String),
}

impl CallError {
    pub(crate) fn into_host(self, call: &str) -> HostError {
        match self {
            CallError::Failed(kind, message) => HostError::Guest {
                kind,
                call: call.to_string(),
                message,
            },
            CallError::Abi(message) => HostError::Abi(format!("{call}: {message}")),
        }
    }
}

struct Funcs {
    alloc: TypedFunc<u32, u32>,
    dealloc: TypedFunc<(u32, u32), ()>,
    create: TypedFunc<(u32, u32, u32, u32), u64>,
    import: TypedFunc<(u32, u32), u64>,
    destroy: TypedFunc<u32, u32>,
    handle: TypedFunc<(u32, u32, u32), u64>,
    query: TypedFunc<(u32, u32, u32), u64>,
    export: TypedFunc<u32, u64>,
    validate: TypedFunc<(u32, u32, u32, u32), u64>,
    /// ABI minor 1; a module without it is refused by its version.
    state_file: Option<TypedFunc<(u32, u32), u64>>,
    /// ABI minor 2; a module without it is refused by its version.
    check: Option<TypedFunc<(u32, u32, u32, u32), u64>>,
}

/// A buffer in guest memory that the host reuses for its arguments.
#[derive(Default, Clone, Copy)]
struct ArgBuf {
    ptr: u32,
    cap: u32,
}

/// One live instance of a policy module.
pub struct Guest {
    budget: Budget,
    store: Store<GuestState>,
    memory: Memory,
    funcs: Funcs,
    bufs: [ArgBuf; 2],
    abi_version: u32,
}

fn typed<P: WasmParams, R: WasmResults>(
    instance: &Instance,
    store: &mut Store<GuestState>,
    name: &str,
) -> Result<TypedFunc<P, R>> {
    instance
        .get_typed_func::<P, R>(&mut *store, name)
        .map_err(|e| HostError::Abi(format!("export `{name}`: {e}")))
}

/// Classifies a wasmtime error from a call.
fn failure(error: &wasmtime::Error) -> CallError {
    let kind = match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) | Some(Trap::OutOfFuel) => GuestFailure::Overran,
        _ => GuestFailure::Trapped,
    };
    CallError::Failed(kind, format!("{error:#}"))
}

impl Guest {
    pub(crate) fn new(
        budget: Budget,
        mut store: Store<GuestState>,
        instance: Instance,
    ) -> Result<Guest> {
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| HostError::Abi("the module exports no `memory`".into()))?;
        let version: TypedFunc<(), u32> = typed(&instance, &mut store, "rota_abi_version")?;
        let funcs = Funcs {
            alloc: typed(&instance, &mut store, "alloc")?,
            dealloc: typed(&instance, &mut store, "dealloc")?,
            create: typed(&instance, &mut store, "rota_create")?,
            import: typed(&instance, &mut store, "rota_import")?,
            destroy: typed(&instance, &mut store, "rota_destroy")?,
            handle: typed(&instance, &mut store, "rota_handle")?,
            query: typed(&instance, &mut store, "rota_query")?,
            export: typed(&instance, &mut store, "rota_export")?,
            validate: typed(&instance, &mut store, "rota_validate")?,
            state_file: typed(&instance, &mut store, "rota_state_file").ok(),
            check: typed(&instance, &mut store, "rota_check").ok(),
        };
        budget.arm(&mut store)?;
        let abi_version = version
            .call(&mut store, ())
            .map_err(|e| HostError::Abi(format!("rota_abi_version: {e}")))?;
        Ok(Guest {
            budget,
            store,
            memory,
            funcs,
            bufs: [ArgBuf::default(); 2],
            abi_version,
        })
    }

    /// `major << 16 | minor`.
    pub fn abi_version(&self) -> u32 {
        self.abi_version
    }

    fn call<P: WasmParams, R: WasmResults>(
        &mut self,
        func: impl Fn(&Funcs) -> &TypedFunc<P, R>,
        params: P,
    ) -> Result<R, CallError> {
        self.budget
            .arm(&mut self.store)
            .map_err(|e| CallError::Abi(e.to_string()))?;
        func(&self.funcs)
            .call(&mut self.store, params)
            .map_err(|e| failure(&e))
    }

    /// Writes `bytes` into argument buffer `slot`, growing it when needed.
    fn write(&mut self, slot: usize, bytes: &[u8]) -> Result<(u32, u32), CallError> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| CallError::Abi("an argument over 4 GiB".into()))?;
        let mut buf = self.bufs[slot];
        if buf.cap < len || buf.ptr == 0 {
            if buf.ptr != 0 {
                self.call(|f| &f.dealloc, (buf.ptr, buf.cap))?;
            }
            let cap = len.max(buf.cap.saturating_mul(2)).max(256);
            let ptr = self.call(|f| &f.alloc, cap)?;
            buf = ArgBuf { ptr, cap };
            self.bufs[slot] = buf;
        }
        let start = buf.ptr as usize;
        let memory = self.memory.data_mut(&mut self.store);
        let target = memory
            .get_mut(start..start + bytes.len())
            .ok_or_else(|| CallError::Abi("alloc returned a buffer outside memory".into()))?;
        target.copy_from_slice(bytes);
        Ok((buf.ptr, len))
    }

    /// Copies out and parses the result buffer `packed` names.
    fn read(&mut self, packed: u64) -> Result<Value, CallError> {
        let bytes = self.read_bytes(packed)?;
        serde_json::from_slice(bytes)
            .map_err(|e| CallError::Abi(format!("the result is not JSON: {e}")))
    }

    fn read_bytes(&self, packed: u64) -> Result<&[u8], CallError> {
        let ptr = (packed >> 32) as usize;
        let len = (packed & 0xffff_ffff) as usize;
        self.memory
            .data(&self.store)
            .get(ptr..ptr + len)
            .ok_or_else(|| CallError::Abi(format!("result ({ptr}, {len}) is outside memory")))
    }

    /// `rota_create`: `{"handle"}` or `{"error"}`.
    pub(crate) fn create(&mut self, document: &[u8], options: &[u8]) -> Result<Value, CallError> {
        let (dp, dl) = self.write(0, document)?;
        let (op, ol) = self.write(1, options)?;
        let packed = self.call(|f| &f.create, (dp, dl, op, ol))?;
        self.read(packed)
    }

    /// `rota_import`: `{"handle"}` or `{"error"}`.
    pub(crate) fn import(&mut self, state: &[u8]) -> Result<Value, CallError> {
        let (p, l) = self.write(0, state)?;
        let packed = self.call(|f| &f.import, (p, l))?;
        self.read(packed)
    }

    pub(crate) fn destroy(&mut self, handle: u32) -> Result<bool, CallError> {
        Ok(self.call(|f| &f.destroy, handle)? == 1)
    }

    /// `rota_handle`: `{"outputs","wakeAt"}` or `{"error"}`.
    pub(crate) fn handle(&mut self, handle: u32, input: &[u8]) -> Result<Value, CallError> {
        let (p, l) = self.write(0, input)?;
        let packed = self.call(|f| &f.handle, (handle, p, l))?;
        self.read(packed)
    }

    /// `rota_handle`, with the result as the guest's text (for byte comparisons).
    pub(crate) fn handle_text(&mut self, handle: u32, input: &[u8]) -> Result<String, CallError> {
        let (p, l) = self.write(0, input)?;
        let packed = self.call(|f| &f.handle, (handle, p, l))?;
        let bytes = self.read_bytes(packed)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| CallError::Abi("the result is not UTF-8".into()))
    }

    /// `rota_query`: `{"ok"}` or `{"error"}`.
    pub(crate) fn query(&mut self, handle: u32, query: &[u8]) -> Result<Value, CallError> {
        let (p, l) = self.write(0, query)?;
        let packed = self.call(|f| &f.query, (handle, p, l))?;
        self.read(packed)
    }

    /// `rota_export`: `{"ok"}` or `{"error"}`.
    pub(crate) fn export(&mut self, handle: u32) -> Result<Value, CallError> {
        let packed = self.call(|f| &f.export, handle)?;
        self.read(packed)
    }

    /// `rota_export`, with the result as the guest's bytes.
    pub(crate) fn export_text(&mut self, handle: u32) -> Result<Vec<u8>, CallError> {
        let packed = self.call(|f| &f.export, handle)?;
        Ok(self.read_bytes(packed)?.to_vec())
    }

    /// `rota_validate`: `{"ok": [violations]}` or `{"error"}`.
    pub(crate) fn validate(&mut self, document: &[u8], options: &[u8]) -> Result<Value, CallError> {
        let (dp, dl) = self.write(0, document)?;
        let (op, ol) = self.write(1, options)?;
        let packed = self.call(|f| &f.validate, (dp, dl, op, ol))?;
        self.read(packed)
    }

    /// `rota_check` (ABI 1.2): `{"ok": {"violations", "warnings"}}` or `{"error"}`.
    pub(crate) fn check(&mut self, document: &[u8], options: &[u8]) -> Result<Value, CallError> {
        let Some(func) = self.funcs.check.clone() else {
            return Err(CallError::Abi("the module has no `rota_check`".into()));
        };
        let (dp, dl) = self.write(0, document)?;
        let (op, ol) = self.write(1, options)?;
        self.budget
            .arm(&mut self.store)
            .map_err(|e| CallError::Abi(e.to_string()))?;
        let packed = func
            .call(&mut self.store, (dp, dl, op, ol))
            .map_err(|e| failure(&e))?;
        self.read(packed)
    }

    /// `rota_state_file`: the state file's rule, the guest's answer text
    /// (`{"ok"}` or `{"error"}`).
    pub(crate) fn state_file(&mut self, request: &[u8]) -> Result<String, CallError> {
        let Some(func) = self.funcs.state_file.clone() else {
            return Err(CallError::Abi("the module has no `rota_state_file`".into()));
        };
        let (p, l) = self.write(0, request)?;
        self.budget
            .arm(&mut self.store)
            .map_err(|e| CallError::Abi(e.to_string()))?;
        let packed = func
            .call(&mut self.store, (p, l))
            .map_err(|e| failure(&e))?;
        let bytes = self.read_bytes(packed)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| CallError::Abi("the result is not UTF-8".into()))
    }
}
