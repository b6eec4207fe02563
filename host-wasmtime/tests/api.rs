//! The public API as a project sees it: every type it takes or gives is named through
//! `rota_host::` alone (no `rota-core` dependency, no `rota_host::core::` path), and
//! what it prints reads as the other hosts'.

mod common;

use std::time::Duration;

use rota_host::{HostError, LeaseOptions, Roster};
use serde_json::json;

/// Compiles only while each type the API takes or gives, and each type their public
/// fields hold, is re-exported at `rota_host::` as the type of that field. The list
/// comes from the `pub fn` signatures and public fields of `rota-host`'s public items
/// (`Roster`, `SharedRoster`, `PolicyRuntime`, `PolicyModule`, `Event`, `output::read`,
/// `ProbeTls` ...) and of the core types they give.
#[allow(dead_code, clippy::too_many_arguments)]
fn every_type_is_named_through_rota_host(
    snapshot: rota_host::Snapshot,
    explanation: rota_host::Explanation,
    plan: rota_host::Plan,
    document: rota_host::Document,
    check: rota_host::Check,
    options: rota_host::Options,
    failure: rota_host::Failure,
    state: rota_host::PersistedState,
    output: rota_host::Output,
    request: rota_host::ExplainRequest,
) {
    let executors: Vec<rota_host::ExecutorStatus> = snapshot.executors;
    let _: Vec<rota_host::QueuedRequest> = snapshot.queue;
    let _: Vec<rota_host::CreatingRequest> = snapshot.creating;
    let _: Option<rota_host::PendingReloadStatus> = snapshot.pending_reload;
    for executor in executors {
        let _: rota_host::SortedMap<u32> = executor.role_caps;
        let _: Option<rota_host::PauseStatus> = executor.pause;
        for lease in executor.leases {
            let _: rota_host::LeaseStatus = lease.clone();
            let _: Option<rota_host::Because> = lease.because;
        }
        let _: Option<rota_host::PreflightRecord> = executor.preflight;
        if let Some(exclusion) = executor.exclusion {
            let _: rota_host::ExclusionStatus = exclusion.clone();
            let _: rota_host::ExclusionKind = exclusion.kind;
        }
    }
    let _: Vec<rota_host::ExecutorExplanation> = explanation.executors;
    let _: Vec<rota_host::Resize> = plan.resized;
    let _: Vec<rota_host::PlannedGrant> = plan.granted;
    let _: rota_host::PreferRule = document.prefer_rule();
    let _: rota_host::CoderSlotsDefault = document.coder_slots_default();
    let _: rota_host::ClonesRule = document.clones_rule();
    let _: rota_host::LeaseEventsRule = document.lease_events_rule();
    let _: Option<rota_host::ClonesRule> = document.clones;
    let _: Option<rota_host::LeaseEventsRule> = document.lease_events;
    assert_eq!(rota_host::clone_name("codex", 2), "codex#2");
    let _: rota_host::Form = document.form;
    let _: Option<rota_host::Choice> = document.choice;
    let _: Option<rota_host::Unservable> = document.unservable;
    let _: Option<rota_host::Rules> = document.rules;
    let _: Option<rota_host::PreferRule> = document.prefer;
    let _: Option<rota_host::CoderSlotsDefault> = document.coder_slots_default;
    let _: rota_host::ResetTime = document.reset_time();
    let _: Option<rota_host::ResetTime> = document.reset_time;
    let _: rota_host::Signals = document.signals;
    for spec in document.executors {
        let _: rota_host::ExecutorSpec = spec.clone();
        let _: rota_host::Priority = spec.priority;
        let _: Option<rota_host::Effort> = spec.effort.clone();
        let _: Option<rota_host::EffortLevel> = spec.effort_for("coder");
        let _: rota_host::Cooldowns = spec.cooldown;
        let _: rota_host::RecoveryRule = spec.recovery;
        let _: rota_host::RecoveryMode = spec.recovery.mode;
        let _: u32 = spec.consecutive_failures;
    }
    let _: Vec<rota_host::Violation> = check.violations;
    let _: rota_host::Level = options.min_event_level;
    let _: rota_host::ExpiredOwnerLeases = options.expired_owner_leases;
    let _: Option<rota_host::FailureKind> = failure.kind;
    let _: Vec<rota_host::Exclusion> = state.exclusions;
    if let rota_host::Output::Event {
        level,
        name,
        message,
        fields,
    } = output
    {
        let _: rota_host::Event = rota_host::Event::core(level, &name, message, &fields);
        let _: rota_host::Fields = fields;
    }
    let _ = rota_host::ProbeTls::new(&[] as &[rota_host::CertificateDer<'_>]);
    let _: rota_host::ExplainRequest = request;
}

#[test]
fn a_level_displays_as_its_json_name() {
    for level in rota_host::Level::ALL {
        assert_eq!(
            json!(level.to_string()),
            serde_json::to_value(level).expect("a level is JSON")
        );
    }
    assert_eq!(format!("{}", rota_host::Level::Warn), "warn");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_says_why_each_executor_did_not_take_it() {
    let roster = Roster::builder()
        .document(json!({ "executors": [
            { "id": "solo", "harness": "pi", "roles": ["coder"] },
            { "id": "other", "harness": "pi", "roles": ["coder"] },
        ] }))
        .module(common::policy())
        .build()
        .await
        .expect("roster");
    let _first = roster.lease("coder", LeaseOptions::default()).await;
    let _second = roster.lease("coder", LeaseOptions::default()).await;
    let error = roster
        .lease(
            "coder",
            LeaseOptions {
                timeout: Some(Duration::from_secs(60)),
                label: Some("issue 17".into()),
                ..LeaseOptions::default()
            },
        )
        .await
        .expect_err("times out");
    match &error {
        HostError::TimedOut { reasons, .. } => {
            assert_eq!(reasons, &["solo busy", "other busy"], "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        error
            .to_string()
            .ends_with("for role 'coder' (issue 17) timed out: solo busy; other busy"),
        "{error}"
    );
}
