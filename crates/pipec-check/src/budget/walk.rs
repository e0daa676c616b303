//! The worst case of a prompt template: a walk over minijinja's syntax tree (as the
//! checker's own, `prompt.rs`) that, instead of checking names, adds up what each part
//! can print.
//!
//! Text and values of a fixed width (numbers, booleans, enums) are text: counted with the
//! tokenizer, once, or once per item of a loop whose length is bounded. What a parameter
//! with a byte cap prints is drawn from that cap (its *pool*): the walk notes where the
//! value is printed, how many times, and which loops run over its lists, and the caller
//! spends the cap where it makes the most tokens. What nothing bounds is named, by its
//! path, and never given a number.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use minijinja::machinery::ast::{self as j, CallArg, Expr, Stmt};

use super::sizes;
use super::tokens::Counter;
use crate::hir::{Hir, ParamDef, Template};
use crate::ty::Ty;

/// Includes followed inside one another before the walk stops (a cycle is skipped
/// outright; this bounds a long chain).
const MAX_INCLUDE_DEPTH: usize = 16;

/// What a template can print, before the caps are spent.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    /// Tokens of everything printed whatever the inputs hold: the text, the widest
    /// fixed-width values, one item of every loop.
    pub fixed_tokens: f64,
    /// The text printed with every input empty: the template alone.
    pub bare: String,
    /// How many times `output_schema` is printed.
    pub schema_prints: f64,
    /// Per capped parameter (by index): where its content is printed, and its loops.
    pub pools: BTreeMap<usize, Pool>,
    /// Per parameter (by index): the paths printed that nothing bounds.
    pub unbounded: BTreeMap<usize, BTreeSet<String>>,
    /// `role(...)` markers: each starts a chat message.
    pub roles: u64,
}

/// What a template prints of one capped parameter.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    /// Each place its content is printed: the path into the value and how many times
    /// the place is printed (loops over other values repeat it).
    pub prints: Vec<(Vec<String>, f64)>,
    /// Each loop over one of its lists: tokens printed per item (beyond the item's
    /// content), and the fewest bytes an item takes.
    pub loops: Vec<(f64, u64)>,
}

impl Pool {
    /// How many times one byte of the value can be printed: the most, over every place,
    /// of the prints of that place and of every place that prints a part of it or a
    /// value it is part of.
    pub(crate) fn reprints(&self) -> f64 {
        let overlaps = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
        self.prints
            .iter()
            .map(|(path, _)| {
                self.prints
                    .iter()
                    .filter(|(other, _)| overlaps(path, other))
                    .map(|(_, times)| times)
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    }
}

/// A value as the walk knows it.
#[derive(Clone, Debug)]
enum Val {
    /// Part of a parameter's value: which parameter, the path into it, its type, and at
    /// most how many items it holds when a slice says so.
    Param {
        param: usize,
        path: Vec<String>,
        ty: Ty,
        at_most: Option<u64>,
    },
    /// Text known here: a constant, or the widest rendering of a computed number.
    Text(String),
    /// `output_schema`.
    Schema,
    /// Several values printed together (`a ~ b`).
    Many(Vec<Val>),
    /// One of several values (`a or b`, `x if c else y`, `v | default(d)`).
    Either(Vec<Val>),
    /// Nothing is printed (`role(...)`), or nothing pipec can size.
    Nothing,
    /// What pipec cannot size (a macro's output): named in the result as unbounded.
    Opaque(String),
}

/// How the items of a loop are bounded.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// At most this many, whatever they hold.
    Count(u64),
    /// As many as fit in the byte cap of the parameter, each taking at least this many
    /// bytes.
    Pool { bytes_per_item: u64 },
    /// Nothing bounds them.
    Unbounded,
}

struct Frame {
    text: String,
    /// Tokens already counted (loops closed inside this frame).
    tokens: f64,
    schema: f64,
    /// The parameter whose list this loop runs over, if any.
    over: Option<usize>,
    bound: Bound,
    /// Whether anything the loop prints has no bound.
    unbounded_inside: bool,
    /// Bytes an item takes beyond its fewest for the fixed-width values the loop prints
    /// at their widest (`-9223372036854775808` is 20 bytes of JSON, not 1).
    widest_bytes: u64,
}

impl Frame {
    fn new(over: Option<usize>, bound: Bound) -> Frame {
        Frame {
            text: String::new(),
            tokens: 0.0,
            schema: 0.0,
            over,
            bound,
            unbounded_inside: false,
            widest_bytes: 0,
        }
    }
}

struct Walk<'a> {
    hir: &'a Hir,
    params: &'a [ParamDef],
    caps: Vec<Option<u64>>,
    template: &'a Template,
    counter: &'a Counter,
    frames: Vec<Frame>,
    shape: Shape,
    includes: Vec<String>,
}

/// The shape of `template`, printed over `params` (with their byte caps, by index).
pub(crate) fn walk(
    hir: &Hir,
    params: &[ParamDef],
    caps: Vec<Option<u64>>,
    template: &Template,
    counter: &Counter,
) -> Shape {
    let mut w = Walk {
        hir,
        params,
        caps,
        template,
        counter,
        frames: vec![Frame::new(None, Bound::Count(1))],
        shape: Shape::default(),
        includes: Vec::new(),
    };
    let mut locals = vec![HashMap::new()];
    w.template_by_name(&template.entry, &mut locals);
    if let Some(top) = w.frames.pop() {
        w.shape.fixed_tokens += counter.count(&top.text) as f64 + top.tokens;
        w.shape.schema_prints += top.schema;
    }
    w.shape
}

type Locals = Vec<HashMap<String, Val>>;

impl Walk<'_> {
    fn template_by_name(&mut self, name: &str, locals: &mut Locals) {
        if self.includes.len() >= MAX_INCLUDE_DEPTH || self.includes.iter().any(|n| n == name) {
            return;
        }
        let Some((_, text)) = self.template.sources.iter().find(|(n, _)| n == name) else {
            return;
        };
        // The checker refused a template nested too deep before this; parse it as the
        // runtime does.
        if pipec_base::nesting::template_too_deep(text).is_some() {
            return;
        }
        let Ok(tree) =
            minijinja::machinery::parse(text, name, minijinja::syntax::SyntaxConfig::default())
        else {
            return;
        };
        self.includes.push(name.to_string());
        self.stmt(&tree, locals);
        self.includes.pop();
    }

    fn stmts(&mut self, body: &[Stmt<'_>], locals: &mut Locals) {
        for s in body {
            self.stmt(s, locals);
        }
    }

    fn stmt(&mut self, s: &Stmt<'_>, locals: &mut Locals) {
        match s {
            Stmt::Template(t) => self.stmts(&t.children, locals),
            Stmt::EmitRaw(raw) => {
                if self.frames.len() == 1 {
                    self.shape.bare.push_str(raw.raw);
                }
                self.text(raw.raw);
            }
            Stmt::EmitExpr(e) => {
                let v = self.expr(&e.expr, locals);
                self.print(v);
            }
            Stmt::ForLoop(f) => self.for_loop(f, locals),
            Stmt::IfCond(i) => {
                self.larger_branch(|w| {
                    w.stmts(&i.true_body, locals);
                    w.next_branch();
                    w.stmts(&i.false_body, locals);
                });
            }
            Stmt::WithBlock(b) => {
                let mut scope = HashMap::new();
                for (target, value) in &b.assignments {
                    let v = self.expr(value, locals);
                    bind(target, v, &mut scope);
                }
                locals.push(scope);
                self.stmts(&b.body, locals);
                locals.pop();
            }
            Stmt::Set(set) => {
                let v = self.expr(&set.expr, locals);
                if let Some(top) = locals.last_mut() {
                    bind(&set.target, v, top);
                }
            }
            Stmt::SetBlock(set) => {
                // Counted where it is captured, once.
                self.stmts(&set.body, locals);
                if let Some(top) = locals.last_mut() {
                    bind(&set.target, Val::Nothing, top);
                }
            }
            Stmt::AutoEscape(a) => self.stmts(&a.body, locals),
            Stmt::FilterBlock(fb) => self.stmts(&fb.body, locals),
            Stmt::Block(b) => self.stmts(&b.body, locals),
            Stmt::Include(i) => self.include(&i.name, locals),
            Stmt::Extends(e) => self.include(&e.name, locals),
            Stmt::Macro(m) => {
                if let Some(top) = locals.last_mut() {
                    top.insert(
                        m.name.to_string(),
                        Val::Opaque(format!("the macro `{}`", m.name)),
                    );
                }
            }
            Stmt::CallBlock(cb) => {
                let v = self.expr(&cb.call.expr, locals);
                self.print(v);
            }
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    fn include(&mut self, target: &Expr<'_>, locals: &mut Locals) {
        if let Expr::Const(c) = target
            && let Some(raw) = c.value.as_str()
        {
            let name = crate::prompt::template_name(raw);
            self.template_by_name(&name, locals);
        }
    }

    fn for_loop(&mut self, f: &j::ForLoop<'_>, locals: &mut Locals) {
        let iter = self.expr(&f.iter, locals);
        let (over, bound, item) = self.items_of(&iter);
        let mut scope = HashMap::new();
        bind(&f.target, item, &mut scope);
        scope.insert("loop".to_string(), Val::Text(sizes::widest_int()));
        locals.push(scope);
        self.frames.push(Frame::new(over, bound));
        self.stmts(&f.body, locals);
        locals.pop();
        if let Some(frame) = self.frames.pop() {
            self.close(frame, &iter);
        }
        // `{% else %}` runs when there are no items: once.
        self.stmts(&f.else_body, locals);
    }

    /// Adds what a loop printed to the frame around it.
    fn close(&mut self, frame: Frame, iter: &Val) {
        let per_item = self.per_item(&frame.text) + frame.tokens;
        let printed = per_item > 0.0 || frame.schema > 0.0 || frame.unbounded_inside;
        let times = match frame.bound {
            Bound::Count(n) => n as f64,
            // One item holds what the content of the cap prints; the rest of the items
            // are what the pool's loops spend.
            Bound::Pool { bytes_per_item } => {
                if let Some(p) = frame.over {
                    let outer = self.times_for(p);
                    self.shape.pools.entry(p).or_default().loops.push((
                        per_item * outer,
                        bytes_per_item.saturating_add(frame.widest_bytes),
                    ));
                }
                1.0
            }
            Bound::Unbounded => {
                if printed {
                    self.unbounded(iter);
                }
                1.0
            }
        };
        if let Some(parent) = self.frames.last_mut() {
            parent.tokens += per_item * times;
            parent.schema += frame.schema * times;
            parent.unbounded_inside |= frame.unbounded_inside;
        }
    }

    /// The tokens of a loop's text per item, counted over a few items in a row: text
    /// alone (`, `) can take more tokens than it does between its neighbours (`a, b`).
    fn per_item(&self, text: &str) -> f64 {
        const ITEMS: usize = 4;
        if text.is_empty() {
            return 0.0;
        }
        self.counter.count(&text.repeat(ITEMS)) as f64 / ITEMS as f64
    }

    /// Runs `body`, which walks alternatives separated by [`Walk::next_branch`], and keeps
    /// the text of the one that prints the most (what a capped value prints is noted in
    /// every branch, an upper bound).
    fn larger_branch(&mut self, body: impl FnOnce(&mut Self)) {
        let depth = self.frames.len();
        self.frames.push(Frame::new(None, Bound::Count(1)));
        body(self);
        let mut best: Option<Frame> = None;
        let mut best_tokens = -1.0;
        while self.frames.len() > depth {
            let Some(frame) = self.frames.pop() else {
                break;
            };
            let tokens = self.counter.count(&frame.text) as f64 + frame.tokens;
            if tokens > best_tokens {
                best_tokens = tokens;
                best = Some(frame);
            }
        }
        if let (Some(branch), Some(parent)) = (best, self.frames.last_mut()) {
            parent.text.push_str(&branch.text);
            parent.tokens += branch.tokens;
            parent.schema += branch.schema;
            parent.unbounded_inside |= branch.unbounded_inside;
            parent.widest_bytes = parent.widest_bytes.saturating_add(branch.widest_bytes);
        }
    }

    /// Starts the next alternative of [`Walk::larger_branch`].
    fn next_branch(&mut self) {
        self.frames.push(Frame::new(None, Bound::Count(1)));
    }

    /// How many times what is printed here is repeated for the content of `param`: the
    /// loops around it over other values (a loop over `param`'s own list prints each
    /// item's content once).
    fn times_for(&self, param: usize) -> f64 {
        self.frames
            .iter()
            .skip(1)
            .filter(|f| f.over != Some(param))
            .map(|f| match (f.bound, f.over) {
                (Bound::Count(n), _) => n as f64,
                (Bound::Pool { bytes_per_item }, Some(q)) => {
                    self.caps[q].map_or(1.0, |cap| (cap / bytes_per_item).max(1) as f64)
                }
                _ => 1.0,
            })
            .product()
    }

    fn text(&mut self, s: &str) {
        if let Some(frame) = self.frames.last_mut() {
            frame.text.push_str(s);
        }
    }

    fn print(&mut self, v: Val) {
        match v {
            Val::Text(s) => self.text(&s),
            Val::Schema => {
                if let Some(frame) = self.frames.last_mut() {
                    frame.schema += 1.0;
                }
            }
            Val::Many(vs) => vs.into_iter().for_each(|v| self.print(v)),
            Val::Either(vs) => self.larger_branch(|w| {
                for (i, v) in vs.into_iter().enumerate() {
                    if i > 0 {
                        w.next_branch();
                    }
                    w.print(v);
                }
            }),
            Val::Nothing => {}
            Val::Opaque(what) => self.opaque(what),
            Val::Param {
                param, path, ty, ..
            } => {
                if let Some(widest) = sizes::widest_text(self.hir, &ty) {
                    self.text(&widest);
                    if self.caps[param].is_some()
                        && let Some(frame) =
                            self.frames.iter_mut().rev().find(|f| f.over == Some(param))
                    {
                        frame.widest_bytes = frame
                            .widest_bytes
                            .saturating_add(sizes::widest_extra_bytes(self.hir, &ty));
                    }
                } else if self.caps[param].is_some() {
                    let times = self.times_for(param);
                    self.shape
                        .pools
                        .entry(param)
                        .or_default()
                        .prints
                        .push((path, times));
                } else {
                    self.unbounded(&Val::Param {
                        param,
                        path,
                        ty,
                        at_most: None,
                    });
                }
            }
        }
    }

    /// Notes a value (or a loop over it) that nothing bounds.
    fn unbounded(&mut self, v: &Val) {
        match v {
            Val::Param { param, path, .. } => {
                let name = &self.params[*param].name;
                let shown = path.iter().fold(name.clone(), |mut s, seg| {
                    if seg != "[]" {
                        s.push('.');
                    }
                    s.push_str(seg);
                    s
                });
                self.shape
                    .unbounded
                    .entry(*param)
                    .or_default()
                    .insert(shown);
            }
            Val::Opaque(what) => self.opaque(what.clone()),
            _ => self.opaque("a loop over a computed list".into()),
        }
        for f in &mut self.frames {
            f.unbounded_inside = true;
        }
    }

    fn opaque(&mut self, what: String) {
        // Kept under no parameter: `usize::MAX` names the template itself.
        self.shape
            .unbounded
            .entry(usize::MAX)
            .or_default()
            .insert(what);
        for f in &mut self.frames {
            f.unbounded_inside = true;
        }
    }

    fn lookup(&self, name: &str, locals: &Locals) -> Val {
        if let Some(v) = locals.iter().rev().find_map(|s| s.get(name)) {
            return v.clone();
        }
        if let Some(i) = self.params.iter().position(|p| p.name == name) {
            return Val::Param {
                param: i,
                path: Vec::new(),
                ty: self.params[i].ty.clone(),
                at_most: None,
            };
        }
        if name == "output_schema" {
            return Val::Schema;
        }
        Val::Nothing
    }

    fn expr(&mut self, e: &Expr<'_>, locals: &Locals) -> Val {
        match e {
            Expr::Var(v) => self.lookup(v.id, locals),
            Expr::Const(c) => Val::Text(c.value.to_string()),
            Expr::GetAttr(g) => {
                let base = self.expr(&g.expr, locals);
                self.field(base, g.name)
            }
            Expr::GetItem(g) => {
                let base = self.expr(&g.expr, locals);
                match &g.subscript_expr {
                    Expr::Const(k) if k.value.as_str().is_some() => {
                        self.field(base, k.value.as_str().unwrap_or_default())
                    }
                    _ => self.item(base),
                }
            }
            Expr::Slice(s) => {
                let base = self.expr(&s.expr, locals);
                let n = slice_length(s);
                match base {
                    Val::Param {
                        param,
                        path,
                        ty,
                        at_most,
                    } => Val::Param {
                        param,
                        path,
                        ty,
                        at_most: match (at_most, n) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        },
                    },
                    other => other,
                }
            }
            Expr::Filter(f) => self.filter(f, locals),
            Expr::Test(_) | Expr::Compare(_) => Val::Text("false".into()),
            Expr::UnaryOp(u) => match u.op {
                j::UnaryOpKind::Not => Val::Text("false".into()),
                _ => self.expr(&u.expr, locals),
            },
            Expr::BinOp(b) => {
                let left = self.expr(&b.left, locals);
                let right = self.expr(&b.right, locals);
                match b.op {
                    // `a ~ b` and `a + b` print both; `a or b`, `a and b` one of them.
                    j::BinOpKind::Concat | j::BinOpKind::Add => Val::Many(vec![left, right]),
                    j::BinOpKind::ScOr | j::BinOpKind::ScAnd => Val::Either(vec![left, right]),
                    j::BinOpKind::Eq
                    | j::BinOpKind::Ne
                    | j::BinOpKind::Lt
                    | j::BinOpKind::Lte
                    | j::BinOpKind::Gt
                    | j::BinOpKind::Gte
                    | j::BinOpKind::In => Val::Text("false".into()),
                    // Arithmetic prints a number.
                    _ => Val::Text(sizes::widest_float()),
                }
            }
            Expr::IfExpr(i) => {
                let yes = self.expr(&i.true_expr, locals);
                let no = i
                    .false_expr
                    .as_ref()
                    .map_or(Val::Nothing, |x| self.expr(x, locals));
                Val::Either(vec![yes, no])
            }
            Expr::Call(c) => self.call(c, locals),
            Expr::List(l) => Val::Many(l.items.iter().map(|x| self.expr(x, locals)).collect()),
            Expr::Tuple(t) => Val::Many(t.items.iter().map(|x| self.expr(x, locals)).collect()),
            Expr::Map(m) => Val::Many(
                m.keys
                    .iter()
                    .chain(&m.values)
                    .map(|x| self.expr(x, locals))
                    .collect(),
            ),
        }
    }

    /// The field `name` of a value (`loop.index` and the like stay the numbers they are).
    fn field(&self, base: Val, name: &str) -> Val {
        self.descend(base, name, |hir, ty| sizes::field_type(hir, ty, name))
    }

    /// An item of a list value (or a value of a map).
    fn item(&self, base: Val) -> Val {
        self.descend(base, "[]", sizes::item_type)
    }

    /// A part of a parameter's value: one more step of its path, of the type `part` says.
    fn descend(&self, base: Val, step: &str, part: impl Fn(&Hir, &Ty) -> Ty) -> Val {
        match base {
            Val::Param {
                param,
                mut path,
                ty,
                ..
            } => {
                path.push(step.to_string());
                Val::Param {
                    param,
                    path,
                    ty: part(self.hir, &ty),
                    at_most: None,
                }
            }
            other => other,
        }
    }

    fn filter(&mut self, f: &j::Filter<'_>, locals: &Locals) -> Val {
        let base = f
            .expr
            .as_ref()
            .map_or(Val::Nothing, |x| self.expr(x, locals));
        let args: Vec<Val> = f
            .args
            .iter()
            .map(|a| match a {
                CallArg::Pos(x)
                | CallArg::Kwarg(_, x)
                | CallArg::PosSplat(x)
                | CallArg::KwargSplat(x) => self.expr(x, locals),
            })
            .collect();
        match f.name {
            "length" | "count" | "wordcount" | "int" => Val::Text(sizes::widest_int()),
            "float" | "round" | "sum" => Val::Text(sizes::widest_float()),
            "first" | "last" | "random" | "min" | "max" => self.item(base),
            // A default prints when the value is empty: either may be printed.
            "default" | "d" => Val::Either(std::iter::once(base).chain(args).collect()),
            "join" => self.join(base, args.into_iter().next()),
            // Everything else prints its value, changed in form (`upper`, `tojson`,
            // `trim`, `items`, `sort`...): its size is the value's.
            _ => base,
        }
    }

    /// `list | join(sep)`: a loop over the list that prints each item and a separator.
    fn join(&mut self, list: Val, sep: Option<Val>) -> Val {
        let Val::Param { .. } = &list else {
            return list;
        };
        let (over, bound, item) = self.items_of(&list);
        self.frames.push(Frame::new(over, bound));
        self.print(item);
        if let Some(sep) = sep {
            self.print(sep);
        }
        if let Some(frame) = self.frames.pop() {
            self.close(frame, &list);
        }
        Val::Nothing
    }

    /// What a loop over `list` runs over: the parameter, how its items are bounded, and
    /// an item.
    fn items_of(&self, list: &Val) -> (Option<usize>, Bound, Val) {
        let Val::Param {
            param,
            path,
            ty,
            at_most,
        } = list
        else {
            return (None, Bound::Unbounded, Val::Nothing);
        };
        let item_ty = sizes::item_type(self.hir, ty);
        // An item takes its own bytes and a comma.
        let per = sizes::min_json_bytes(self.hir, &item_ty).saturating_add(1);
        let bound = match (self.caps[*param], at_most) {
            (Some(cap), Some(n)) => Bound::Count((*n).min(cap / per)),
            (Some(_), None) => Bound::Pool {
                bytes_per_item: per,
            },
            (None, Some(n)) => Bound::Count(*n),
            (None, None) if path.is_empty() => {
                match sizes::list_length(self.hir, &self.params[*param]) {
                    Some(n) => Bound::Count(n),
                    None => Bound::Unbounded,
                }
            }
            (None, None) => Bound::Unbounded,
        };
        (Some(*param), bound, self.item(list.clone()))
    }

    fn call(&mut self, c: &j::Call<'_>, locals: &Locals) -> Val {
        match &c.expr {
            Expr::Var(v) if v.id == "role" && locals.iter().all(|s| !s.contains_key("role")) => {
                self.shape.roles += 1;
                Val::Nothing
            }
            // A method: `x.items()`, `name.upper()`; its size is the value's.
            Expr::GetAttr(g) => self.expr(&g.expr, locals),
            Expr::Var(v) => match self.lookup(v.id, locals) {
                o @ Val::Opaque(_) => o,
                _ => Val::Opaque(format!("a call of `{}`", v.id)),
            },
            _ => Val::Opaque("a computed call".into()),
        }
    }
}

/// Binds a loop or `set` target: a name to the value; each name of a tuple
/// (`for k, v in x | items`) to the whole value, as an upper bound.
fn bind(target: &Expr<'_>, v: Val, scope: &mut HashMap<String, Val>) {
    match target {
        Expr::Var(var) => {
            scope.insert(var.id.to_string(), v);
        }
        Expr::Tuple(t) => {
            for item in &t.items {
                bind(item, v.clone(), scope);
            }
        }
        Expr::List(l) => {
            for item in &l.items {
                bind(item, v.clone(), scope);
            }
        }
        _ => {}
    }
}

/// How many items `x[a:b]` holds at most, when its bounds are constants that say.
fn slice_length(s: &j::Slice<'_>) -> Option<u64> {
    let int = |e: &Option<Expr<'_>>| match e {
        Some(Expr::Const(c)) => i64::try_from(c.value.clone()).ok(),
        Some(Expr::UnaryOp(u)) if matches!(u.op, j::UnaryOpKind::Neg) => match &u.expr {
            Expr::Const(c) => i64::try_from(c.value.clone()).ok().map(|v| -v),
            _ => None,
        },
        _ => None,
    };
    match (&s.start, int(&s.start), &s.stop, int(&s.stop)) {
        (None, _, Some(_), Some(stop)) if stop >= 0 => Some(stop as u64),
        (Some(_), Some(start), None, _) if start < 0 => Some(start.unsigned_abs()),
        (Some(_), Some(start), Some(_), Some(stop)) if start >= 0 && stop >= start => {
            Some((stop - start) as u64)
        }
        (Some(_), Some(start), Some(_), Some(stop)) if start < 0 && stop <= 0 && stop >= start => {
            Some((stop - start) as u64)
        }
        _ => None,
    }
}
