//! The plan a thread was started with, read back from the store. pipec wrote it, so a
//! copy that does not load is damage to the store (R0410, naming the store), not a plan
//! to compile again; only a plan format this pipec does not read is R0004.

use super::RuntimeError;
use pipec_diagnostic as codes;
use pipec_plan::{Plan, PlanLoadError};
use pipec_store::{Store, ThreadRec};

/// The plan stored under `thread.plan_hash`.
pub async fn stored_plan(store: &dyn Store, thread: &ThreadRec) -> Result<Plan, RuntimeError> {
    let hash = &thread.plan_hash;
    let Some(json) = store.get_plan(hash).await? else {
        return Err(RuntimeError::new(
            &codes::STORE_UNREADABLE,
            format!(
                "the store {} has no copy of the plan {hash} of thread {}",
                store.location(),
                thread.id
            ),
        )
        .help(DAMAGED_HELP));
    };
    decode(&json, hash, &thread.id, &store.location())
}

const DAMAGED_HELP: &str =
    "`pipec store check` says what else is damaged; restore the store from a backup";

/// The stored text of the plan `hash` of thread `id`, as a plan.
fn decode(json: &str, hash: &str, id: &str, store: &str) -> Result<Plan, RuntimeError> {
    let damaged = |why: String| {
        RuntimeError::new(
            &codes::STORE_UNREADABLE,
            format!("the plan {hash} of thread {id} in the store {store} is damaged: {why}"),
        )
        .help(DAMAGED_HELP)
    };
    match Plan::from_json(json) {
        Ok(plan) if plan.hash == hash => Ok(plan),
        Ok(plan) => Err(damaged(format!("it is the plan {}", plan.hash))),
        Err(e @ PlanLoadError::FormatVersionUnsupported { .. }) => Err(RuntimeError::new(
            e.rule(),
            format!("the stored plan of thread {id} cannot be used: {e}"),
        )
        .help("continue the thread with the pipec that started it, or a newer one")),
        Err(e) => Err(damaged(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        pipec_check::compile_str(
            "p.pipe",
            "type S {\n  v: int\n}\n\ninput x: int\n\nnode a(x: int = input.x) -> S {\n  return = { v: x }\n}\n\noutput y = a\n",
        )
        .expect("plan")
    }

    #[test]
    fn a_stored_plan_that_does_not_load_is_damage_to_the_store_it_names() {
        let plan = plan();
        let json = plan.to_json();
        let ok = decode(&json, &plan.hash, "T1", "/s/runs.redb").expect("loads");
        assert_eq!(ok.hash, plan.hash);
        for (text, what) in [
            (json[..json.len() / 2].to_string(), "cut short"),
            (json.replace("\"a\"", "\"b\""), "edited"),
        ] {
            let e = decode(&text, &plan.hash, "T1", "/s/runs.redb").expect_err(what);
            assert!(e.is(&codes::STORE_UNREADABLE), "{what}: {e}");
            assert!(
                e.message.contains("/s/runs.redb") && e.message.contains("T1"),
                "{e}"
            );
        }
        let e = decode(&json, "sha256:other", "T1", "/s/runs.redb").expect_err("another");
        assert!(e.is(&codes::STORE_UNREADABLE), "{e}");
        let mut value: serde_json::Value = serde_json::from_str(&json).expect("json");
        value["format_version"] = 999.into();
        let newer = value.to_string();
        let e = decode(&newer, &plan.hash, "T1", "/s/runs.redb").expect_err("newer");
        assert!(e.is(&codes::PLAN_INVALID), "{e}");
    }
}
