//! `pipec answer THREAD gate=JSON`: answer pending gates without taking the thread (so it
//! works while another process runs it).

use std::path::PathBuf;

use super::common;
use crate::store::Store;

#[derive(clap::Args)]
pub struct Args {
    thread: String,
    /// `gate=JSON`, `gate=@file.json`, `gate=-`
    #[arg(required = true, value_name = "GATE=JSON")]
    answers: Vec<String>,
    #[arg(long)]
    store: Option<PathBuf>,
}

pub fn run(args: Args) -> u8 {
    let store_path = common::store_path(&args.store, &common::default_root());
    let answers = match common::parse_answers(&args.answers) {
        Ok(a) => a,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    let (rt, store) = match common::runtime_and_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let result = rt.block_on(async {
        let state = store.load(&args.thread).await?;
        let Some(rec) = state.thread else {
            return Ok(Err("no such thread".to_string()));
        };
        // Validate against the thread's plan before writing anything.
        if let Some(json) = store.get_plan(&rec.plan_hash).await? {
            let plan = match crate::plan::Plan::from_json(&json) {
                Ok(plan) => plan,
                Err(e) => {
                    return Ok(Err(format!(
                        "error[{}]: the stored plan of thread {} cannot be used: {e}",
                        e.code(),
                        rec.id
                    )));
                }
            };
            let validators = crate::runtime::validate::Validators::new(&plan);
            for (gate, answer) in &answers {
                let Some(g) = state.gates.get(gate) else {
                    let pending: Vec<&String> = state
                        .gates
                        .iter()
                        .filter(|(_, g)| g.state == crate::store::GateState::Pending)
                        .map(|(n, _)| n)
                        .collect();
                    return Ok(Err(format!(
                        "error[R0301]: no gate `{gate}` is waiting; pending: {}",
                        pending
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                };
                let node = plan.node(&g.node);
                if let Some(node) = node
                    && let Err(e) = validators.check(&node.output, answer, false)
                {
                    return Ok(Err(format!(
                        "error[R0301]: the answer to `{gate}` does not fit `{}`: {e}",
                        node.output_type
                    )));
                }
            }
        }
        store.answer(&rec.id, answers, "cli").await?;
        Ok::<_, crate::store::StoreError>(Ok(rec.id))
    });
    match result {
        Ok(Ok(id)) => {
            super::err(&format!(
                "answered; `pipec resume {id}` continues the thread"
            ));
            super::EXIT_OK
        }
        Ok(Err(msg)) => {
            super::err(&msg);
            super::EXIT_FINDINGS
        }
        Err(e) => {
            common::print_error(&e.into());
            super::EXIT_FINDINGS
        }
    }
}
