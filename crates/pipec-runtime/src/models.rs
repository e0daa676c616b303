//! The model instances of an attempt: a model the embedding program registered wins,
//! then a `--model NAME=scripted:FILE` override recorded on the thread, then what the
//! plan declares (an OpenAI-compatible endpoint, or a scripted replies file).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::RuntimeError;
use crate::llm::{Model, OpenAiModel, ScriptedModel};
use pipec_diagnostic as codes;
use pipec_plan::{Body, ConfigValue, Plan};

/// Every model the nodes in `to_run` (all nodes when `None`) call, built.
pub(crate) fn build(
    plan: &Plan,
    to_run: Option<&BTreeSet<String>>,
    registered: &HashMap<String, Arc<dyn Model>>,
    overrides: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, String>,
    config: &BTreeMap<String, String>,
    project_root: &Path,
) -> Result<HashMap<String, Arc<dyn Model>>, RuntimeError> {
    let mut out: HashMap<String, Arc<dyn Model>> = HashMap::new();
    let servers = crate::config::servers_used(plan, to_run);
    let used: BTreeSet<String> = plan
        .nodes
        .iter()
        .filter(|n| to_run.is_none_or(|set| set.contains(&n.name)))
        .filter_map(|n| match &n.body {
            Body::Model { model, .. } => Some(model.clone()),
            _ => None,
        })
        // And the models that answer the sampling requests of the servers they use.
        .chain(
            plan.servers
                .iter()
                .filter(|s| servers.contains(&s.name))
                .filter_map(|s| s.sampling.clone()),
        )
        .collect();
    let bad = |m: String| RuntimeError::new(&codes::CONFIG_MISSING, m);
    for name in used {
        if let Some(m) = registered.get(&name) {
            out.insert(name, m.clone());
            continue;
        }
        if let Some(spec) = overrides.get(&name) {
            let Some(file) = spec.strip_prefix("scripted:") else {
                return Err(RuntimeError::new(
                    &codes::OPTION_INVALID,
                    format!("`{spec}` is not a model override; write `scripted:FILE`"),
                ));
            };
            out.insert(
                name.clone(),
                Arc::new(ScriptedModel::from_file(&name, &PathBuf::from(file)).map_err(bad)?),
            );
            continue;
        }
        let Some(decl) = plan.models.iter().find(|m| m.name == name) else {
            return Err(RuntimeError::new(
                &codes::INTERNAL_ERROR,
                format!("the plan declares no model `{name}`, which a node calls"),
            ));
        };
        let resolve = |v: &Option<ConfigValue>| -> Option<String> {
            match v {
                Some(ConfigValue::Literal { value }) => Some(value.clone()),
                Some(ConfigValue::Env { var, default }) => {
                    config.get(var).cloned().or_else(|| default.clone())
                }
                Some(ConfigValue::Secret { var }) => secrets.get(var).cloned(),
                None => None,
            }
        };
        let model: Arc<dyn Model> = match decl.provider.as_str() {
            "client" => Arc::new(crate::llm::ClientModel {
                hint: decl.model.clone(),
                temperature: decl.temperature,
                max_tokens: decl.max_tokens,
            }),
            "scripted" => {
                let file = decl.replies.clone().unwrap_or_default();
                Arc::new(ScriptedModel::from_file(&name, &project_root.join(file)).map_err(bad)?)
            }
            _ => {
                let m = OpenAiModel::new(
                    resolve(&decl.base_url).as_deref(),
                    resolve(&decl.api_key),
                    decl.model.as_deref().unwrap_or(""),
                )
                .map_err(bad)?;
                Arc::new(
                    m.with_settings(
                        decl.temperature,
                        decl.max_tokens,
                        decl.retries,
                        decl.timeout_ms,
                        &decl.extra,
                    )
                    .max_reply_bytes(
                        decl.max_reply_bytes
                            .unwrap_or(crate::llm::DEFAULT_MAX_REPLY_BYTES),
                    ),
                )
            }
        };
        out.insert(name, model);
    }
    Ok(out)
}
