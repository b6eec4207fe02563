use rota_core::json::step;
use rota_core::{Options, Policy};
use serde_json::{json, Value};

fn run(p: &mut Policy, input: Value) -> Value {
    step(p, &input)
}

#[test]
fn smoke() {
    let doc = json!({"executors":[
        {"id":"a","harness":"claude","roles":["coder","reviewer"],"slots":2},
        {"id":"b","harness":"pi","roles":["coder"],"priority":2,"health":"http://127.0.0.1:1/h"}
    ]});
    let mut p = Policy::new(&doc, Options::default()).unwrap();
    let t = 1_800_000_000_000u64;
    for (i, input) in [
        json!({"type":"lease","now":t,"id":"r1","role":"coder"}),
        json!({"type":"lease","now":t,"id":"r2","role":"coder"}),
        json!({"type":"lease","now":t,"id":"r3","role":"coder","label":"story-3"}),
        json!({"type":"report","now":t+1,"executor":"b","failure":{"kind":"outage","message":"ECONNREFUSED"}}),
        json!({"type":"release","now":t+2,"lease":1}),
        json!({"type":"probeResult","now":t+3,"executor":"b","up":true}),
        json!({"type":"release","now":t+4,"lease":2}),
        json!({"type":"release","now":t+4,"lease":2}),
        json!({"type":"release","now":t+4,"lease":99}),
        json!({"type":"tick","now":t+100}),
    ].into_iter().enumerate() {
        let out = run(&mut p, input);
        println!("{i}: {}", serde_json::to_string_pretty(&out).unwrap());
    }
    println!("{}", serde_json::to_string_pretty(&p.snapshot()).unwrap());
}
