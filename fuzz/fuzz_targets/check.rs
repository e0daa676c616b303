//! Any bytes as a `.pipe` file: check, lower, format. Must never panic, and every
//! diagnostic span must lie on char boundaries of its file.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pipec::source::MemoryLoader;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let loader = MemoryLoader::new().with("p/x.pipe", text);
    let analysis = pipec::analyze(&loader, Path::new("p/x.pipe"), "x.pipe");
    for d in &analysis.diagnostics {
        for l in d.primary.iter().chain(d.secondary.iter()) {
            let t = &analysis.db.get(l.file).text;
            assert!(t.is_char_boundary(l.span.start as usize) && t.is_char_boundary(l.span.end as usize));
        }
    }
    if let Ok(plan) = pipec::lower_analysis(analysis, Path::new("p/x.pipe")) {
        assert_eq!(pipec::Plan::from_json(&plan.to_json()).as_ref(), Ok(&plan));
    }
    let _ = pipec::syntax::format_source(text);
});
