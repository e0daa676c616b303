//! The checker: loads a file and its imports, resolves every name, types every binding,
//! and produces the [`Hir`] plus all diagnostics.
//!
//! Phases, in order: load (parse the file and its imports), declare (put every
//! declaration in its file's scope), resolve declarations (types, servers, models, link
//! kinds, tools), check nodes (signatures, sources, bodies), build the graph (edges,
//! cycles, link producers, skips), check prompts, then run the lint passes. Each phase
//! records what it could and goes on; nothing stops at the first error.
#![warn(unreachable_pub)]

pub mod hir;
pub mod ty;

mod analysis;
pub mod budget;
mod credentials;
mod decls;
mod expr;
pub mod graph;
mod mismatch;
mod nodes;
mod outputs;
mod paths;
mod pipeline_tests;
mod prompt;
mod settings;
mod unproduced;

pub mod fix;
pub mod lint;
mod lower;
mod schema;

pub use analysis::{
    Analysis, CompileError, analyze, compile_file, compile_str, compile_with, lower_analysis,
};
pub use lower::{lower, lower_server};
pub use prompt::template_parses;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hir::{DeclInfo, DeclRef, Hir, TypeDef};
use pipec_base::names;
use pipec_base::source::{FileId, Loader, SourceDb, Span, is_not_utf8, normalize_path};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ItemKind, TypeExpr, TypeExprKind};
use pipec_syntax::lexer::Comment;
use ty::{FieldTy, RecordTy, Ty, TypeBody, TypeId};

/// Everything `check` found: the program, its files, and the diagnostics.
pub struct Checked {
    pub hir: Hir,
    pub db: SourceDb,
    pub diagnostics: Vec<Diagnostic>,
    /// The syntax tree and comments of each `.pipe` file, for `fmt` and suppressions.
    pub syntax: Vec<SyntaxFile>,
}

pub struct SyntaxFile {
    pub file: FileId,
    pub ast: ast::File,
    pub comments: Vec<Comment>,
    pub is_root: bool,
}

/// Checks the `.pipe` file at `path` (and what it imports).
pub fn check(loader: &dyn Loader, path: &Path, display_name: &str) -> Checked {
    let mut c = Checker::new(loader);
    c.run(path, display_name);
    c.finish()
}

/// One loaded `.pipe` file.
pub(crate) struct Loaded {
    pub id: FileId,
    pub path: PathBuf,
    pub dir: PathBuf,
    pub ast: ast::File,
    pub comments: Vec<Comment>,
    pub imports: Vec<ImportEdge>,
    pub is_root: bool,
    pub broken: Vec<(String, String)>,
}

pub(crate) struct ImportEdge {
    pub target: usize,
    pub alias: Option<String>,
    pub span: Span,
}

/// The names a file sees.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    pub types: HashMap<String, TypeId>,
    pub values: HashMap<String, DeclRef>,
    pub links: HashMap<String, u32>,
    pub inputs: HashMap<String, u32>,
    pub namespaces: HashMap<String, usize>,
    /// Names of declarations that did not parse (`type:X`, `value:x`, `link:k`,
    /// `input:x`, and `server:x` beside `value:x` for a server): their uses are not
    /// reported as unknown, nor the URIs a broken server may serve as unroutable.
    pub poisoned: std::collections::HashSet<String>,
}

impl Scope {
    pub(crate) fn is_poisoned(&self, space: &str, name: &str) -> bool {
        !self.poisoned.is_empty() && self.poisoned.contains(&format!("{space}:{name}"))
    }
}

pub(crate) struct Checker<'l> {
    pub loader: &'l dyn Loader,
    pub db: SourceDb,
    pub diags: Vec<Diagnostic>,
    pub hir: Hir,
    pub files: Vec<Loaded>,
    /// Each file's own declarations.
    pub own: Vec<Scope>,
    /// What each file sees: its own declarations and its imports.
    pub scopes: Vec<Scope>,
    /// The prompts folder, found next to the checked file or above it.
    pub prompts_dir: PathBuf,
    /// Every declaration with its (file index, item index), in declaration order.
    pub decl_items: Vec<(DeclRef, usize, usize)>,
    /// Files with an import that failed: their unknown names are not reported, since
    /// the missing file may have declared them.
    pub failed_imports: std::collections::HashSet<FileId>,
    /// The servers each file sees (for routing).
    pub server_cache: HashMap<usize, Vec<hir::ServerId>>,
}

/// What to do about a file that is not UTF-8 (P0004).
pub(crate) const NOT_UTF8_HELP: &str =
    "save it as UTF-8 text: the encoding setting of the editor, or `iconv -f latin1 -t utf-8`";

const BUILTIN_TYPES: &[&str] = &[
    "string", "int", "float", "bool", "bytes", "json", "duration",
];

impl<'l> Checker<'l> {
    fn new(loader: &'l dyn Loader) -> Self {
        Checker {
            loader,
            db: SourceDb::default(),
            diags: Vec::new(),
            hir: Hir::default(),
            files: Vec::new(),
            own: Vec::new(),
            scopes: Vec::new(),
            prompts_dir: PathBuf::new(),
            decl_items: Vec::new(),
            server_cache: HashMap::new(),
            failed_imports: std::collections::HashSet::new(),
        }
    }

    fn run(&mut self, path: &Path, display_name: &str) {
        let abs = normalize_path(&self.loader.absolute(path));
        let root = match self.load(&abs, display_name.to_string(), &mut Vec::new()) {
            Ok(root) => root,
            Err(e) if is_not_utf8(&e) => {
                self.diags.push(
                    Diagnostic::without_location(
                        &r::INVALID_ENCODING,
                        format!("`{display_name}` is {e}"),
                    )
                    .help(NOT_UTF8_HELP),
                );
                return;
            }
            Err(e) => {
                self.diags.push(Diagnostic::without_location(
                    &r::IMPORT_NOT_FOUND,
                    format!("cannot read `{display_name}`: {e}"),
                ));
                return;
            }
        };
        self.files[root].is_root = true;
        self.hir.root = Some(self.files[root].id);
        self.hir.project_root = self.find_project_root(&self.files[root].dir.clone());
        self.prompts_dir = self.hir.project_root.join("prompts");
        self.hir.is_library = !self.files[root].ast.items.iter().any(|i| {
            matches!(
                i.kind,
                ItemKind::Node(_) | ItemKind::Input(_) | ItemKind::Output(_)
            )
        });
        for f in &self.files {
            let doc = file_doc(&f.comments);
            self.hir.files.push(hir::FileInfo {
                id: f.id,
                path: f.path.clone(),
                doc,
                is_root: f.is_root,
            });
        }
        self.check_libraries();
        self.declare_all();
        self.build_scopes();
        self.resolve_types();
        self.resolve_decls();
        self.check_nodes(root);
        self.build_graph();
        self.check_outputs(root);
        self.check_serve(root);
        self.check_tests(root);
    }

    fn finish(mut self) -> Checked {
        if !self.failed_imports.is_empty() {
            let failed = &self.failed_imports;
            self.diags.retain(|d| {
                !(d.rule.code == r::UNKNOWN_NAME.code
                    && d.primary.as_ref().is_some_and(|p| failed.contains(&p.file)))
            });
        }
        let syntax = self
            .files
            .into_iter()
            .map(|f| SyntaxFile {
                file: f.id,
                ast: f.ast,
                comments: f.comments,
                is_root: f.is_root,
            })
            .collect();
        Checked {
            hir: self.hir,
            db: self.db,
            diagnostics: self.diags,
            syntax,
        }
    }

    /// The nearest folder, from the file's own upwards, that holds `prompts/` or
    /// `pipec.toml`; the file's folder when there is none.
    fn find_project_root(&self, start: &Path) -> PathBuf {
        let mut dir = Some(start);
        while let Some(d) = dir {
            if self.loader.is_dir(&d.join("prompts")) || self.loader.exists(&d.join("pipec.toml")) {
                return d.to_path_buf();
            }
            dir = d.parent();
        }
        start.to_path_buf()
    }

    // ------------------------------------------------------------ loading

    /// Loads and parses a file and, recursively, its imports. `stack` holds the files
    /// being loaded, to report import cycles. A file that cannot be read is the caller's
    /// to report, since only it knows where the file was named.
    fn load(
        &mut self,
        path: &Path,
        name: String,
        stack: &mut Vec<usize>,
    ) -> std::io::Result<usize> {
        if let Some(i) = self.files.iter().position(|f| f.path == path) {
            return Ok(i);
        }
        let text = self.loader.read(path)?;
        let text: Arc<str> = Arc::from(text);
        let id = self.db.add(name.clone(), path.to_path_buf(), text.clone());
        let parsed = pipec_syntax::parse(id, &text);
        self.diags.extend(parsed.diagnostics);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let index = self.files.len();
        self.files.push(Loaded {
            id,
            path: path.to_path_buf(),
            dir: dir.clone(),
            ast: parsed.file,
            comments: parsed.comments,
            imports: Vec::new(),
            is_root: false,
            broken: parsed.broken,
        });
        stack.push(index);
        let imports: Vec<(ast::StrLit, Option<ast::Ident>, Span)> = self.files[index]
            .ast
            .items
            .iter()
            .filter_map(|item| match &item.kind {
                ItemKind::Import(imp) => Some((imp.path.clone(), imp.alias.clone(), item.span)),
                _ => None,
            })
            .collect();
        let name_dir = Path::new(&name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        for (lit, alias, span) in imports {
            let target_path = normalize_path(&dir.join(&lit.value));
            let target_name = normalize_path(&name_dir.join(&lit.value))
                .to_string_lossy()
                .into_owned();
            if let Some(pos) = stack
                .iter()
                .position(|i| self.files[*i].path == target_path)
            {
                let mut chain: Vec<String> = stack[pos..]
                    .iter()
                    .map(|i| self.db.get(self.files[*i].id).name.clone())
                    .collect();
                chain.push(target_name.clone());
                self.diags.push(
                    Diagnostic::new(
                        &r::IMPORT_NOT_FOUND,
                        id,
                        lit.span,
                        format!("import cycle: {}", chain.join(" → ")),
                    )
                    .label("this import closes the cycle")
                    .help("move the shared declarations into a file that both import"),
                );
                self.failed_imports.insert(id);
                continue;
            }
            if !self.loader.exists(&target_path) {
                self.diags.push(
                    Diagnostic::new(
                        &r::IMPORT_NOT_FOUND,
                        id,
                        lit.span,
                        format!("cannot find `{}` to import", lit.value),
                    )
                    .label(format!("looked for {}", target_name))
                    .help("import paths are relative to the importing file's folder")
                    .note("names this file would declare are not checked until it is found"),
                );
                self.failed_imports.insert(id);
                continue;
            }
            match self.load(&target_path, target_name.clone(), stack) {
                Ok(target) => self.files[index].imports.push(ImportEdge {
                    target,
                    alias: alias.map(|a| a.name),
                    span,
                }),
                Err(e) => {
                    let d = if is_not_utf8(&e) {
                        Diagnostic::new(
                            &r::INVALID_ENCODING,
                            id,
                            lit.span,
                            format!("`{target_name}` is {e}"),
                        )
                        .label("imported here")
                        .help(NOT_UTF8_HELP)
                    } else {
                        Diagnostic::new(
                            &r::IMPORT_NOT_FOUND,
                            id,
                            lit.span,
                            format!("cannot read `{target_name}`: {e}"),
                        )
                        .label("imported here")
                    };
                    self.diags.push(d.note(
                        "names this file would declare are not checked until it can be read",
                    ));
                    self.failed_imports.insert(id);
                }
            }
        }
        stack.pop();
        Ok(index)
    }

    /// A library file (one that is imported) declares no nodes, inputs or outputs.
    fn check_libraries(&mut self) {
        for i in 0..self.files.len() {
            for e in 0..self.files[i].imports.len() {
                let edge = &self.files[i].imports[e];
                let target = &self.files[edge.target];
                let offending = target.ast.items.iter().find_map(|item| match &item.kind {
                    ItemKind::Node(n) => Some((n.kind.keyword(), n.name.name.clone(), n.name.span)),
                    ItemKind::Input(d) => Some(("input", d.name.name.clone(), d.name.span)),
                    ItemKind::Output(d) => Some(("output", d.name.name.clone(), d.name.span)),
                    _ => None,
                });
                if let Some((kw, name, span)) = offending {
                    let target_name = self.db.get(target.id).name.clone();
                    self.diags.push(
                        Diagnostic::new(
                            &r::NODES_IN_LIBRARY,
                            self.files[i].id,
                            edge.span,
                            format!("`{target_name}` declares {kw} `{name}` and cannot be imported"),
                        )
                        .label("imported here")
                        .secondary(target.id, span, "declared here")
                        .help("an imported file holds only types, enums, servers, models, link kinds, tools and readers; move the nodes into the pipeline that imports it"),
                    );
                }
            }
        }
    }

    // ------------------------------------------------------------ declarations

    fn info(&self, file: usize, name: &ast::Ident, span: Span, doc: &Option<ast::Doc>) -> DeclInfo {
        DeclInfo {
            name: name.name.clone(),
            display: name.name.clone(),
            file: self.files[file].id,
            span,
            name_span: name.span,
            doc: doc.as_ref().map(|d| d.text.clone()),
        }
    }

    /// Puts every declaration of every file into arenas and its file's own scope.
    fn declare_all(&mut self) {
        // The arenas are sized once: grown a push at a time, a 10,000-node program's
        // node arena was copied fourteen times and held its last two copies at once.
        let items = |want: fn(&ItemKind) -> bool| -> usize {
            let files = self.files.iter();
            files
                .map(|f| f.ast.items.iter().filter(|i| want(&i.kind)).count())
                .sum()
        };
        let nodes = items(|k| matches!(k, ItemKind::Node(_)));
        let all = items(|_| true);
        self.hir.nodes.reserve_exact(nodes);
        self.decl_items.reserve_exact(all);
        for f in 0..self.files.len() {
            let mut own = Scope::default();
            own.values.reserve(self.files[f].ast.items.len());
            for (space, name) in &self.files[f].broken {
                own.poisoned.insert(format!("{space}:{name}"));
            }
            let is_root = self.files[f].is_root;
            let items = std::mem::take(&mut self.files[f].ast.items);
            for (i, item) in items.iter().enumerate() {
                if let Some(d) = self.declare(f, item, is_root, &mut own) {
                    self.decl_items.push((d, f, i));
                }
            }
            self.files[f].ast.items = items;
            self.own.push(own);
        }
    }

    fn declare(
        &mut self,
        f: usize,
        item: &ast::Item,
        is_root: bool,
        own: &mut Scope,
    ) -> Option<DeclRef> {
        let file = self.files[f].id;
        Some(match &item.kind {
            ItemKind::Type(t) => {
                let id = self.hir.types.len() as TypeId;
                self.hir.types.push(TypeDef {
                    info: self.info(f, &t.name, item.span, &item.doc),
                    body: TypeBody::Alias(Ty::Error),
                    key: String::new(),
                });
                self.insert_unique(file, &mut own.types, &t.name, id, "type", Self::type_span);
                DeclRef::Type(id)
            }
            ItemKind::Enum(e) => {
                let id = self.hir.types.len() as TypeId;
                self.hir.types.push(TypeDef {
                    info: self.info(f, &e.name, item.span, &item.doc),
                    body: TypeBody::Alias(Ty::Error),
                    key: String::new(),
                });
                self.insert_unique(file, &mut own.types, &e.name, id, "type", Self::type_span);
                DeclRef::Type(id)
            }
            ItemKind::Server(s) => {
                let id = self.hir.servers.len() as u32;
                let info = self.info(f, &s.name, item.span, &item.doc);
                self.hir.servers.push(decls::empty_server(info));
                self.insert_unique(
                    file,
                    &mut own.values,
                    &s.name,
                    DeclRef::Server(id),
                    "name",
                    Self::decl_span,
                );
                DeclRef::Server(id)
            }
            ItemKind::Model(m) => {
                let id = self.hir.models.len() as u32;
                let info = self.info(f, &m.name, item.span, &item.doc);
                self.hir.models.push(decls::empty_model(info));
                self.insert_unique(
                    file,
                    &mut own.values,
                    &m.name,
                    DeclRef::Model(id),
                    "name",
                    Self::decl_span,
                );
                DeclRef::Model(id)
            }
            ItemKind::Link(l) => {
                let id = self.hir.links.len() as u32;
                let name = ast::Ident {
                    name: l.kind.value.clone(),
                    span: l.kind.span,
                };
                let info = self.info(f, &name, item.span, &item.doc);
                self.hir
                    .links
                    .push(decls::empty_link(info, l.kind.value.clone()));
                self.insert_unique(file, &mut own.links, &name, id, "link kind", |c, i| {
                    c.decl_span(DeclRef::Link(i))
                });
                DeclRef::Link(id)
            }
            ItemKind::Tool(t) | ItemKind::Reader(t) => {
                let id = self.hir.tools.len() as u32;
                let info = self.info(f, &t.name, item.span, &item.doc);
                let is_reader = matches!(item.kind, ItemKind::Reader(_));
                self.hir.tools.push(decls::empty_tool(info, is_reader));
                self.insert_unique(
                    file,
                    &mut own.values,
                    &t.name,
                    DeclRef::Tool(id),
                    "name",
                    Self::decl_span,
                );
                DeclRef::Tool(id)
            }
            ItemKind::Input(d) if is_root => {
                let id = self.hir.inputs.len() as u32;
                let info = self.info(f, &d.name, item.span, &item.doc);
                self.hir.inputs.push(hir::InputDef {
                    info,
                    ty: Ty::Error,
                    default: None,
                });
                self.insert_unique(file, &mut own.inputs, &d.name, id, "input", |c, i| {
                    c.decl_span(DeclRef::Input(i))
                });
                DeclRef::Input(id)
            }
            ItemKind::Node(n) if is_root => {
                let id = self.hir.nodes.len() as u32;
                let info = self.info(f, &n.name, item.span, &item.doc);
                self.hir.nodes.push(nodes::empty_node(info, n));
                self.insert_unique(
                    file,
                    &mut own.values,
                    &n.name,
                    DeclRef::Node(id),
                    "name",
                    Self::decl_span,
                );
                DeclRef::Node(id)
            }
            _ => return None,
        })
    }

    /// Inserts a declaration into a file's own scope; a second declaration of the name
    /// is reported with a label on the first.
    fn insert_unique<T: Copy>(
        &mut self,
        file: FileId,
        map: &mut HashMap<String, T>,
        name: &ast::Ident,
        value: T,
        what: &str,
        first: impl Fn(&Self, T) -> (FileId, Span),
    ) {
        if let Some(existing) = map.get(&name.name).copied() {
            let (ffile, fspan) = first(self, existing);
            self.diags.push(
                Diagnostic::new(
                    &r::DUPLICATE_DECLARATION,
                    file,
                    name.span,
                    format!("the {what} `{}` is declared twice", name.name),
                )
                .label("declared again here")
                .secondary(ffile, fspan, "first declared here"),
            );
        } else {
            map.insert(name.name.clone(), value);
        }
    }

    /// Each file's scope: its own declarations, plus the own declarations of the files it
    /// imports (flat, or under `as` namespaces). Imports are not transitive.
    fn build_scopes(&mut self) {
        for f in 0..self.files.len() {
            let mut scope = self.own[f].clone();
            let file = self.files[f].id;
            for e in 0..self.files[f].imports.len() {
                let (target, alias, span) = {
                    let edge = &self.files[f].imports[e];
                    (edge.target, edge.alias.clone(), edge.span)
                };
                if let Some(alias) = alias {
                    if scope.namespaces.insert(alias.clone(), target).is_some() {
                        self.diags.push(
                            Diagnostic::new(
                                &r::DUPLICATE_DECLARATION,
                                file,
                                span,
                                format!("the namespace `{alias}` is imported twice"),
                            )
                            .help("give each import its own `as` name"),
                        );
                    }
                    continue;
                }
                let theirs = self.own[target].clone();
                scope.poisoned.extend(theirs.poisoned.iter().cloned());
                let target_file = self.files[target].id;
                merge(&mut scope.types, &theirs.types, |name, mine, _| {
                    self.clash(file, span, target_file, name, self.type_span(mine))
                });
                let values = theirs.values.clone();
                for (name, v) in values {
                    if let Some(existing) = scope.values.get(&name).copied() {
                        if existing != v {
                            let first = self.decl_span(existing);
                            self.clash(file, span, target_file, &name, first);
                        }
                    } else {
                        scope.values.insert(name, v);
                    }
                }
                for (name, v) in theirs.links {
                    if let Some(existing) = scope.links.get(&name).copied() {
                        if existing != v {
                            let first = self.hir.links[existing as usize].info.span;
                            self.clash(
                                file,
                                span,
                                target_file,
                                &name,
                                (self.hir.links[existing as usize].info.file, first),
                            );
                        }
                    } else {
                        scope.links.insert(name, v);
                    }
                }
            }
            self.scopes.push(scope);
        }
        // Names as the checked file sees them.
        let root = self.files.iter().position(|f| f.is_root).unwrap_or(0);
        let mut display: HashMap<FileId, Option<String>> = HashMap::new();
        display.insert(self.files[root].id, None);
        for edge in &self.files[root].imports {
            display.insert(self.files[edge.target].id, edge.alias.clone());
        }
        let stems: HashMap<FileId, String> = self
            .files
            .iter()
            .map(|f| {
                let stem = f
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (f.id, stem)
            })
            .collect();
        let qualify = |info: &mut DeclInfo| {
            info.display = match display.get(&info.file) {
                Some(None) => info.name.clone(),
                Some(Some(ns)) => format!("{ns}.{}", info.name),
                None => format!(
                    "{}.{}",
                    stems.get(&info.file).cloned().unwrap_or_default(),
                    info.name
                ),
            };
        };
        for t in &mut self.hir.types {
            qualify(&mut t.info);
        }
        for t in &mut self.hir.tools {
            qualify(&mut t.info);
        }
        for s in &mut self.hir.servers {
            qualify(&mut s.info);
        }
        for m in &mut self.hir.models {
            qualify(&mut m.info);
        }
        // Display names must be unique (they key the plan's type definitions).
        let mut seen: HashMap<String, u32> = HashMap::new();
        for t in &mut self.hir.types {
            let n = seen.entry(t.info.display.clone()).or_insert(0);
            *n += 1;
            t.key = if *n > 1 {
                format!("{}_{}", t.info.display, n)
            } else {
                t.info.display.clone()
            };
        }
    }

    fn clash(
        &mut self,
        file: FileId,
        import_span: Span,
        from: FileId,
        name: &str,
        first: (FileId, Span),
    ) {
        let from_name = self.db.get(from).name.clone();
        self.diags.push(
            Diagnostic::new(
                &r::DUPLICATE_DECLARATION,
                file,
                import_span,
                format!("`{name}` is declared here and imported from `{from_name}`"),
            )
            .label(format!("this import brings another `{name}`"))
            .secondary(first.0, first.1, "first declared here")
            .help("import the file under a namespace: `import \"...\" as name`"),
        );
    }

    fn type_span(&self, id: TypeId) -> (FileId, Span) {
        let info = &self.hir.types[id as usize].info;
        (info.file, info.name_span)
    }

    pub(crate) fn decl_span(&self, d: DeclRef) -> (FileId, Span) {
        let info = match d {
            DeclRef::Type(i) => &self.hir.types[i as usize].info,
            DeclRef::Server(i) => &self.hir.servers[i as usize].info,
            DeclRef::Model(i) => &self.hir.models[i as usize].info,
            DeclRef::Link(i) => &self.hir.links[i as usize].info,
            DeclRef::Tool(i) => &self.hir.tools[i as usize].info,
            DeclRef::Input(i) => &self.hir.inputs[i as usize].info,
            DeclRef::Node(i) => &self.hir.nodes[i as usize].info,
        };
        (info.file, info.name_span)
    }

    /// A link kind as file `f` names it: `"kind"`, or `"ns.kind"` for a namespaced import.
    /// Whether a name belongs to a declaration that did not parse (so not to report it).
    pub(crate) fn poisoned(&self, f: usize, space: &str, path: &[String]) -> bool {
        match path {
            [one] => self.scopes[f].is_poisoned(space, one),
            [ns, name] => self.scopes[f]
                .namespaces
                .get(ns)
                .is_some_and(|t| self.own[*t].is_poisoned(space, name)),
            _ => false,
        }
    }

    pub(crate) fn lookup_link(&self, f: usize, kind: &str) -> Option<u32> {
        if let Some(id) = self.scopes[f].links.get(kind) {
            return Some(*id);
        }
        let (ns, rest) = kind.split_once('.')?;
        let target = *self.scopes[f].namespaces.get(ns)?;
        self.own[target].links.get(rest).copied()
    }

    /// Every link kind name file `f` can use, for suggestions.
    pub(crate) fn link_names(&self, f: usize) -> Vec<String> {
        let mut out: Vec<String> = self.scopes[f].links.keys().cloned().collect();
        for (ns, target) in &self.scopes[f].namespaces {
            out.extend(self.own[*target].links.keys().map(|k| format!("{ns}.{k}")));
        }
        out.sort();
        out
    }

    // ------------------------------------------------------------ types

    /// The syntax item behind a declaration.
    pub(crate) fn item(&self, f: usize, i: usize) -> &ast::Item {
        &self.files[f].ast.items[i]
    }

    fn resolve_types(&mut self) {
        for (d, f, i) in self.decl_items.clone() {
            let DeclRef::Type(id) = d else { continue };
            let item = self.files[f].ast.items[i].clone();
            let body = match &item.kind {
                ItemKind::Type(t) => match &t.body {
                    ast::TypeDeclBody::Record(rec) => {
                        TypeBody::Record(Arc::new(self.record_type(f, rec)))
                    }
                    ast::TypeDeclBody::Alias(te) => TypeBody::Alias(self.resolve_type(f, te)),
                },
                ItemKind::Enum(e) => {
                    let mut names: Vec<String> = Vec::new();
                    let mut docs = Vec::new();
                    for v in &e.variants {
                        if names.contains(&v.name) {
                            self.diags.push(
                                Diagnostic::new(
                                    &r::DUPLICATE_DECLARATION,
                                    self.files[f].id,
                                    v.span,
                                    format!("the variant \"{}\" is listed twice", v.name),
                                )
                                .label("listed again here"),
                            );
                            continue;
                        }
                        names.push(v.name.clone());
                        docs.push(v.doc.as_ref().map(|d| d.text.clone()));
                    }
                    TypeBody::Enum(Arc::new(names), docs)
                }
                _ => continue,
            };
            self.hir.types[id as usize].body = body;
        }
        self.check_alias_cycles();
    }

    /// `type A = B` and `type B = A` name nothing.
    fn check_alias_cycles(&mut self) {
        for id in 0..self.hir.types.len() {
            let mut cur = id as TypeId;
            let mut steps = 0;
            while let TypeBody::Alias(Ty::Named(next)) = &self.hir.types[cur as usize].body {
                cur = *next;
                steps += 1;
                if cur as usize == id || steps > self.hir.types.len() {
                    let info = self.hir.types[id].info.clone();
                    self.diags.push(
                        Diagnostic::new(
                            &r::CYCLE,
                            info.file,
                            info.name_span,
                            format!("the type alias `{}` refers to itself", info.name),
                        )
                        .label("defined through itself"),
                    );
                    self.hir.types[id].body = TypeBody::Alias(Ty::Error);
                    break;
                }
            }
        }
    }

    pub(crate) fn record_type(&mut self, f: usize, rec: &ast::RecordType) -> RecordTy {
        let mut fields: Vec<FieldTy> = Vec::with_capacity(rec.fields.len());
        for field in &rec.fields {
            if fields.iter().any(|x| x.name == field.name.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        self.files[f].id,
                        field.name.span,
                        format!("the field `{}` is declared twice", field.name.name),
                    )
                    .label("declared again here"),
                );
                continue;
            }
            let ty = self.resolve_type(f, &field.ty);
            fields.push(FieldTy {
                name: field.name.name.clone(),
                ty,
                doc: field.doc.as_ref().map(|d| d.text.clone()),
            });
        }
        RecordTy { fields }
    }

    /// Resolves a type expression in the scope of file `f`.
    pub(crate) fn resolve_type(&mut self, f: usize, te: &TypeExpr) -> Ty {
        let file = self.files[f].id;
        match &te.kind {
            TypeExprKind::Name(path) => match path.as_slice() {
                [one] => {
                    match one.name.as_str() {
                        "string" => return Ty::String,
                        "int" => return Ty::Int,
                        "float" => return Ty::Float,
                        "bool" => return Ty::Bool,
                        "bytes" => return Ty::Bytes,
                        "json" => return Ty::Json,
                        "duration" => return Ty::Duration,
                        _ => {}
                    }
                    if let Some(&id) = self.scopes[f].types.get(&one.name) {
                        self.hir.used.insert(DeclRef::Type(id));
                        return Ty::Named(id);
                    }
                    if self.scopes[f].is_poisoned("type", &one.name) {
                        return Ty::Error;
                    }
                    let mut candidates: Vec<&str> =
                        self.scopes[f].types.keys().map(String::as_str).collect();
                    candidates.extend(BUILTIN_TYPES);
                    let near = names::suggestion(&one.name, candidates);
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_NAME,
                            file,
                            one.span,
                            format!("unknown type `{}`", one.name),
                        )
                        .label("not declared")
                        .did_you_mean(
                            &self.db,
                            file,
                            one.span,
                            &one.name,
                            near.as_ref(),
                        ),
                    );
                    Ty::Error
                }
                [ns, name] => {
                    let Some(&target) = self.scopes[f].namespaces.get(&ns.name) else {
                        let near = names::suggestion(
                            &ns.name,
                            self.scopes[f].namespaces.keys().map(String::as_str),
                        );
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_NAME,
                                file,
                                ns.span,
                                format!("unknown namespace `{}`", ns.name),
                            )
                            .label("no import has this name")
                            .help(format!(
                                "import a file as `{}`: `import \"file.pipe\" as {}`",
                                ns.name, ns.name
                            ))
                            .did_you_mean(
                                &self.db,
                                file,
                                ns.span,
                                &ns.name,
                                near.as_ref(),
                            ),
                        );
                        return Ty::Error;
                    };
                    if let Some(&id) = self.own[target].types.get(&name.name) {
                        self.hir.used.insert(DeclRef::Type(id));
                        return Ty::Named(id);
                    }
                    if self.own[target].is_poisoned("type", &name.name) {
                        return Ty::Error;
                    }
                    let near = names::suggestion(
                        &name.name,
                        self.own[target].types.keys().map(String::as_str),
                    );
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_NAME,
                            file,
                            name.span,
                            format!("`{}` declares no type `{}`", ns.name, name.name),
                        )
                        .label("not declared there")
                        .did_you_mean(
                            &self.db,
                            file,
                            name.span,
                            &name.name,
                            near.as_ref(),
                        ),
                    );
                    Ty::Error
                }
                _ => Ty::Error,
            },
            TypeExprKind::Generic(name, arg) => {
                let inner = self.resolve_type(f, arg);
                match name.name.as_str() {
                    "ref" => Ty::Ref(Box::new(inner)),
                    "map" => Ty::Map(Box::new(inner)),
                    other => {
                        let near = names::suggestion(other, ["ref", "map"]);
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_NAME,
                                file,
                                name.span,
                                format!("unknown generic type `{other}`"),
                            )
                            .label("not a generic type")
                            .help("the generic types are `ref<T>` and `map<T>`")
                            .did_you_mean(
                                &self.db,
                                file,
                                name.span,
                                other,
                                near.as_ref(),
                            ),
                        );
                        Ty::Error
                    }
                }
            }
            TypeExprKind::Record(rec) => Ty::Record(Arc::new(self.record_type(f, rec))),
            TypeExprKind::Literal(s) => Ty::Literals(Arc::new(vec![s.value.clone()])),
            TypeExprKind::List(inner) => self.resolve_type(f, inner).list(),
            TypeExprKind::Optional(inner) => self.resolve_type(f, inner).optional(),
            TypeExprKind::Paren(inner) => self.resolve_type(f, inner),
            TypeExprKind::Union(terms) => {
                let mut values: Vec<String> = Vec::new();
                for term in terms {
                    let ty = self.resolve_type(f, term);
                    match ty::as_literals(&self.hir, &ty) {
                        Some(lits) => {
                            for v in lits.iter() {
                                if !values.contains(v) {
                                    values.push(v.clone());
                                }
                            }
                        }
                        None if ty == Ty::Error => {}
                        None => {
                            let shown = ty::display(&self.hir, &ty);
                            self.diags.push(
                                Diagnostic::new(&r::TYPE_MISMATCH, file, term.span, format!("a union holds string literals, not `{shown}`"))
                                    .label("not a string literal")
                                    .help("unions are closed sets of strings, such as `\"low\" | \"high\"`; use `json` for values of several types"),
                            );
                        }
                    }
                }
                Ty::Literals(Arc::new(values))
            }
        }
    }
}

/// Merges `theirs` into `mine`, calling `clash` for a name both declare differently.
fn merge<T: Copy + PartialEq>(
    mine: &mut HashMap<String, T>,
    theirs: &HashMap<String, T>,
    mut clash: impl FnMut(&str, T, T),
) {
    for (name, v) in theirs {
        match mine.get(name) {
            Some(existing) if existing != v => clash(name, *existing, *v),
            Some(_) => {}
            None => {
                mine.insert(name.clone(), *v);
            }
        }
    }
}

fn file_doc(comments: &[Comment]) -> Option<String> {
    let lines: Vec<&str> = comments
        .iter()
        .take_while(|c| {
            c.kind == pipec_syntax::lexer::CommentKind::FileDoc
                || c.kind == pipec_syntax::lexer::CommentKind::Line
        })
        .filter(|c| c.kind == pipec_syntax::lexer::CommentKind::FileDoc)
        .map(|c| c.text.as_str())
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The settings a node of `kind` takes in its body, for editors' completion.
pub fn node_settings(kind: ast::NodeKind) -> Vec<&'static str> {
    nodes::body::allowed_settings(kind)
}

/// The file name under `prompts/` that `file("...")` names (`triage/classify` →
/// `triage/classify.jinja`).
pub fn prompt_file_name(written: &str) -> String {
    prompt::template_name(written)
}
