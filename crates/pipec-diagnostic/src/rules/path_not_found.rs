//! P0110 path-not-found.

crate::declare_rule! {
    /// ## What it catches
    /// A file or folder the pipeline names that does not exist: the program of an `exec`
    /// written as a path (`./scripts/score.sh`; a bare name is looked up on `PATH` when it
    /// runs, and is not checked), the `replies` file of a scripted model, and the `root`
    /// folder of a served template. Paths are taken from the folder of the file that names
    /// them, as a run takes them.
    ///
    /// ## Why it matters
    /// These are read when the pipeline runs or serves, not when it is compiled, so a wrong
    /// path would otherwise show only then: the `exec` fails after everything upstream ran,
    /// the scripted model fails the run, the served template answers no read. It is a
    /// warning, since a path may be made on purpose between the check and the run (a
    /// program built by the project, a folder a step writes); `--deny warnings` makes it an
    /// error.
    ///
    /// ## Example
    /// ```pipe
    /// node score(deal: Deal = deal) -> Score {
    ///   exec = ["./scripts/scroe.sh"]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// node score(deal: Deal = deal) -> Score {
    ///   exec = ["./scripts/score.sh"]
    /// }
    /// ```
    pub static PATH_NOT_FOUND = {
        code: "P0110",
        name: "path-not-found",
        severity: Warning,
        summary: "a program, replies file or served folder the pipeline names that does not exist",
    };
}
