//! `pipec lsp` on a 1,000-node pipeline: the time from a keystroke (`didChange`, one
//! character inserted or deleted) to the `publishDiagnostics` for that version, over
//! 1,000 keystrokes that make and fix an error by turns, and the server's resident memory
//! before and after them. Run with `cargo bench --bench lsp`.

#![allow(clippy::unwrap_used)]

#[path = "../tests/common/lsp_client.rs"]
mod lsp_client;

use std::time::{Duration, Instant};

use lsp_client::{LspClient, file_uri, rss_kib};

const NODES: usize = 1_000;
const EDITS: usize = 1_000;
const WARMUP: usize = 50;

fn main() {
    let dir = std::env::temp_dir().join(format!("pipec-bench-lsp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = pipec::synth::pipeline(NODES);
    let path = dir.join("bench.pipe");
    std::fs::write(&path, &text).unwrap();
    // The program the synthetic pipeline's `exec` nodes run: the check looks it up.
    let script = dir.join("score.sh");
    std::fs::write(&script, "#!/bin/sh\ncat\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let uri = file_uri(&path);

    let mut client = LspClient::start(env!("CARGO_BIN_EXE_pipec"), &dir);
    client.open(&uri, &text);
    let first = client.diagnostics(&uri);
    assert!(
        first.is_empty(),
        "the synthetic pipeline must check clean: {} diagnostics, the first {:?}",
        first.len(),
        first.first()
    );

    // The keystroke: an `x` typed after the first `model = fast` of a node (an unknown
    // name, P0101), then deleted (clean again).
    let at = text.find("  model = fast\n").unwrap() + "  model = fast".len();
    let line = text[..at].matches('\n').count() as u32;
    let col = (at - text[..at].rfind('\n').map_or(0, |i| i + 1)) as u32;

    let mut version = 1i64;
    let mut latencies = Vec::with_capacity(EDITS);
    let mut rss_before = 0;
    for i in 0..WARMUP + EDITS {
        if i == WARMUP {
            rss_before = rss_kib(client.pid()).unwrap_or(0);
        }
        version += 1;
        let typed = i % 2 == 0;
        let start = Instant::now();
        if typed {
            client.change_range(&uri, version, (line, col), (line, col), "x");
        } else {
            client.change_range(&uri, version, (line, col), (line, col + 1), "");
        }
        let msg = client.wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri.as_str()
                && m["params"]["version"] == version
        });
        let took = start.elapsed();
        let count = msg["params"]["diagnostics"].as_array().map_or(0, Vec::len);
        assert_eq!(count, usize::from(typed), "version {version}: {msg}");
        if i >= WARMUP {
            latencies.push(took);
        }
    }
    let rss_after = rss_kib(client.pid()).unwrap_or(0);
    let status = client.shutdown();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);

    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p) as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{NODES} nodes ({} bytes), {EDITS} keystrokes, debounce {} ms",
        text.len(),
        pipec::lsp::DEBOUNCE.as_millis()
    );
    println!(
        "change → publishDiagnostics: median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        ms(pct(0.5)),
        ms(pct(0.9)),
        ms(pct(1.0))
    );
    println!(
        "server RSS: {:.1} MiB after {WARMUP} keystrokes, {:.1} MiB after {} more ({:+.1} MiB)",
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        EDITS,
        (rss_after as f64 - rss_before as f64) / 1024.0
    );
}
