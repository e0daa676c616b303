//! `pipec init` and `pipec completions` through the real binary: a new project checks
//! clean, runs offline to its gate and on to its outputs, and is never written over; the
//! completion scripts come out for each shell, and an unknown shell is an error naming
//! the closest one.

use crate::common;

use common::{Project, code, json, stderr, stdout, thread_of};

#[test]
fn a_new_project_checks_clean_and_runs_offline_through_its_gate() {
    let p = Project::new("init-new");
    let out = p.run(&["init", "app"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for f in [
        "hello.pipe",
        "prompts/hello/draft.jinja",
        "replies/hello.json",
        ".gitignore",
    ] {
        assert!(p.dir.join("app").join(f).is_file(), "{f} is made");
    }
    assert!(p.read("app/.gitignore").contains(".pipec/"));
    let app = Project {
        dir: p.dir.join("app"),
        pg: None,
    };
    let check = app.run(&["check", "--deny", "warnings", "hello.pipe"]);
    assert_eq!(code(&check), 0, "{}", stdout(&check));
    let fmt = app.run(&["fmt", "--check", "hello.pipe"]);
    assert_eq!(code(&fmt), 0, "the new file is formatted: {}", stdout(&fmt));
    // Its test passes, offline.
    let test = app.run(&["test"]);
    assert_eq!(code(&test), 0, "{}{}", stdout(&test), stderr(&test));
    assert!(
        stdout(&test).contains("hello.pipe::approved_greeting ... ok"),
        "{}",
        stdout(&test)
    );
    // To the gate, then on in a new process.
    let run = app.run(&["run", "hello.pipe", "--input", "name=Ada"]);
    let said = format!("{}{}", stdout(&run), stderr(&run));
    assert!(said.contains("review"), "it stops at the gate: {said}");
    let thread = thread_of(&said).expect("a thread");
    let resume = app.run(&[
        "resume",
        &thread,
        "--answer",
        r#"review={"approved": true}"#,
    ]);
    assert_eq!(code(&resume), 0, "{}", stderr(&resume));
    let outputs = json(&stdout(&resume));
    assert_eq!(outputs["result"]["text"], "Hello Ada, good to see you!");
    assert_eq!(outputs["result"]["sent"], true);
}

#[test]
fn a_new_projects_pipeline_opens_with_the_files_documentation() {
    let p = Project::new("init-doc");
    assert_eq!(code(&p.run(&["init", "."])), 0);
    assert!(
        p.read("hello.pipe").starts_with("//! A first pipeline"),
        "{}",
        p.read("hello.pipe")
    );
    let out = p.run(&["compile", "hello.pipe"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let plan = json(&stdout(&out));
    assert!(
        plan["doc"]
            .as_str()
            .is_some_and(|d| d.starts_with("A first pipeline")),
        "the pipeline's doc: {}",
        plan["doc"]
    );
}

#[test]
fn init_writes_nothing_where_one_of_its_files_exists() {
    let p = Project::new("init-refuse");
    p.write("replies/hello.json", "mine");
    let out = p.run(&["init", "."]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("replies/hello.json"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("nothing was written"));
    assert_eq!(p.read("replies/hello.json"), "mine", "not overwritten");
    assert!(
        !p.dir.join("hello.pipe").exists(),
        "and nothing else written"
    );
    p.write("a-file", "x");
    let out = p.run(&["init", "a-file"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("is a file"));
}

#[test]
fn completion_scripts_for_each_shell_and_did_you_mean_for_others() {
    let p = Project::new("completions");
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef pipec"),
        ("fish", "complete -c pipec"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = p.run(&["completions", shell]);
        assert_eq!(code(&out), 0, "{shell}");
        let script = stdout(&out);
        assert!(
            script.contains(marker),
            "{shell}: {}",
            &script[..script.len().min(300)]
        );
        assert!(
            script.contains("serve") && script.contains("resume"),
            "{shell} knows the commands"
        );
    }
    let out = p.run(&["completions", "bsh"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("bash"), "{}", stderr(&out));
}
