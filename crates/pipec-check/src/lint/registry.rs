//! The passes over the checked program, each registered with one line, in the order they
//! run. The rules they report are declared in the catalogue (`pipec_diagnostic::rules`).

use super::Pass;
use super::passes as p;

/// The rules that are passes over the checked program, in the order they run.
pub(super) static PASSES: &[Pass] = &[
    p::dangling_doc_comment::check,
    p::naming_convention::check,
    p::unbounded_prompt_resource::check,
    p::prompt_exceeds_context::check,
    p::unhealable_link::check,
    p::unused_parameter::check,
    p::unused_node::check,
    p::unused_declaration::check,
    p::gate_without_consumer::check,
    p::skippable_output::check,
    p::unbounded_fan_out::check,
    p::gate_in_each::check,
    p::act_without_effects::check,
    p::secret_out_of_place::check,
];
