//! Tenants (`fairness: "tenants"`): weighted fair queuing of a role's waiting
//! requests across tenants. One busy tenant cannot starve another (a tenant that asks
//! once behind a thousand requests is served within one turn of its share); the fair
//! queues' tags and turns survive an export and an import, and an import that
//! contradicts them is refused naming the field; a reload turns the rule on and off
//! with the queue in place.

mod common;

use common::{feed, granted, T0};
use rota_core::{Options, Policy};
use serde_json::{json, Value};

fn document(fairness: Option<&str>, tenants: Value) -> Value {
    let mut doc = json!({
        "tenants": tenants,
        "executors": [{ "id": "x", "harness": "pi", "roles": ["coder"], "slots": 1 }]
    });
    if let Some(fairness) = fairness {
        doc["fairness"] = json!(fairness);
    }
    doc
}

fn lease(policy: &mut Policy, now: u64, id: &str, tenant: &str) -> Vec<String> {
    granted(&feed(
        policy,
        json!({ "type": "lease", "now": now, "id": id, "role": "coder", "tenant": tenant }),
    ))
}

/// Releases lease after lease (each grant's lease is the next id) until `stop` is
/// granted: the requests granted, in order.
fn serve_until(policy: &mut Policy, first_lease: u64, stop: &str) -> Vec<String> {
    let mut order = Vec::new();
    let mut lease = first_lease;
    while !order.iter().any(|g| g == stop) {
        let out = feed(
            policy,
            json!({ "type": "release", "now": T0 + 10_000 + lease, "lease": lease }),
        );
        let grants = granted(&out);
        assert_eq!(grants.len(), 1, "one slot frees, one grant: {out}");
        order.extend(grants);
        lease += 1;
    }
    order
}

/// Tenant a queues 1,000 requests on one slot (the first is granted at once), then
/// tenant b asks once: the grants after b's request, until b's.
fn starvation(fairness: Option<&str>, tenants: Value) -> Vec<String> {
    let mut policy = Policy::new(&document(fairness, tenants), Options::default()).expect("roster");
    for i in 0..1000 {
        let grants = lease(&mut policy, T0 + i, &format!("a{i}"), "a");
        assert_eq!(grants.len(), usize::from(i == 0));
    }
    assert!(lease(&mut policy, T0 + 2000, "b", "b").is_empty());
    serve_until(&mut policy, 1, "b")
}

#[test]
fn one_busy_tenant_cannot_starve_another() {
    // Equal weights: b's share is one grant in two. a's head has the earlier turn
    // (its tag equals b's), so b is the second grant after it asks.
    assert_eq!(starvation(Some("tenants"), json!({})), ["a1", "b"]);
    // a weighs 3: b's share is one grant in four; b is served at the third, within
    // its cycle (a's tags T/3, 2T/3, T; b's T, set before a's third).
    let weighted = starvation(Some("tenants"), json!({ "a": { "weight": 3 } }));
    assert_eq!(weighted, ["a1", "a2", "b"]);
    // b weighs 3: at once.
    let heavy = starvation(Some("tenants"), json!({ "b": { "weight": 3 } }));
    assert_eq!(heavy, ["b"]);
    // Lease order (the default): b waits behind all 999.
    let starved = starvation(None, json!({}));
    assert_eq!(starved.len(), 1000);
    assert_eq!(starved.last().map(String::as_str), Some("b"));
}

/// Tenants a (weight 2) and b queue; `n` grants are served.
fn queued(n: u64) -> Policy {
    let doc = document(Some("tenants"), json!({ "a": { "weight": 2 } }));
    let mut policy = Policy::new(&doc, Options::default()).expect("roster");
    lease(&mut policy, T0, "h", "c");
    for i in 0..6 {
        lease(&mut policy, T0 + 1 + i, &format!("a{i}"), "a");
        lease(&mut policy, T0 + 100 + i, &format!("b{i}"), "b");
    }
    for l in 1..=n {
        feed(
            &mut policy,
            json!({ "type": "release", "now": T0 + 1000 + l, "lease": l }),
        );
    }
    policy
}

#[test]
fn the_fair_queues_survive_an_export_and_an_import() {
    let mut policy = queued(4);
    let exported = policy.export_state();
    let fairness = &exported["fairness"]["coder"];
    assert!(
        fairness["vtime"].as_u64().is_some_and(|v| v > 0),
        "{fairness}"
    );
    assert_eq!(
        fairness["tenants"]
            .as_object()
            .map(|t| t.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["a".to_string(), "b".to_string()])
    );
    let mut restored = Policy::import_state(&exported).expect("import");
    assert_eq!(restored.state_hash(), policy.state_hash());
    let rest = serve_until(&mut restored, 5, "b5");
    assert_eq!(serve_until(&mut policy, 5, "b5"), rest);
    assert_eq!(restored.state_hash(), policy.state_hash());
    // Nobody waits: the export has no fair queue left.
    assert!(policy.export_state().get("fairness").is_none());
}

#[test]
fn an_import_that_contradicts_the_fair_queues_is_refused_naming_the_field() {
    let exported = queued(2).export_state();
    let refused = |edit: &dyn Fn(&mut Value)| {
        let mut state = exported.clone();
        edit(&mut state);
        match Policy::import_state(&state) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("imported"),
        }
    };
    let message = refused(&|s| {
        s["fairness"]["coder"]["tenants"]["z"] = json!([1, 0]);
    });
    assert!(message.contains("fairness.coder.tenants.z"), "{message}");
    let message = refused(&|s| {
        if let Some(t) = s["fairness"]["coder"]["tenants"].as_object_mut() {
            t.remove("b");
        }
    });
    assert!(
        message.contains("fairness.coder.tenants.b: tenant 'b' waits for coder"),
        "{message}"
    );
    let message = refused(&|s| {
        s["fairness"]["coder"]["nextTurn"] = json!(0);
    });
    assert!(message.contains("fairness.coder.tenants."), "{message}");
    let message = refused(&|s| {
        s["fairness"]["reviewer"] = s["fairness"]["coder"].clone();
    });
    assert!(message.contains("fairness.reviewer"), "{message}");
    let message = refused(&|s| {
        s["document"]["fairness"] = json!("leaseOrder");
    });
    assert!(
        message.contains("fairness: the document does not serve tenants"),
        "{message}"
    );
    let message = refused(&|s| {
        s["fairness"]["coder"]["tenants"]["a"] = json!([u64::MAX, 0]);
    });
    assert!(message.contains("fairness.coder.tenants.a"), "{message}");
}

#[test]
fn a_reload_turns_fairness_on_and_off_with_the_queue_in_place() {
    let mut policy = Policy::new(&document(None, json!({})), Options::default()).expect("roster");
    lease(&mut policy, T0, "h", "c");
    for i in 0..3 {
        lease(&mut policy, T0 + 1 + i, &format!("a{i}"), "a");
    }
    for i in 0..3 {
        lease(&mut policy, T0 + 10 + i, &format!("b{i}"), "b");
    }
    let on = document(Some("tenants"), json!({}));
    feed(
        &mut policy,
        json!({ "type": "reload", "now": T0 + 20, "document": on }),
    );
    // The tenants joined in lease order: a's turn first.
    assert_eq!(serve_until(&mut policy, 1, "b0"), ["a0", "b0"]);
    let off = document(None, json!({}));
    feed(
        &mut policy,
        json!({ "type": "reload", "now": T0 + 30, "document": off }),
    );
    assert!(policy.export_state().get("fairness").is_none());
    assert_eq!(serve_until(&mut policy, 3, "b2"), ["a1", "a2", "b1", "b2"]);
}
