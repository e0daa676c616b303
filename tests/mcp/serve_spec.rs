//! reShapr Resources specifications: the seed example loads with every field intact,
//! `pipec check` reads `.yaml` files beside `.pipe` files (exit codes, JSON), and mutated or
//! truncated specifications never panic the loader. The rules' own cases are UI cases
//! (`tests/ui/<rule>/*.yaml`).

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::rng::Rng;
use pipec::serve::{
    Annotations, Content, Icon, Service, SpecLoad, TemplateSource, load_spec_file, load_spec_text,
};
use pipec::source::SourceDb;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/serve")
        .join(name)
}

fn load(text: &str) -> (SourceDb, SpecLoad) {
    let mut db = SourceDb::default();
    let loaded = load_spec_text(&mut db, Path::new("spec.yaml"), "spec.yaml", text);
    (db, loaded)
}

fn codes(loaded: &SpecLoad) -> Vec<&'static str> {
    loaded.diagnostics.iter().map(|d| d.rule.code).collect()
}

fn pipec(args: &[&str], cwd: &Path) -> Output {
    Command::new(common::pipec_bin())
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .expect("pipec runs")
}

const HEADER: &str =
    "apiVersion: reshapr.io/v1alpha1\nkind: Resources\nservice:\n  name: S\n  version: '1'\n";

#[test]
fn the_seed_example_loads_with_every_field_intact() {
    let mut db = SourceDb::default();
    let path = fixture("open-meteo.yaml");
    let loaded = load_spec_file(&mut db, &path, "open-meteo.yaml");
    // The two `file:` icons are warned about, and nothing else is said.
    assert_eq!(codes(&loaded), ["P0814", "P0814"]);
    assert!(!loaded.has_errors());
    let catalogue = &loaded.catalogue;
    assert_eq!(
        catalogue.service,
        Some(Service {
            name: "Open-Meteo APIs".into(),
            version: "1.0".into(),
        })
    );

    assert_eq!(catalogue.resources.len(), 1);
    let readme = &catalogue.resources[0];
    assert_eq!(readme.uri, "file:///project/readme.md");
    assert_eq!(readme.meta.name, "README.MD");
    assert_eq!(readme.meta.title.as_deref(), Some("Open-Meteo APIs readme"));
    assert_eq!(
        readme.meta.description.as_deref(),
        Some("Documentation on how to use the Open-Meteo APIs")
    );
    assert_eq!(readme.meta.mime_type.as_deref(), Some("text/plain"));
    assert_eq!(readme.meta.size, None);
    assert_eq!(
        readme.meta.icons,
        [Icon {
            src: "file:///assets/icons/md-file-icon.png".into(),
            mime_type: Some("image/png".into()),
            sizes: vec!["48x48".into()],
        }]
    );
    assert_eq!(
        readme.meta.annotations,
        Some(Annotations {
            audience: vec!["user".into()],
            priority: Some(0.8),
            last_modified: None,
        })
    );
    assert_eq!(
        readme.content,
        Some(Content::Text(
            "## Hello World\nWelcome to Open-Meteo API!\nBla, bla, bla\n".into()
        ))
    );
    let (file, span) = readme.at.expect("a place");
    let source = db.get(file);
    assert_eq!(source.slice(span), "'file:///project/readme.md'");
    assert_eq!(source.line_col(span.start), (7, 3));

    assert_eq!(catalogue.templates.len(), 1);
    let files = &catalogue.templates[0];
    assert_eq!(files.uri_template, "file:///project/src/{path}?mode=raw");
    assert_eq!(files.meta.name, "Project Source File");
    assert_eq!(files.meta.title.as_deref(), Some("📁 Project Files"));
    assert_eq!(
        files.meta.description.as_deref(),
        Some("Access files in the project directory")
    );
    assert_eq!(
        files.meta.mime_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(
        files.meta.icons,
        [Icon {
            src: "file:///assets/icons/folder-icon.png".into(),
            mime_type: Some("image/png".into()),
            sizes: vec!["48x48".into()],
        }]
    );
    assert_eq!(files.meta.annotations, None);
    assert_eq!(files.source, TemplateSource::Backend(None));
    let (file, span) = files.at.expect("a place");
    assert_eq!(db.get(file).line_col(span.start), (26, 3));
}

#[test]
fn blobs_are_decoded_at_load_and_remote_content_and_sizes_are_kept() {
    let text = format!(
        "{HEADER}resources:\n  'file:///logo.png':\n    name: Logo\n    size: 5\n    blob: |\n      aGVs\n      bG8=\n  'https://example.com/doc':\n    name: Doc\n    remoteContent: https://example.com/doc.md\n    annotations:\n      lastModified: 2025-01-12T15:00:58Z\n  'file:///empty':\n    name: Empty\n"
    );
    let (_, loaded) = load(&text);
    assert!(loaded.diagnostics.is_empty(), "{:?}", codes(&loaded));
    let resources = &loaded.catalogue.resources;
    assert_eq!(resources[0].content, Some(Content::Blob(b"hello".to_vec())));
    assert_eq!(resources[0].meta.size, Some(5));
    assert_eq!(
        resources[1].content,
        Some(Content::Remote("https://example.com/doc.md".into()))
    );
    assert_eq!(
        resources[1]
            .meta
            .annotations
            .as_ref()
            .and_then(|a| a.last_modified.as_deref()),
        Some("2025-01-12T15:00:58Z")
    );
    // Declared without content: served as an error on read, never as an empty text.
    assert_eq!(resources[2].content, None);
}

#[test]
fn plain_scalars_are_texts_where_texts_go_and_unknown_keys_are_tolerated() {
    let text = "apiVersion: reshapr.io/v1alpha1\nkind: Resources\nservice:\n  name: S\n  version: 1.0\nresources:\n  'ui://charts/weekly':\n    name: 2024\n    tools: [forecast]\n    text: yes\n";
    let (_, loaded) = load(text);
    assert_eq!(codes(&loaded), ["P0813"]);
    assert!(!loaded.has_errors());
    assert_eq!(
        loaded
            .catalogue
            .service
            .as_ref()
            .map(|s| s.version.as_str()),
        Some("1.0")
    );
    let chart = &loaded.catalogue.resources[0];
    assert_eq!(chart.meta.name, "2024");
    assert_eq!(chart.content, Some(Content::Text("yes".into())));
}

#[test]
fn every_error_of_one_file_is_reported_in_one_load() {
    let text = "apiVersion: reshapr.io/v2\nkind: Resource\nresources:\n  'readme.md':\n    title: x\n  'file:///a':\n    name: a\n    text: a\n    blob: '!!'\nresourceTemplates:\n  'file:///b':\n    name: b\n  'file:///c/{p}':\n    name: c\n    blob: aGVsbG8=\n";
    let (_, loaded) = load(text);
    let mut found = codes(&loaded);
    found.sort();
    found.dedup();
    assert_eq!(
        found,
        [
            "P0802", "P0803", "P0804", "P0805", "P0806", "P0807", "P0808", "P0810"
        ]
    );
    assert!(loaded.has_errors());
    // Nothing invalid is served.
    assert!(loaded.catalogue.resources.is_empty());
    assert!(loaded.catalogue.templates.is_empty());
}

#[test]
fn pipec_check_on_the_seed_example_exits_0_with_its_warnings() {
    let dir = fixture("");
    let out = pipec(&["check", "open-meteo.yaml"], &dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.matches("P0814 file-icon-source").count(), 2, "{text}");
    assert!(text.contains("open-meteo.yaml:13:14"), "{text}");
    assert!(text.ends_with("2 warnings\n"), "{text}");
    let denied = pipec(&["check", "--deny", "warnings", "open-meteo.yaml"], &dir);
    assert_eq!(denied.status.code(), Some(1));
}

#[test]
fn pipec_check_reads_pipe_and_spec_files_in_one_run() {
    let project = common::Project::new("serve-spec");
    let pipe = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ui/unknown-setting/pass.pipe");
    std::fs::copy(&pipe, project.dir.join("a.pipe")).expect("copy");
    std::fs::copy(fixture("open-meteo.yaml"), project.dir.join("spec.YML")).expect("copy");
    project.write(
        "bad.yaml",
        &format!(
            "{HEADER}resources:\n  'file:///x':\n    name: x\n    annotations:\n      priority: 2\n"
        ),
    );
    let clean = pipec(&["check", "a.pipe", "spec.YML"], &project.dir);
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&clean.stdout)
    );
    let out = pipec(
        &[
            "check", "--format", "json", "a.pipe", "spec.YML", "bad.yaml",
        ],
        &project.dir,
    );
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let diagnostics = json["diagnostics"].as_array().cloned().unwrap_or_default();
    let found: Vec<(String, String, u64, u64)> = diagnostics
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or("").to_string(),
                d["file"].as_str().unwrap_or("").to_string(),
                d["line"].as_u64().unwrap_or(0),
                d["column"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("P0814".to_string(), "spec.YML".to_string(), 13, 14),
            ("P0814".to_string(), "spec.YML".to_string(), 32, 14),
            ("P0809".to_string(), "bad.yaml".to_string(), 10, 17),
        ]
    );
    assert_eq!(json["summary"]["errors"], 1);
    assert_eq!(json["summary"]["warnings"], 2);
}

/// xorshift64*: deterministic mutations.
const PIECES: &[&str] = &[
    ":",
    ": ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    "'",
    "\"",
    ",",
    "&a ",
    "*a",
    "!!str ",
    "!!binary ",
    "\t",
    "é",
    "📁",
    "\n",
    "---\n",
    "? ",
    "|",
    ">-",
    "{+x}",
    "{?a,b}",
    "{#f}",
    "%",
    "=",
    "~",
    "null",
    "  ",
    "#",
    "file:",
    "1e999",
    "-0.5",
    "\\u0000",
    "&b [*a, *a, *a]",
];

fn seeds() -> Vec<String> {
    let mut out = vec![std::fs::read_to_string(fixture("open-meteo.yaml")).expect("the seed")];
    let ui = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&ui)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    dirs.sort();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            if f.extension().is_some_and(|e| e == "yaml")
                && let Ok(text) = std::fs::read_to_string(&f)
            {
                out.push(text);
            }
        }
    }
    out
}

fn boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut s = text.to_string();
    for _ in 0..1 + rng.below(4) {
        let at = boundary(&s, rng.below(s.len() + 1));
        match rng.below(5) {
            0 => s.truncate(at),
            1 => {
                let end = boundary(&s, at + rng.below(20));
                s.replace_range(at..end, "");
            }
            2 => s.insert_str(at, PIECES[rng.below(PIECES.len())]),
            3 => {
                // A line repeated: repeated keys, deeper or shallower indentation.
                let start = s[..at].rfind('\n').map_or(0, |i| i + 1);
                let end = s[at..].find('\n').map_or(s.len(), |i| at + i);
                let line = format!("{}\n", &s[start..end]);
                s.insert_str(start, &line);
            }
            _ => {
                let end = boundary(&s, at + rng.below(8));
                let piece = PIECES[rng.below(PIECES.len())];
                s.replace_range(at..end, piece);
            }
        }
    }
    s
}

#[test]
fn mutated_and_truncated_specifications_never_panic_and_spans_lie_on_char_boundaries() {
    let iterations: usize = std::env::var("PIPEC_FUZZ_ITERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3000);
    let seeds = seeds();
    assert!(seeds.len() > 20, "the seed and the UI cases");
    let mut rng = Rng(0x5eed_5bec_0000_0001);
    // Every truncation of the seed, then random mutations of every case.
    let seed = &seeds[0];
    let mut inputs: Vec<String> = seed
        .char_indices()
        .map(|(i, _)| seed[..i].to_string())
        .collect();
    for i in 0..iterations {
        inputs.push(mutate(&mut rng, &seeds[i % seeds.len()]));
    }
    for input in &inputs {
        let result = catch_unwind(AssertUnwindSafe(|| load(input)));
        let Ok((db, loaded)) = result else {
            let _ = std::fs::write(
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failure.yaml"),
                input,
            );
            panic!("the loader panicked on target/fuzz-failure.yaml:\n{input}");
        };
        for d in &loaded.diagnostics {
            for label in d.primary.iter().chain(d.secondary.iter()) {
                let text = &db.get(label.file).text;
                let (start, end) = (label.span.start as usize, label.span.end as usize);
                assert!(
                    start <= end && end <= text.len(),
                    "{} outside the text of:\n{input}",
                    d.rule.code
                );
                assert!(
                    text.is_char_boundary(start) && text.is_char_boundary(end),
                    "{} off a char boundary in:\n{input}",
                    d.rule.code
                );
            }
        }
    }
}
