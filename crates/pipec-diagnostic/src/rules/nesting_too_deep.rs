//! P0005 nesting-too-deep.

crate::declare_rule! {
    /// ## What it catches
    /// A declaration whose brackets (`(`, `[`, `{` and the `<` of `list<...>`, the
    /// declaration's own braces included) are open more than 32 deep at one point, and an
    /// expression or a type that nests more than 32 levels: each bracket, each operator of
    /// a chain (`a && b && c` is two levels) and each `[]` of a list type is a level.
    ///
    /// ## Why it matters
    /// Parsing and every pass over the syntax tree go one level down per level of
    /// nesting, so an unbounded nesting (a generated file, a fuzzer's input) would
    /// overflow the stack and abort pipec, or the language server while the file is
    /// open. The limit is checked before anything else reads the declaration, which is
    /// then left out as a declaration with a syntax error is. No hand-written pipeline
    /// comes near it.
    ///
    /// ## Example
    /// ```pipe
    /// input matrix: json = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
    /// ```
    /// Give such a value at run time instead (`--inputs inputs.json`), and give the inner
    /// part of a deep type a name of its own:
    /// ```pipe
    /// type Row = { cells: string[] }
    /// input rows: Row[]
    /// ```
    pub static NESTING_TOO_DEEP = {
        code: "P0005",
        name: "nesting-too-deep",
        severity: Error,
        summary: "brackets, an expression or a type nested more than 32 levels deep",
    };
}
