//! The passes of the rules that read the whole checked program: one file per rule, named
//! after it, holding only the check. The rule itself (code, name, documentation) is in
//! the catalogue, `pipec_diagnostic::rules`.

pub mod act_without_effects;
pub mod dangling_doc_comment;
pub mod gate_in_each;
pub mod gate_without_consumer;
pub mod naming_convention;
pub mod secret_out_of_place;
pub mod skippable_output;
pub mod unbounded_fan_out;
pub mod unbounded_prompt_resource;
pub mod unhealable_link;
pub mod unused_declaration;
pub mod unused_node;
pub mod unused_parameter;
