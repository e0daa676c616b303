//! `check` on synthetic pipelines of 100, 1,000 and 10,000 nodes: the time of a whole
//! check (parse, resolve, types, prompts, graph, lints) from source text, and how it
//! grows with size. Run with `cargo bench --bench check`.

use std::path::Path;
use std::time::{Duration, Instant};

use pipec::source::MemoryLoader;

fn time_check(nodes: usize, rounds: usize) -> (Duration, usize) {
    let text = pipec::synth::pipeline(nodes);
    // The program the synthetic pipeline's `exec` nodes run: the check looks it up.
    let loader = MemoryLoader::new()
        .with("bench.pipe", text.clone())
        .with("score.sh", "#!/bin/sh\ncat\n");
    let mut best = Duration::MAX;
    let mut diags = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        let analysis = pipec::analyze(&loader, Path::new("bench.pipe"), "bench.pipe");
        let took = start.elapsed();
        diags = analysis.diagnostics.len();
        best = best.min(took);
        std::hint::black_box(analysis);
    }
    (best, diags)
}

fn main() {
    let sizes = [(100, 20), (1_000, 10), (10_000, 5)];
    let mut results = Vec::new();
    println!(
        "{:>8} {:>10} {:>12} {:>12}",
        "nodes", "bytes", "check (best)", "per node"
    );
    for (n, rounds) in sizes {
        let bytes = pipec::synth::pipeline(n).len();
        let (t, diags) = time_check(n, rounds);
        assert_eq!(diags, 0, "the synthetic pipeline must check clean");
        println!(
            "{:>8} {:>10} {:>10.2}ms {:>10.2}µs",
            n,
            bytes,
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e6 / n as f64
        );
        results.push((n, t));
    }
    for w in results.windows(2) {
        let ratio = w[1].1.as_secs_f64() / w[0].1.as_secs_f64();
        println!(
            "{} → {} nodes: {:.2}× the time (linear is 10×)",
            w[0].0, w[1].0, ratio
        );
    }
}
