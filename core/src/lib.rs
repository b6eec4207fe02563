//! rota-core — placeholder docs, replaced by the design doc.

#![forbid(unsafe_code)]

pub mod classify;
pub mod document;
pub mod duration;
pub mod error;
pub mod json;
pub mod policy;
pub mod protocol;
pub mod status;
mod time;

pub use document::{merge, narrow, validate, Document, ExecutorSpec, Violation};
pub use duration::{format_duration, parse_duration};
pub use error::Error;
pub use policy::Policy;
pub use protocol::{
    Exclusion, ExclusionKind, ExplainRequest, Failure, FailureKind, Input, LeaseRequest, Level,
    Options, Output, PersistedState,
};
pub use status::{Explanation, Plan, Snapshot};
