//! What a `tracing` subscriber and a `metrics` recorder see of a roster: each event
//! field under its own key, a span per lease from request to release, and the
//! metrics the README lists. (Its own test binary: the subscriber and the recorder are
//! process-wide.)

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use common::policy;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rota_host::{telemetry, LeaseOptions, Roster};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// One recorded event: its target, fields, and the names of the spans it is in.
#[derive(Debug, Clone, Default)]
struct Seen {
    target: String,
    fields: BTreeMap<String, String>,
    spans: Vec<String>,
}

/// The fields of a span, kept in its extensions.
#[derive(Debug, Clone, Default)]
struct SpanFields(BTreeMap<String, String>);

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), format!("u64:{value}"));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

/// A span's name and its fields, as it closed.
type ClosedSpan = (String, BTreeMap<String, String>);

/// A metric's name, labels and value.
type Metric = (String, Vec<(String, String)>, DebugValue);

#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<Seen>>>,
    /// (span name, its fields) as each span closes.
    closed: Arc<Mutex<Vec<ClosedSpan>>>,
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields.0));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            if let Some(kept) = span.extensions_mut().get_mut::<SpanFields>() {
                kept.0.extend(fields.0);
            }
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let spans = ctx
            .event_scope(event)
            .map(|scope| scope.map(|s| s.name().to_string()).collect())
            .unwrap_or_default();
        self.events.lock().expect("lock").push(Seen {
            target: event.metadata().target().to_string(),
            fields: fields.0,
            spans,
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span
                .extensions()
                .get::<SpanFields>()
                .map(|f| f.0.clone())
                .unwrap_or_default();
            self.closed
                .lock()
                .expect("lock")
                .push((span.name().to_string(), fields));
        }
    }
}

/// The process-wide subscriber and recorder, installed once.
fn install() -> (Recorder, Snapshotter) {
    static INSTALLED: OnceLock<(Recorder, Snapshotter)> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let recorder = Recorder::default();
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(recorder.clone()),
            )
            .expect("a subscriber");
            let metrics = DebuggingRecorder::new();
            let snapshotter = metrics.snapshotter();
            metrics.install().expect("a recorder");
            (recorder, snapshotter)
        })
        .clone()
}

#[tokio::test]
async fn events_spans_and_metrics() {
    let (recorder, snapshotter) = install();
    let dir = tempfile::tempdir().expect("tempdir");
    let roster = Roster::builder()
        .document(json!({ "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 1 },
            { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 1, "priority": 2 },
        ] }))
        .state_file(dir.path().join("state.json"))
        .module(policy())
        .build()
        .await
        .expect("roster");
    let lease = roster
        .lease(
            "coder",
            LeaseOptions {
                label: Some("job 1".into()),
                ..LeaseOptions::default()
            },
        )
        .await
        .expect("lease");
    assert_eq!(lease.executor(), "a");
    roster
        .report_http("a", 429, &[("retry-after", "30")], "slow down")
        .expect("report");
    let waiting = {
        let roster = roster.clone();
        tokio::spawn(async move { roster.lease("coder", LeaseOptions::default()).await })
    };
    let second = roster
        .lease("coder", LeaseOptions::default())
        .await
        .expect("b");
    assert_eq!(second.executor(), "b");
    drop(lease);
    drop(second);
    let third = waiting.await.expect("joined").expect("lease");
    third.release().expect("released");
    roster.flush().await.expect("flushed");

    let events = recorder.events.lock().expect("lock").clone();
    // The core's `excluded` event: each field its own key, not one JSON string.
    let excluded = events
        .iter()
        .find(|e| e.target == "rota::core" && e.fields.get("name").is_some_and(|n| n == "excluded"))
        .unwrap_or_else(|| panic!("an excluded event: {events:#?}"));
    assert_eq!(
        excluded.fields.get("executor").map(String::as_str),
        Some("a")
    );
    assert_eq!(
        excluded.fields.get("kind").map(String::as_str),
        Some("until")
    );
    assert!(
        excluded
            .fields
            .get("until")
            .is_some_and(|u| u.starts_with("u64:")),
        "a number: {excluded:?}"
    );
    assert!(!excluded.fields.contains_key("fields"), "{excluded:?}");

    // The core's `granted` event for the first lease happens inside its span.
    let granted = events
        .iter()
        .find(|e| e.fields.get("name").is_some_and(|n| n == "granted"))
        .expect("a granted event");
    assert_eq!(granted.spans, ["lease"], "{granted:?}");
    assert_eq!(
        granted.fields.get("lease").map(String::as_str),
        Some("u64:1")
    );
    // The host's own lease life: requested, granted, released, each in the span.
    for message in ["lease requested", "lease granted", "lease released"] {
        let seen = events
            .iter()
            .filter(|e| e.fields.get("message").is_some_and(|m| m == message))
            .count();
        assert_eq!(seen, 3, "{message}: {events:#?}");
        assert!(events
            .iter()
            .filter(|e| e.fields.get("message").is_some_and(|m| m == message))
            .all(|e| e.spans == ["lease"]));
    }
    let closed = recorder.closed.lock().expect("lock").clone();
    let leases: Vec<&BTreeMap<String, String>> = closed
        .iter()
        .filter(|(name, _)| name == "lease")
        .map(|(_, fields)| fields)
        .collect();
    assert_eq!(leases.len(), 3, "every lease span closed: {closed:?}");
    let first = leases
        .iter()
        .find(|f| f.get("label").is_some_and(|l| l == "job 1"))
        .expect("the labelled lease's span");
    assert_eq!(first.get("executor").map(String::as_str), Some("a"));
    assert_eq!(first.get("role").map(String::as_str), Some("coder"));

    // The metrics.
    let metrics: Vec<Metric> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            (key.name().to_string(), labels, value)
        })
        .collect();
    let counter = |name: &str, label: (&str, &str)| -> u64 {
        metrics
            .iter()
            .filter(|(n, labels, _)| {
                n == name && labels.iter().any(|(k, v)| k == label.0 && v == label.1)
            })
            .map(|(_, _, value)| match value {
                DebugValue::Counter(count) => *count,
                _ => 0,
            })
            .sum()
    };
    assert_eq!(counter(telemetry::LEASES_GRANTED, ("role", "coder")), 3);
    assert_eq!(counter(telemetry::EXCLUSIONS, ("kind", "until")), 1);
    assert!(counter(telemetry::STATE_WRITES, ("result", "ok")) >= 1);
    let waits = metrics
        .iter()
        .find(|(n, _, _)| n == telemetry::LEASE_WAIT)
        .map(|(_, _, value)| match value {
            DebugValue::Histogram(samples) => samples.len(),
            _ => 0,
        });
    assert_eq!(waits, Some(3), "{metrics:?}");
    let queue = metrics
        .iter()
        .find(|(n, labels, _)| {
            n == telemetry::QUEUE_LENGTH && labels.iter().any(|(_, v)| v == "coder")
        })
        .map(|(_, _, value)| value);
    assert_eq!(
        queue,
        Some(&DebugValue::Gauge(0.0.into())),
        "nobody waits at the end"
    );
}
