//! Budgets and accounts across an export and an import, and
//! across a reload: the grant times are the core's state, so a restored policy (a
//! live swap, a shared roster's snapshot) keeps a spent budget spent and wakes at the
//! same room; an import whose windows contradict the budgets is refused naming the
//! field. A reload keeps an executor's grant times and exclusion; an account's grant
//! times stay with the account's name.

mod common;

use common::{feed, granted, T0};
use rota_core::{Options, Policy};
use serde_json::{json, Value};

fn document() -> Value {
    json!({
        "accounts": { "acme": { "budget": { "requestsPerMinute": 2 } } },
        "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 4, "account": "acme",
              "budget": { "requests": 1, "per": "30s" } },
            { "id": "b", "harness": "pi", "roles": ["coder"], "slots": 4, "account": "acme" }
        ]
    })
}

/// Two grants spend the account's budget; a third request waits.
fn spent() -> Policy {
    let mut policy = Policy::new(&document(), Options::default()).expect("a roster");
    for (i, id) in ["r1", "r2", "r3"].iter().enumerate() {
        feed(
            &mut policy,
            json!({ "type": "lease", "now": T0 + i as u64, "id": id, "role": "coder" }),
        );
    }
    policy
}

#[test]
fn a_spent_budget_survives_an_export_and_an_import() {
    let mut policy = spent();
    // a's own room (T0 + 30 s) is inside the account's: both wake at the account's.
    assert_eq!(policy.poll_timeout(), Some(T0 + 60_000));
    let exported = policy.export_state();
    assert_eq!(exported["accountGrants"], json!({ "acme": [T0, T0 + 1] }));
    assert_eq!(exported["runtime"]["a"]["budgetGrants"], json!([T0]));
    assert!(exported["runtime"]["b"].get("budgetGrants").is_none());

    let mut restored = Policy::import_state(&exported).expect("import");
    assert_eq!(restored.state_hash(), policy.state_hash());
    assert_eq!(restored.poll_timeout(), policy.poll_timeout());
    // At a's own room the account's is still spent: nothing; at the account's, r3.
    let request: rota_core::ExplainRequest =
        serde_json::from_value(json!({ "role": "coder", "request": "r3" })).expect("a request");
    let explained = restored.explain(&request).expect("explain");
    assert_eq!(
        explained.executors[0].reasons,
        ["budget: room at 2027-01-15T08:01:00.000Z"]
    );
    let out = feed(&mut restored, json!({ "type": "tick", "now": T0 + 30_000 }));
    assert!(granted(&out).is_empty(), "{out}");
    let out = feed(&mut restored, json!({ "type": "tick", "now": T0 + 60_000 }));
    assert_eq!(granted(&out), ["r3"]);
    let out = feed(&mut policy, json!({ "type": "tick", "now": T0 + 60_000 }));
    assert_eq!(granted(&out), ["r3"]);
    assert_eq!(restored.state_hash(), policy.state_hash());
}

#[test]
fn an_import_whose_grant_times_contradict_the_budgets_is_refused_naming_the_field() {
    let exported = spent().export_state();
    let refused = |state: Value, field: &str| {
        let err = Policy::import_state(&state)
            .expect_err("refused")
            .to_string();
        assert!(err.contains(field), "{err}");
    };
    let mut more = exported.clone();
    more["runtime"]["a"]["budgetGrants"] = json!([T0 - 2, T0 - 1]);
    refused(
        more,
        "runtime.a.budgetGrants: more grant times than the budget's requests",
    );
    let mut unbudgeted = exported.clone();
    unbudgeted["runtime"]["b"]["budgetGrants"] = json!([T0]);
    refused(
        unbudgeted,
        "runtime.b.budgetGrants: more grant times than the budget's requests (none without a budget)",
    );
    let mut order = exported.clone();
    order["accountGrants"]["acme"] = json!([T0 + 1, T0]);
    refused(order, "accountGrants.acme: grant times out of time order");
    let mut later = exported.clone();
    later["accountGrants"]["acme"] = json!([T0, T0 + 99_000]);
    refused(later, "accountGrants.acme: a grant time after now");
    let mut unknown = exported;
    unknown["accountGrants"]["other"] = json!([T0]);
    refused(
        unknown,
        "accountGrants.other: more grant times than the budget's requests (none without a budget)",
    );
}

#[test]
fn a_reload_keeps_the_windows_and_applies_the_new_budgets() {
    let mut policy = spent();
    // A looser account budget: the window has room now, r3 is granted on the reload.
    let mut looser = document();
    looser["accounts"]["acme"]["budget"] = json!({ "requestsPerMinute": 3 });
    let out = feed(
        &mut policy,
        json!({ "type": "reload", "now": T0 + 10, "document": looser }),
    );
    assert_eq!(granted(&out), ["r3"], "{out}");
    // b leaves the account: the account's window binds a alone, b has none.
    let mut moved = document();
    moved["accounts"]["acme"]["budget"] = json!({ "requestsPerMinute": 3 });
    moved["executors"][1]["account"] = json!("other");
    feed(
        &mut policy,
        json!({ "type": "reload", "now": T0 + 20, "document": moved }),
    );
    let out = feed(
        &mut policy,
        json!({ "type": "lease", "now": T0 + 30, "id": "r4", "role": "coder" }),
    );
    assert_eq!(granted(&out), ["r4"], "b has no budget now: {out}");
    assert_eq!(
        policy.export_state()["accountGrants"]["acme"],
        json!([T0, T0 + 1, T0 + 10])
    );
}
