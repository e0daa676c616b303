//! The passes of the rules that read the whole checked program: one file per rule, named
//! after it, holding only the check. The rule itself (code, name, documentation) is in
//! the catalogue, `pipec_diagnostic::rules`.

pub(super) mod act_without_effects;
pub(super) mod dangling_doc_comment;
pub(super) mod gate_in_each;
pub(super) mod gate_without_consumer;
pub(super) mod naming_convention;
pub(super) mod prompt_exceeds_context;
pub(super) mod secret_out_of_place;
pub(super) mod skippable_output;
pub(super) mod unbounded_fan_out;
pub(super) mod unbounded_prompt_resource;
pub(super) mod unhealable_link;
pub(super) mod unused_declaration;
pub(super) mod unused_node;
pub(super) mod unused_parameter;
