//! Every rule, registered with one line, and the passes that run.

use super::Pass;
use super::rules as r;
use crate::diagnostic::Rule;

/// Every diagnostic pipec reports before a run, by code.
pub static ALL_RULES: &[&Rule] = &[
    &r::SYNTAX_ERROR,
    &r::INVALID_LITERAL,
    &r::DANGLING_DOC_COMMENT,
    &r::UNKNOWN_NAME,
    &r::DUPLICATE_DECLARATION,
    &r::UNKNOWN_SETTING,
    &r::MISSING_SETTING,
    &r::IMPORT_NOT_FOUND,
    &r::NODES_IN_LIBRARY,
    &r::RESERVED_NAME,
    &r::INVALID_SOURCE,
    &r::NAMING_CONVENTION,
    &r::TYPE_MISMATCH,
    &r::UNKNOWN_FIELD,
    &r::INVALID_LITERAL_TYPE,
    &r::OPTIONAL_INTO_REQUIRED,
    &r::RECORD_LITERAL_MISMATCH,
    &r::UNBOUND_URI_VARIABLE,
    &r::INVALID_URI_TEMPLATE,
    &r::UNROUTABLE_RESOURCE,
    &r::UNPRODUCED_LINK_KIND,
    &r::AMBIGUOUS_LINK_PRODUCER,
    &r::UNBOUNDED_PROMPT_RESOURCE,
    &r::UNHEALABLE_LINK,
    &r::READER_SIGNATURE_MISMATCH,
    &r::LINK_TYPE_MISMATCH,
    &r::MIME_TYPE_MISMATCH,
    &r::OVERLAPPING_LINK_TEMPLATES,
    &r::PROMPT_NOT_FOUND,
    &r::UNDEFINED_PROMPT_VARIABLE,
    &r::UNUSED_PARAMETER,
    &r::PROMPT_SYNTAX_ERROR,
    &r::UNKNOWN_PROMPT_FIELD,
    &r::SINGLE_BRACE_PLACEHOLDER,
    &r::CYCLE,
    &r::UNUSED_NODE,
    &r::UNUSED_DECLARATION,
    &r::GATE_WITHOUT_CONSUMER,
    &r::SKIPPABLE_OUTPUT,
    &r::MULTIPLE_EACH,
    &r::UNBOUNDED_FAN_OUT,
    &r::GATE_IN_EACH,
    &r::EFFECT_IN_AGENT,
    &r::ACT_WITHOUT_EFFECTS,
    &r::SECRET_OUT_OF_PLACE,
    &r::EFFECT_IN_NODE,
    &r::UNUSED_SUPPRESSION,
];

/// The rules that are passes over the checked program, in the order they run.
pub static PASSES: &[Pass] = &[
    r::dangling_doc_comment::check,
    r::naming_convention::check,
    r::unbounded_prompt_resource::check,
    r::unhealable_link::check,
    r::unused_parameter::check,
    r::unused_node::check,
    r::unused_declaration::check,
    r::gate_without_consumer::check,
    r::skippable_output::check,
    r::unbounded_fan_out::check,
    r::gate_in_each::check,
    r::act_without_effects::check,
    r::secret_out_of_place::check,
];

/// Rules about unused things, which are not reported for a program with errors.
pub static UNUSED_FAMILY: &[&str] = &[
    r::UNUSED_PARAMETER.code,
    r::UNUSED_NODE.code,
    r::UNUSED_DECLARATION.code,
    r::GATE_WITHOUT_CONSUMER.code,
];

/// A rule by code (`P0101`) or name (`unknown-name`), case-insensitively.
pub fn find_rule(key: &str) -> Option<&'static Rule> {
    let key = key.trim();
    ALL_RULES
        .iter()
        .chain(crate::diagnostic::RUNTIME_CODES.iter())
        .copied()
        .find(|r| r.code.eq_ignore_ascii_case(key) || r.name.eq_ignore_ascii_case(key))
}
