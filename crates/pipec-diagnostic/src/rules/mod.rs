//! The catalogue of compile-time diagnostics: one file per rule, holding its code, name,
//! severity and the documentation `pipec explain` prints. It depends on nothing but the
//! `Rule` type, so the parser, the checker, the lint passes and the runtime can all name a
//! rule without depending on each other. The lint passes themselves live in `lint`.

use crate::{RUNTIME_CODES, Rule};

/// Declares each rule file as a module, re-exports its rule, and lists the rules in
/// [`ALL_RULES`], so that a new rule is registered with one line.
macro_rules! catalogue {
    ($($file:ident::$rule:ident,)*) => {
        $(pub mod $file;)*
        $(pub use $file::$rule;)*

        /// Every diagnostic pipec reports before a run, in order of code.
        pub static ALL_RULES: &[&Rule] = &[$(&$rule,)*];
    };
}

catalogue! {
    syntax_error::SYNTAX_ERROR,
    invalid_literal::INVALID_LITERAL,
    dangling_doc_comment::DANGLING_DOC_COMMENT,
    invalid_encoding::INVALID_ENCODING,
    nesting_too_deep::NESTING_TOO_DEEP,
    unknown_name::UNKNOWN_NAME,
    duplicate_declaration::DUPLICATE_DECLARATION,
    unknown_setting::UNKNOWN_SETTING,
    missing_setting::MISSING_SETTING,
    import_not_found::IMPORT_NOT_FOUND,
    nodes_in_library::NODES_IN_LIBRARY,
    reserved_name::RESERVED_NAME,
    invalid_source::INVALID_SOURCE,
    naming_convention::NAMING_CONVENTION,
    path_not_found::PATH_NOT_FOUND,
    type_mismatch::TYPE_MISMATCH,
    unknown_field::UNKNOWN_FIELD,
    invalid_literal_type::INVALID_LITERAL_TYPE,
    optional_into_required::OPTIONAL_INTO_REQUIRED,
    record_literal_mismatch::RECORD_LITERAL_MISMATCH,
    invalid_server_url::INVALID_SERVER_URL,
    unbound_uri_variable::UNBOUND_URI_VARIABLE,
    invalid_uri_template::INVALID_URI_TEMPLATE,
    unroutable_resource::UNROUTABLE_RESOURCE,
    unproduced_link_kind::UNPRODUCED_LINK_KIND,
    ambiguous_link_producer::AMBIGUOUS_LINK_PRODUCER,
    unbounded_prompt_resource::UNBOUNDED_PROMPT_RESOURCE,
    unhealable_link::UNHEALABLE_LINK,
    reader_signature_mismatch::READER_SIGNATURE_MISMATCH,
    link_type_mismatch::LINK_TYPE_MISMATCH,
    mime_type_mismatch::MIME_TYPE_MISMATCH,
    overlapping_link_templates::OVERLAPPING_LINK_TEMPLATES,
    prompt_not_found::PROMPT_NOT_FOUND,
    undefined_prompt_variable::UNDEFINED_PROMPT_VARIABLE,
    unused_parameter::UNUSED_PARAMETER,
    prompt_syntax_error::PROMPT_SYNTAX_ERROR,
    unknown_prompt_field::UNKNOWN_PROMPT_FIELD,
    single_brace_placeholder::SINGLE_BRACE_PLACEHOLDER,
    file_name_as_prompt::FILE_NAME_AS_PROMPT,
    prompt_exceeds_context::PROMPT_EXCEEDS_CONTEXT,
    cycle::CYCLE,
    unused_node::UNUSED_NODE,
    unused_declaration::UNUSED_DECLARATION,
    gate_without_consumer::GATE_WITHOUT_CONSUMER,
    skippable_output::SKIPPABLE_OUTPUT,
    multiple_each::MULTIPLE_EACH,
    unbounded_fan_out::UNBOUNDED_FAN_OUT,
    gate_in_each::GATE_IN_EACH,
    effect_in_agent::EFFECT_IN_AGENT,
    act_without_effects::ACT_WITHOUT_EFFECTS,
    secret_out_of_place::SECRET_OUT_OF_PLACE,
    effect_in_node::EFFECT_IN_NODE,
    credential_not_secret::CREDENTIAL_NOT_SECRET,
    credential_name_not_secret::CREDENTIAL_NAME_NOT_SECRET,
    client_model_in_loop::CLIENT_MODEL_IN_LOOP,
    tool_annotation_contradiction::TOOL_ANNOTATION_CONTRADICTION,
    unlisted_tool_parameter::UNLISTED_TOOL_PARAMETER,
    unserved_resource_template::UNSERVED_RESOURCE_TEMPLATE,
    links_need_newer_protocol::LINKS_NEED_NEWER_PROTOCOL,
    spec_syntax_error::SPEC_SYNTAX_ERROR,
    wrong_spec_api_version::WRONG_SPEC_API_VERSION,
    wrong_spec_kind::WRONG_SPEC_KIND,
    missing_spec_key::MISSING_SPEC_KEY,
    conflicting_resource_content::CONFLICTING_RESOURCE_CONTENT,
    template_without_variable::TEMPLATE_WITHOUT_VARIABLE,
    content_on_template::CONTENT_ON_TEMPLATE,
    uri_without_scheme::URI_WITHOUT_SCHEME,
    priority_out_of_range::PRIORITY_OUT_OF_RANGE,
    invalid_blob::INVALID_BLOB,
    wrong_spec_value_type::WRONG_SPEC_VALUE_TYPE,
    unsupported_template_expression::UNSUPPORTED_TEMPLATE_EXPRESSION,
    unknown_spec_key::UNKNOWN_SPEC_KEY,
    file_icon_source::FILE_ICON_SOURCE,
    overlapping_served_uris::OVERLAPPING_SERVED_URIS,
    unused_suppression::UNUSED_SUPPRESSION,
}

/// Rules about unused things, which are not reported while the checker finds errors.
pub static UNUSED_FAMILY: &[&str] = &[
    UNUSED_PARAMETER.code,
    UNUSED_NODE.code,
    UNUSED_DECLARATION.code,
    GATE_WITHOUT_CONSUMER.code,
];

/// Rules only `pipec check --online` reports, from what the servers say: an offline
/// check never reports them, so their cases are in `tests/mcp/tools.rs`, not `tests/ui/`.
pub static ONLINE_FAMILY: &[&str] = &[
    TOOL_ANNOTATION_CONTRADICTION.code,
    UNLISTED_TOOL_PARAMETER.code,
    UNSERVED_RESOURCE_TEMPLATE.code,
    LINKS_NEED_NEWER_PROTOCOL.code,
];

/// A rule or run-time code by code (`P0101`) or name (`unknown-name`), case-insensitively.
pub fn find_rule(key: &str) -> Option<&'static Rule> {
    let key = key.trim();
    ALL_RULES
        .iter()
        .chain(RUNTIME_CODES.iter())
        .copied()
        .find(|r| r.code.eq_ignore_ascii_case(key) || r.name.eq_ignore_ascii_case(key))
}
