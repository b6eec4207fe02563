//! STUB: the real state machine lands shortly; the API below is final.
use serde_json::Value;

use crate::error::Error;
use crate::protocol::{ExplainRequest, Input, Options, Output};
use crate::status::{Explanation, Plan, Snapshot};

#[derive(Debug, Clone)]
pub struct Policy {
    now: u64,
}

impl Policy {
    /// Builds a policy from a roster document (validated: every violation listed).
    pub fn new(document: &Value, options: Options) -> Result<Policy, Error> {
        let _ = (document, options);
        Ok(Policy { now: 0 })
    }
    /// Feeds one input. On error nothing changed.
    pub fn handle(&mut self, input: Input) -> Result<(), Error> {
        self.now = self.now.max(input.now());
        Ok(())
    }
    /// The next output, until `None`.
    pub fn poll_output(&mut self) -> Option<Output> {
        None
    }
    /// When the core wants a `tick` (epoch ms), if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        None
    }
    pub fn now(&self) -> u64 {
        self.now
    }
    pub fn snapshot(&self) -> Snapshot {
        unimplemented!()
    }
    pub fn available(&self, role: &str) -> Result<u32, Error> {
        let _ = role;
        Ok(0)
    }
    pub fn slots(&self, role: &str) -> Result<u32, Error> {
        let _ = role;
        Ok(0)
    }
    pub fn can_ever_serve(&self, role: &str, avoid: &[String]) -> Result<bool, Error> {
        let _ = (role, avoid);
        Ok(false)
    }
    pub fn explain(&self, request: &ExplainRequest) -> Result<Explanation, Error> {
        let _ = request;
        unimplemented!()
    }
    pub fn plan(&self, document: &Value) -> Result<Plan, Error> {
        let _ = document;
        unimplemented!()
    }
    /// Everything, for a live swap to another module version.
    pub fn export_state(&self) -> Value {
        Value::Null
    }
    pub fn import_state(state: &Value) -> Result<Policy, Error> {
        let _ = state;
        unimplemented!()
    }
    /// The running document as written.
    pub fn document(&self) -> &Value {
        unimplemented!()
    }
}
