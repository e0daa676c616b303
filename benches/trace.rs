//! What tracing costs a run: the 100-node chain of pure `return` steps of
//! `benches/runtime.rs` (`chain100.return.step_ms`), on a real store file, run with tracing
//! off (no span sink: what every run without the `OTEL_*` variables does) and on (every
//! span handed to `pipec_telemetry`, which batches them on its own thread and exports them
//! over OTLP/HTTP protobuf to a receiver on 127.0.0.1 that answers 200), the two in
//! alternation, rep by rep. Per-step figures are a chain's time ÷ 100; the table gives the
//! median and p95 of 20 chains each (4 with `--quick`) and the ratio of the medians.
//!
//!   cargo bench --bench trace [-- --quick] [--json FILE]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Instant;

use pipec::runtime::{Outcome, Runner};
use pipec::store::RedbStore;
use serde_json::json;

fn chain(n: usize) -> String {
    let mut s = String::from(
        "type Step {\n  v: int\n}\n\ninput x: int\ninput doc: string = \"\"\n\nnode n0(x: int = input.x, doc: string = input.doc) -> Step {\n  return = { v: x }\n}\n\n",
    );
    for i in 1..n {
        s.push_str(&format!(
            "node n{i}(p: Step = n{}) -> Step {{\n  return = {{ v: p.v }}\n}}\n\n",
            i - 1
        ));
    }
    s.push_str(&format!("output last = n{}\n", n - 1));
    s
}

/// An OTLP/HTTP receiver that reads each request whole and answers 200: its base URL.
fn receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = l.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json_out = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let reps = if quick { 4 } else { 20 };
    let dir = std::env::var_os("BENCH_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("pipec-bench-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let endpoint = receiver();
    let env = |k: &str| match k {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(endpoint.clone()),
        "OTEL_EXPORTER_OTLP_PROTOCOL" => Some("http/protobuf".to_string()),
        _ => None,
    };
    let telemetry = pipec_telemetry::Telemetry::from_env(&env)
        .expect("telemetry")
        .expect("on");
    let plan = pipec::compile_str("chain.pipe", &chain(100)).expect("compiles");
    let mut off = Vec::new();
    let mut on = Vec::new();
    for r in 0..reps + 2 {
        // Alternate which goes first, so neither always follows the other.
        let order = if r % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for traced in order {
            let path = dir.join(format!("chain-{r}-{traced}.redb"));
            let _ = std::fs::remove_file(&path);
            let store = RedbStore::open(&path).expect("store");
            let mut runner = Runner::new(plan.clone(), store).project_root(&dir);
            if traced {
                runner = runner.spans(telemetry.sink());
            }
            let start = Instant::now();
            let out = rt.block_on(runner.start(json!({ "x": 1 }))).expect("runs");
            let took = ms(start.elapsed()) / 100.0;
            assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
            if r >= 2 {
                if traced { &mut on } else { &mut off }.push(took);
            }
        }
    }
    telemetry.shutdown(std::time::Duration::from_secs(5));
    let (off_median, off_p95) = stats(off.clone());
    let (on_median, on_p95) = stats(on.clone());
    println!(
        "{:<34} {:>5} {:>4} {:>12} {:>12}",
        "measurement", "unit", "n", "median", "p95"
    );
    for (id, m, p) in [
        ("chain100.return.step_ms", off_median, off_p95),
        ("chain100.return.traced.step_ms", on_median, on_p95),
    ] {
        println!("{id:<34} {:>5} {:>4} {m:>12.4} {p:>12.4}", "ms", off.len());
    }
    println!(
        "tracing on / off: {:.3}x (goal: at most 1.05x)",
        on_median / off_median
    );
    if let Some(path) = json_out {
        let doc = json!({ "results": [
            { "id": "chain100.return.step_ms", "unit": "ms", "median": off_median, "p95": off_p95, "n": off.len() },
            { "id": "chain100.return.traced.step_ms", "unit": "ms", "median": on_median, "p95": on_p95, "n": on.len() },
        ]});
        std::fs::write(path, doc.to_string()).expect("json");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
