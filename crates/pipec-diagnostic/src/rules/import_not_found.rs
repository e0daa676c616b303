//! P0105 import-not-found.

crate::declare_rule! {
    /// ## What it catches
    /// An `import` whose path names no file (a path resolves against the folder of the file that
    /// imports it), or an import that leads back to a file already being imported: `a.pipe`
    /// imports `b.pipe`, which imports `a.pipe`.
    ///
    /// ## Why it matters
    /// Every declaration the file expected from the import would be missing; pipec reports the
    /// import once instead of each use. An imported file is read before the file that imports
    /// it, and a cycle has no such order.
    ///
    /// ## Example
    /// ```pipe
    /// import "shared/crm.pip"
    /// ```
    /// Write it as:
    /// ```pipe
    /// import "shared/crm.pipe"
    /// ```
    /// To break a cycle, move the declarations both files need into a third file that both
    /// import.
    pub static IMPORT_NOT_FOUND = {
        code: "P0105",
        name: "import-not-found",
        severity: Error,
        summary: "an import path that names no file, or an import cycle",
    };
}
