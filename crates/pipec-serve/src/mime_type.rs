//! The MIME type of a served file, from its extension, and which types are text. A small
//! table of its own rather than a crate: a project serves documents, data and a few
//! images, and a guess for anything else is `application/octet-stream` (served as a blob).

/// The MIME type for `name`'s extension (case-insensitive).
pub fn for_file_name(name: &str) -> &'static str {
    let extension = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => return "application/octet-stream",
    };
    match extension.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "text" | "log" => "text/plain",
        "pipe" | "rs" | "py" | "sh" | "c" | "h" | "go" | "java" | "ts" | "sql" => "text/plain",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/jsonl",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// Whether content of this type is text: `text/*`, and the structured text types
/// (JSON, YAML, TOML, XML, JavaScript, and any `+json` or `+xml`).
pub fn is_text(mime_type: &str) -> bool {
    let essence = mime_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/jsonl"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/xml"
                | "application/javascript"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_give_types_and_text_is_told_from_blobs() {
        assert_eq!(for_file_name("README.MD"), "text/markdown");
        assert_eq!(for_file_name("a.b.json"), "application/json");
        assert_eq!(for_file_name("logo.png"), "image/png");
        assert_eq!(for_file_name("Makefile"), "application/octet-stream");
        assert_eq!(for_file_name(".json"), "application/octet-stream");
        assert!(is_text("text/plain; charset=utf-8"));
        assert!(is_text("application/ld+json"));
        assert!(is_text("image/svg+xml"));
        assert!(!is_text("image/png"));
        assert!(!is_text("application/octet-stream"));
    }
}
