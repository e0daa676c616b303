//! Pieces parsed in runs parse to exactly what they parse to one by one: the same
//! declarations, doc comments, diagnostics and broken names, for every `.pipe` file of
//! the repository and for the cases where a run could differ.

use super::{RUN, parse_in_runs};
use pipec_base::source::FileId;

/// Everything a parse gives, as text (a diagnostic has no equality of its own).
fn parsed(text: &str, run: usize) -> String {
    let p = parse_in_runs(FileId(0), text, run);
    format!(
        "{:#?}\n{:#?}\n{:#?}\n{:#?}",
        p.file, p.comments, p.diagnostics, p.broken
    )
}

fn same_in_runs(name: &str, text: &str) {
    let alone = parsed(text, 1);
    for run in [2, 3, RUN] {
        assert_eq!(
            parsed(text, run),
            alone,
            "`{name}` parses differently in runs of {run}"
        );
    }
}

fn pipe_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        if path.is_dir() && name != "target" && name != ".git" && name != "node_modules" {
            pipe_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "pipe") {
            out.push(path);
        }
    }
}

#[test]
fn every_pipe_file_of_the_repository_parses_the_same_in_runs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    pipe_files(&root, &mut files);
    assert!(files.len() > 50, "found {} .pipe files", files.len());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        same_in_runs(&f.display().to_string(), &text);
    }
}

#[test]
fn a_doc_comment_left_at_the_end_of_a_piece_stays_stray() {
    // The blank line keeps the doc comment out of `b`'s piece: alone, `a`'s piece ends
    // with it, unattached; in one run it would document `b`.
    let text = "input x: int\n\nnode a(x: int = input.x) -> int {\n  return = x\n}\n/// left behind\n\nnode b(p: int = a) -> int {\n  return = p\n}\n\noutput b = b\n";
    let alone = parse_in_runs(FileId(0), text, 1);
    assert_eq!(alone.file.stray_docs.len(), 1, "{:#?}", alone.file);
    same_in_runs("stray doc", text);
}

#[test]
fn a_declaration_keyword_at_the_start_of_a_line_inside_brackets_parses_as_alone() {
    // A line that starts like a declaration inside a bracket or a raw string: where the
    // file is cut there, a run must not join what the pieces make of it alone.
    let texts = [
        "node a(x: int = 1) -> { v: int } {\n  return = {\nv: x }\n}\n\nnode b(p: int = 2) -> int {\n  return = p\n}\n",
        "think a(x: string = \"q\") -> string {\n  model = m\n  prompt = #\"\nnode b is not a node\ninput y: int\n\"#\n}\n\nnode c(p: int = 2) -> int {\n  return = p\n}\n",
        "node a(x: int = 1) -> {\ninput: string\n} {\n  return = { input: \"x\" }\n}\n\nnode b(p: int = 2) -> int {\n  return = p\n}\n",
        "type T {\n  a: int\ntype b: int\n}\n\nnode n(p: int = 2) -> int {\n  return = p\n}\n",
    ];
    for (k, text) in texts.iter().enumerate() {
        same_in_runs(&format!("case {k}"), text);
    }
}

#[test]
fn errors_and_bad_literals_amid_a_run_are_told_as_alone() {
    let mut text = String::new();
    for i in 0..40 {
        text.push_str(&format!(
            "node n{i}(p: int = {i}) -> int {{\n  return = p\n}}\n\n"
        ));
        if i == 7 {
            text.push_str("node broken(p: int = ) -> int {\n  return = p\n}\n\n");
        }
        if i == 20 {
            text.push_str("node odd(p: int = 12qq) -> int {\n  return = p\n}\n\n");
        }
        if i == 30 {
            text.push_str("/// a doc\nnode documented(p: int = 1) -> int {\n  return = p\n}\n\n");
        }
    }
    let alone = parse_in_runs(FileId(0), &text, 1);
    assert_eq!(alone.diagnostics.len(), 2, "{:#?}", alone.diagnostics);
    same_in_runs("errors amid a run", &text);
}
