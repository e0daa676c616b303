//! The page, carried in the binary: one HTML file, its script and its styles, written by
//! hand with no framework and no build step (`cargo build` is all it takes).

/// The asset at `path`, with its content type.
pub(crate) fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/" | "/index.html" => Some((
            "text/html; charset=utf-8",
            include_str!("../assets/index.html"),
        )),
        "/app.js" => Some((
            "text/javascript; charset=utf-8",
            include_str!("../assets/app.js"),
        )),
        "/app.css" => Some(("text/css; charset=utf-8", include_str!("../assets/app.css"))),
        _ => None,
    }
}
