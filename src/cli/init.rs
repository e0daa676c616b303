//! `pipec init [DIR]`: a new project that checks clean and runs offline at once — a
//! pipeline in which a model (the scripted provider, with its replies file) drafts a
//! greeting, a person approves it at a gate, and a node returns both; its prompt; and a
//! `.gitignore` for the store. Nothing is overwritten: when any of the files exists,
//! nothing is written.

use std::path::{Path, PathBuf};

use super::{EXIT_OK, EXIT_USAGE};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The project's folder (made when missing; default: the current folder)
    #[arg(default_value = ".")]
    dir: PathBuf,
}

const PIPELINE: &str = r#"//! A first pipeline: a model drafts a greeting, a person approves it, and the last node
//! returns the greeting with the answer.

model writer {
  provider = "scripted"
  replies = "replies/hello.json"
}

type Draft {
  text: string
}

type Approval {
  approved: bool
}

input name: string

think draft(name: string = input.name) -> Draft {
  model = writer
  prompt = file("hello/draft")
}

gate review(draft: Draft = draft) -> Approval {
  message = "Send \"{{ draft.text }}\"?"
}

node result(draft: Draft = draft, review: Approval = review) -> { text: string, sent: bool } {
  return = { text: draft.text, sent: review.approved }
}

output result = result

/// `pipec test` runs this: the greeting approved comes back as sent.
test approved_greeting {
  input = { name: "Ada" }
  answers = { review: { approved: true } }
  expect = [output.result == { text: "Hello Ada, good to see you!", sent: true }]
}
"#;

const PROMPT: &str = r#"{{ role("system") }}
You write short, friendly greetings. Answer with JSON matching this schema:
{{ output_schema }}

{{ role("user") }}
Greet {{ name }} in one line.
"#;

const REPLIES: &str = r#"{
  "draft": [
    { "template": { "text": "Hello {{ name }}, good to see you!" } }
  ]
}
"#;

const GITIGNORE: &str = "# pipec's store of runs\n.pipec/\n";

/// The files of a new project, by path inside its folder.
fn files() -> [(&'static str, &'static str); 4] {
    [
        ("hello.pipe", PIPELINE),
        ("prompts/hello/draft.jinja", PROMPT),
        ("replies/hello.json", REPLIES),
        (".gitignore", GITIGNORE),
    ]
}

pub(super) fn run(args: Args) -> u8 {
    match init(&args.dir) {
        Ok(written) => {
            let shown = args.dir.display().to_string();
            let mut text = format!("made a pipec project in {shown}:\n");
            for w in &written {
                text.push_str(&format!("  {w}\n"));
            }
            let cd = if shown == "." {
                String::new()
            } else {
                format!("cd {shown} && ")
            };
            text.push_str(&format!(
                "\nrun it:\n  {cd}pipec run hello.pipe --input name=Ada\nit stops at the gate `review`; the run says how to answer it with `pipec resume`.\ntest it:\n  {cd}pipec test\n"
            ));
            super::out(&text);
            EXIT_OK
        }
        Err(e) => {
            super::err(&format!("error: {e}"));
            EXIT_USAGE
        }
    }
}

/// Writes the project's files into `dir`, or none of them when one is there already.
fn init(dir: &Path) -> Result<Vec<String>, String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{} is a file, not a folder", dir.display()));
    }
    let existing: Vec<&str> = files()
        .iter()
        .filter(|(rel, _)| dir.join(rel).exists())
        .map(|(rel, _)| *rel)
        .collect();
    if !existing.is_empty() {
        return Err(format!(
            "{} already has {}; nothing was written (init in another folder, or move them away)",
            dir.display(),
            existing.join(", ")
        ));
    }
    let mut written = Vec::new();
    for (rel, text) in files() {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
        }
        // `create_new`: a file that appeared meanwhile is not overwritten either.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        std::io::Write::write_all(&mut file, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(rel.to_string());
    }
    Ok(written)
}
