//! JSON Schema as pipec types: a type for each schema, and the record types
//! (`type Name { ... }`) that objects with properties become, named after where they
//! were met and shared when the same schema comes back, written as a `.pipe` file writes
//! them (`pipec tools pull`). A schema too loose to type (tuples, `allOf` of several) is
//! `json`; several kinds of value are `json` too, but keep their kinds for [`crate::fit`],
//! which reads declared and offered parameters with this same model.
//!
//! Records read from a server (results) may leave out properties whose names are not
//! pipec field names, since a record takes fields it does not declare; records sent to
//! it (arguments) are written exactly, so such an object stays a `map<json>`.

use std::collections::HashMap;

use serde_json::Value;

use pipec_base::identifiers::{Taken, camel_case, escape, is_identifier};

/// Which way values of a schema travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Arguments pipec sends.
    Input,
    /// Results and contents pipec reads.
    Output,
}

/// A pipec type.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    String,
    Int,
    Float,
    Bool,
    Bytes,
    Json,
    /// A union of string literals (one literal is a literal type).
    Literals(Vec<String>),
    /// A declared record type, by name.
    Record(String),
    List(Box<PipeType>),
    Map(Box<PipeType>),
    /// One of several types that no pipec type names as one (`anyOf` of a string and a
    /// number, `"type": ["string", "object"]`): `json` in a `.pipe` file, and what the
    /// fit check reads as "any of these kinds".
    Either(Vec<PipeType>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct PipeType {
    pub shape: Shape,
    pub optional: bool,
}

impl PipeType {
    fn of(shape: Shape) -> PipeType {
        PipeType {
            shape,
            optional: false,
        }
    }

    pub fn json() -> PipeType {
        PipeType::of(Shape::Json)
    }

    /// The type or `null`; `json` holds `null` already (one of several kinds keeps
    /// it, for the fit check, and is written `json` all the same).
    pub fn optional(mut self) -> PipeType {
        if self.shape != Shape::Json {
            self.optional = true;
        }
        self
    }

    /// Whether it is written `json`: any value, or one of several kinds.
    pub fn is_json(&self) -> bool {
        matches!(self.shape, Shape::Json | Shape::Either(_))
    }

    /// The type as written in a `.pipe` file.
    pub fn text(&self) -> String {
        self.written(&|name| name.to_string())
    }

    /// The type as written, with each record type named by `record`.
    fn written(&self, record: &dyn Fn(&str) -> String) -> String {
        let base = match &self.shape {
            Shape::String => "string".to_string(),
            Shape::Int => "int".to_string(),
            Shape::Float => "float".to_string(),
            Shape::Bool => "bool".to_string(),
            Shape::Bytes => "bytes".to_string(),
            Shape::Json | Shape::Either(_) => "json".to_string(),
            Shape::Literals(values) => values
                .iter()
                .map(|v| escape(v))
                .collect::<Vec<_>>()
                .join(" | "),
            Shape::Record(name) => record(name),
            Shape::List(item) => {
                // `[]` binds to one term: a list of unions or of optional values needs
                // parentheses.
                let needs_parens = (item.optional && !item.is_json())
                    || matches!(&item.shape, Shape::Literals(v) if v.len() > 1);
                if needs_parens {
                    format!("({})[]", item.written(record))
                } else {
                    format!("{}[]", item.written(record))
                }
            }
            Shape::Map(value) => format!("map<{}>", value.written(record)),
        };
        if self.optional && !self.is_json() {
            format!("{base}?")
        } else {
            base
        }
    }

    /// The record types it names, directly or in lists and maps.
    fn records<'t>(&'t self, out: &mut Vec<&'t str>) {
        match &self.shape {
            Shape::Record(name) => out.push(name),
            Shape::List(inner) | Shape::Map(inner) => inner.records(out),
            // Written `json`: the records its branches made are not declared.
            _ => {}
        }
    }

    /// The value as a pipec literal, when it is one that surely fits this type (a
    /// parameter's default); `None` otherwise.
    pub fn literal(&self, value: &Value) -> Option<String> {
        match (&self.shape, value) {
            (_, Value::Null) if self.optional => Some("null".into()),
            (Shape::Json | Shape::Either(_), v) => literal_of(v),
            (Shape::String, Value::String(s)) => Some(escape(s)),
            (Shape::Literals(set), Value::String(s)) if set.contains(s) => Some(escape(s)),
            (Shape::Int, Value::Number(n)) => n.as_i64().map(|i| i.to_string()),
            (Shape::Float, Value::Number(n)) => number_literal(n),
            (Shape::Bool, Value::Bool(b)) => Some(b.to_string()),
            (Shape::List(item), Value::Array(items)) => {
                let parts: Option<Vec<String>> = items.iter().map(|i| item.literal(i)).collect();
                parts.map(|p| format!("[{}]", p.join(", ")))
            }
            (Shape::Map(of), Value::Object(entries)) => {
                let parts: Option<Vec<String>> = entries
                    .iter()
                    .map(|(k, v)| of.literal(v).map(|v| format!("{}: {v}", record_key(k))))
                    .collect();
                parts.map(|p| format!("{{ {} }}", p.join(", ")))
            }
            _ => None,
        }
    }
}

/// A number as a pipec literal: no exponent, and an integer only within 64 bits.
fn number_literal(n: &serde_json::Number) -> Option<String> {
    if let Some(i) = n.as_i64() {
        return Some(i.to_string());
    }
    let f = n.as_f64()?;
    let text = f.to_string();
    // Rust prints floats without an exponent; one without a dot reads as an integer,
    // which must fit in 64 bits.
    if text.contains('.') || text.parse::<i64>().is_ok() {
        Some(text)
    } else {
        None
    }
}

fn record_key(key: &str) -> String {
    if is_identifier(key) {
        key.to_string()
    } else {
        escape(key)
    }
}

/// Any JSON value as a pipec literal (for `json`), where it can be written.
fn literal_of(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => number_literal(n),
        Value::String(s) => Some(escape(s)),
        Value::Array(items) => {
            let parts: Option<Vec<String>> = items.iter().map(literal_of).collect();
            parts.map(|p| format!("[{}]", p.join(", ")))
        }
        Value::Object(entries) => {
            let parts: Option<Vec<String>> = entries
                .iter()
                .map(|(k, v)| literal_of(v).map(|v| format!("{}: {v}", record_key(k))))
                .collect();
            parts.map(|p| format!("{{ {} }}", p.join(", ")))
        }
    }
}

/// A record type to declare.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub name: String,
    pub doc: Option<String>,
    pub fields: Vec<Field>,
    /// Properties left out: their names are not pipec field names.
    pub left_out: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub ty: PipeType,
    pub doc: Option<String>,
}

/// How deep schemas are followed; deeper ones are `json` (a server's schema may be
/// absurdly nested, or refer to itself through aliases).
const MAX_DEPTH: usize = 32;

/// The record types made so far, and the names they took.
pub struct Types<'a> {
    taken: &'a mut Taken,
    records: Vec<Record>,
    /// The schemas already made into types, by their text and direction.
    seen: HashMap<(String, Direction), PipeType>,
    /// `$ref` definitions already made into types (or being made, for records that
    /// refer to themselves), by their name, the text of the schema they are defined in
    /// (two tools may define one name differently) and direction.
    refs: HashMap<(String, String, Direction), PipeType>,
    /// The name each record wanted, by the name it got: names are given again once
    /// twins and orphans are gone, so that no `Person4` stands beside no `Person2`.
    wanted: HashMap<String, String>,
}

/// The records worth declaring, and what became of the others' names.
pub struct Declared {
    pub records: Vec<Record>,
    /// Every record made, by the name it was made under → the name it is declared
    /// under (its twin's, when it was merged into one).
    renamed: HashMap<String, String>,
}

impl Declared {
    /// A type as written, naming merged records by the record they were merged into.
    pub fn text(&self, ty: &PipeType) -> String {
        ty.written(&|name| {
            self.renamed
                .get(name)
                .cloned()
                .unwrap_or_else(|| name.to_string())
        })
    }
}

impl<'a> Types<'a> {
    pub fn new(taken: &'a mut Taken) -> Types<'a> {
        Types {
            taken,
            records: Vec::new(),
            seen: HashMap::new(),
            refs: HashMap::new(),
            wanted: HashMap::new(),
        }
    }

    /// A name for a record, `wanted` or the first free one like it.
    fn claim(&mut self, wanted: &str) -> String {
        let name = self.taken.claim(wanted);
        self.wanted.insert(name.clone(), wanted.to_string());
        name
    }

    /// The records made, in the order they were met.
    #[cfg(test)]
    pub fn into_records(self) -> Vec<Record> {
        self.records
    }

    /// The records to declare for types `used`: each structurally identical group of
    /// records (the same fields of the same types, whatever their names and docs) as
    /// its first, and only the records `used` reaches. A schema met in several places
    /// (a tool's argument and another's result, one definition in two tools) or a
    /// branch of `anyOf` that became `json` would otherwise leave twins and orphans.
    pub fn finish<'t>(self, used: impl IntoIterator<Item = &'t PipeType>) -> Declared {
        let twin_of = twins(&self.records);
        let by_name: HashMap<&str, &Record> =
            self.records.iter().map(|r| (r.name.as_str(), r)).collect();
        let canonical = |name: &str| {
            twin_of
                .get(name)
                .cloned()
                .unwrap_or_else(|| name.to_string())
        };
        let mut reached: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut work: Vec<String> = Vec::new();
        for ty in used {
            let mut names = Vec::new();
            ty.records(&mut names);
            work.extend(names.into_iter().map(canonical));
        }
        while let Some(name) = work.pop() {
            if !reached.insert(name.clone()) {
                continue;
            }
            if let Some(record) = by_name.get(name.as_str()) {
                for field in &record.fields {
                    let mut names = Vec::new();
                    field.ty.records(&mut names);
                    work.extend(names.into_iter().map(canonical));
                }
            }
        }
        // The kept records take their names again, in order, now that the others'
        // are free.
        for record in &self.records {
            self.taken.release(&record.name);
        }
        let mut final_name: HashMap<String, String> = HashMap::new();
        for record in &self.records {
            if !twin_of.contains_key(&record.name) && reached.contains(&record.name) {
                let wanted = self.wanted.get(&record.name).unwrap_or(&record.name);
                final_name.insert(record.name.clone(), self.taken.claim(wanted));
            }
        }
        let renamed: HashMap<String, String> = self
            .records
            .iter()
            .filter_map(|r| {
                let name = final_name.get(&canonical(&r.name))?;
                Some((r.name.clone(), name.clone()))
            })
            .collect();
        let records = self
            .records
            .iter()
            .filter_map(|r| {
                let name = final_name.get(&r.name)?;
                // Its fields keep the names they were made with: `Declared::text`
                // writes them under their final ones.
                Some(Record {
                    name: name.clone(),
                    ..r.clone()
                })
            })
            .collect();
        Declared { records, renamed }
    }

    /// The type of `schema`, whose `$ref`s point into `root`; `hint` names a record
    /// it becomes (`GetDealResult`).
    pub fn type_of(
        &mut self,
        schema: &Value,
        root: &Value,
        hint: &str,
        direction: Direction,
    ) -> PipeType {
        self.convert(schema, root, hint, direction, 0)
    }

    fn convert(
        &mut self,
        schema: &Value,
        root: &Value,
        hint: &str,
        direction: Direction,
        depth: usize,
    ) -> PipeType {
        let Value::Object(s) = schema else {
            return PipeType::json();
        };
        if depth > MAX_DEPTH {
            return PipeType::json();
        }
        let next = depth + 1;
        if let Some(Value::String(reference)) = s.get("$ref") {
            return self.reference(reference, root, direction, next);
        }
        if let Some(Value::Array(all)) = s.get("allOf") {
            return match all.as_slice() {
                [one] => self.convert(one, root, hint, direction, next),
                _ => PipeType::json(),
            };
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = s.get(key) {
                return self.alternatives(branches, root, hint, direction, next);
            }
        }
        if let Some(Value::Array(values)) = s.get("enum") {
            return enumeration(values);
        }
        if let Some(value) = s.get("const") {
            return match value {
                Value::String(v) => PipeType::of(Shape::Literals(vec![v.clone()])),
                other => enumeration(std::slice::from_ref(other)),
            };
        }
        match s.get("type") {
            Some(Value::String(t)) => self.of_type(t, schema, root, hint, direction, next),
            Some(Value::Array(types)) => {
                let named: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                let nullable = named.contains(&"null");
                let rest: Vec<&str> = named.into_iter().filter(|t| *t != "null").collect();
                let ty = match rest.as_slice() {
                    [] => PipeType::json(),
                    [one] => self.of_type(one, schema, root, hint, direction, next),
                    [a, b] if is_numbers(a, b) => PipeType::of(Shape::Float),
                    many => PipeType::of(Shape::Either(many.iter().map(|t| kind(t)).collect())),
                };
                if nullable { ty.optional() } else { ty }
            }
            _ if s.contains_key("properties") => self.object(schema, root, hint, direction, next),
            _ if s.contains_key("items") => {
                self.of_type("array", schema, root, hint, direction, next)
            }
            _ => PipeType::json(),
        }
    }

    fn of_type(
        &mut self,
        name: &str,
        schema: &Value,
        root: &Value,
        hint: &str,
        direction: Direction,
        depth: usize,
    ) -> PipeType {
        match name {
            "string" => {
                if schema.get("contentEncoding").and_then(Value::as_str) == Some("base64") {
                    PipeType::of(Shape::Bytes)
                } else {
                    PipeType::of(Shape::String)
                }
            }
            "integer" => PipeType::of(Shape::Int),
            "number" => PipeType::of(Shape::Float),
            "boolean" => PipeType::of(Shape::Bool),
            "array" => {
                let item = match schema.get("items") {
                    Some(items @ Value::Object(_)) => {
                        self.convert(items, root, &format!("{hint}Item"), direction, depth)
                    }
                    // A tuple (a list of schemas) or no item schema: anything.
                    _ => PipeType::json(),
                };
                PipeType::of(Shape::List(Box::new(item)))
            }
            "object" => self.object(schema, root, hint, direction, depth),
            _ => PipeType::json(),
        }
    }

    /// `anyOf` / `oneOf`: `null` branches make the rest optional; string literals join
    /// into one union; anything else of several kinds is `json`.
    fn alternatives(
        &mut self,
        branches: &[Value],
        root: &Value,
        hint: &str,
        direction: Direction,
        depth: usize,
    ) -> PipeType {
        let is_null = |b: &Value| {
            b.get("type").and_then(Value::as_str) == Some("null")
                || b.get("const").is_some_and(Value::is_null)
        };
        let nullable = branches.iter().any(is_null);
        let rest: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
        let types: Vec<PipeType> = rest
            .iter()
            .map(|b| self.convert(b, root, hint, direction, depth))
            .collect();
        let merged = match types.as_slice() {
            [] => PipeType::json(),
            [one] => one.clone(),
            many => {
                let mut literals = Vec::new();
                let all_literals = many.iter().all(|t| match &t.shape {
                    Shape::Literals(v) if !t.optional => {
                        literals.extend(v.iter().cloned());
                        true
                    }
                    _ => false,
                });
                let numbers = many
                    .iter()
                    .all(|t| !t.optional && matches!(t.shape, Shape::Int | Shape::Float));
                if all_literals {
                    PipeType::of(Shape::Literals(unique(literals)))
                } else if numbers {
                    PipeType::of(Shape::Float)
                } else {
                    PipeType::of(Shape::Either(many.to_vec()))
                }
            }
        };
        if nullable || types.iter().any(|t| t.optional) {
            merged.optional()
        } else {
            merged
        }
    }

    /// `#/$defs/Name` (or `#/definitions/Name`): the definition's type, made once.
    fn reference(
        &mut self,
        reference: &str,
        root: &Value,
        direction: Direction,
        depth: usize,
    ) -> PipeType {
        let Some(name) = reference
            .strip_prefix("#/$defs/")
            .or_else(|| reference.strip_prefix("#/definitions/"))
        else {
            return PipeType::json();
        };
        let key = (name.to_string(), root.to_string(), direction);
        if let Some(known) = self.refs.get(&key) {
            return known.clone();
        }
        let Some(definition) = root
            .get("$defs")
            .and_then(|d| d.get(name))
            .or_else(|| root.get("definitions").and_then(|d| d.get(name)))
        else {
            return PipeType::json();
        };
        // Until it is made, a definition that refers to itself sees `json`; a record
        // takes its name first, so that it can refer to itself by name.
        self.refs.insert(key.clone(), PipeType::json());
        let hint = camel_case(name, "Type");
        let ty = if self.record_fields(definition, direction).is_some() {
            let record_name = self.claim(&hint);
            let ty = PipeType::of(Shape::Record(record_name.clone()));
            self.refs.insert(key.clone(), ty.clone());
            self.record(definition, root, record_name, direction, depth);
            ty
        } else {
            self.convert(definition, root, &hint, direction, depth)
        };
        self.refs.insert(key, ty.clone());
        ty
    }

    /// The properties of an object schema that a record can have, or `None` when the
    /// object is no record (no properties; or, sent to the server, a property whose
    /// name is not a field name).
    fn record_fields<'s>(
        &self,
        schema: &'s Value,
        direction: Direction,
    ) -> Option<&'s serde_json::Map<String, Value>> {
        let properties = schema.get("properties").and_then(Value::as_object)?;
        let usable = properties.keys().filter(|k| is_identifier(k)).count();
        let exact = usable == properties.len();
        match direction {
            _ if usable == 0 => None,
            Direction::Input if !exact => None,
            _ => Some(properties),
        }
    }

    fn object(
        &mut self,
        schema: &Value,
        root: &Value,
        hint: &str,
        direction: Direction,
        depth: usize,
    ) -> PipeType {
        if self.record_fields(schema, direction).is_none() {
            let values = match schema.get("additionalProperties") {
                Some(values @ Value::Object(_)) => {
                    self.convert(values, root, &format!("{hint}Value"), direction, depth)
                }
                _ => PipeType::json(),
            };
            return PipeType::of(Shape::Map(Box::new(values)));
        }
        let key = (schema.to_string(), direction);
        if let Some(known) = self.seen.get(&key) {
            return known.clone();
        }
        let title = schema
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| is_identifier(t));
        let base = match title {
            Some(t) => camel_case(t, hint),
            None => hint.to_string(),
        };
        let name = self.claim(&base);
        let ty = PipeType::of(Shape::Record(name.clone()));
        self.seen.insert(key, ty.clone());
        self.record(schema, root, name, direction, depth);
        ty
    }

    fn record(
        &mut self,
        schema: &Value,
        root: &Value,
        name: String,
        direction: Direction,
        depth: usize,
    ) {
        let index = self.records.len();
        self.records.push(Record {
            name: name.clone(),
            doc: description(schema),
            fields: Vec::new(),
            left_out: Vec::new(),
        });
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut fields = Vec::new();
        let mut left_out = Vec::new();
        for (field, property) in &properties {
            if !is_identifier(field) {
                left_out.push(field.clone());
                continue;
            }
            let hint = format!("{name}{}", camel_case(field, "Field"));
            let ty = self.convert(property, root, &hint, direction, depth);
            let ty = if required.contains(&field.as_str()) {
                ty
            } else {
                ty.optional()
            };
            fields.push(Field {
                name: field.clone(),
                ty,
                doc: description(property),
            });
        }
        if let Some(record) = self.records.get_mut(index) {
            record.fields = fields;
            record.left_out = left_out;
        }
    }
}

/// Records that are structurally one (the same field names, each of the same type
/// with twins taken as one, the same fields left out), by name → the first of their
/// group. Groups are refined from "all records alike" until stable, so records that
/// refer to themselves (or to each other) are found alike too.
fn twins(records: &[Record]) -> HashMap<String, String> {
    let index: HashMap<&str, usize> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let mut group = vec![0usize; records.len()];
    let mut groups = 1;
    loop {
        let signature = |r: &Record| {
            let fields: Vec<String> = r
                .fields
                .iter()
                .map(|f| {
                    let ty = f.ty.written(&|name| match index.get(name) {
                        Some(&i) => format!("#{}", group[i]),
                        None => name.to_string(),
                    });
                    format!("{}: {ty}", f.name)
                })
                // `left out` is no identifier, so this cannot pass for a field.
                .chain(r.left_out.iter().map(|name| format!("left out: {name}")))
                .collect();
            fields
        };
        let mut seen: HashMap<(usize, Vec<String>), usize> = HashMap::new();
        let next: Vec<usize> = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let count = seen.len();
                *seen.entry((group[i], signature(r))).or_insert(count)
            })
            .collect();
        let refined = seen.len();
        group = next;
        if refined == groups {
            break;
        }
        groups = refined;
    }
    let mut first: HashMap<usize, &str> = HashMap::new();
    let mut out = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        match first.get(&group[i]) {
            Some(name) => {
                out.insert(r.name.clone(), name.to_string());
            }
            None => {
                first.insert(group[i], &r.name);
            }
        }
    }
    out
}

/// The values in their first order, each once (a union lists a literal once).
fn unique(values: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// A JSON type name read by its kind alone: the branches of a `type` list, which share
/// one schema's keywords.
fn kind(name: &str) -> PipeType {
    PipeType::of(match name {
        "string" => Shape::String,
        "integer" => Shape::Int,
        "number" => Shape::Float,
        "boolean" => Shape::Bool,
        "array" => Shape::List(Box::new(PipeType::json())),
        "object" => Shape::Map(Box::new(PipeType::json())),
        _ => Shape::Json,
    })
}

fn is_numbers(a: &str, b: &str) -> bool {
    matches!((a, b), ("integer", "number") | ("number", "integer"))
}

/// An `enum` (or `const`): strings are a literal union; numbers or booleans their type;
/// `null` among them makes it optional; a mix is `json`.
fn enumeration(values: &[Value]) -> PipeType {
    let nullable = values.iter().any(Value::is_null);
    let rest: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
    let ty = if rest.is_empty() {
        PipeType::json()
    } else if rest.iter().all(|v| v.is_string()) {
        let literals: Vec<String> = rest
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        PipeType::of(Shape::Literals(unique(literals)))
    } else if rest.iter().all(|v| v.is_i64()) {
        PipeType::of(Shape::Int)
    } else if rest.iter().all(|v| v.is_number()) {
        PipeType::of(Shape::Float)
    } else if rest.iter().all(|v| v.is_boolean()) {
        PipeType::of(Shape::Bool)
    } else {
        PipeType::json()
    };
    if nullable { ty.optional() } else { ty }
}

/// A schema's `description`, the text of a doc comment.
pub fn description(schema: &Value) -> Option<String> {
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn type_text(schema: Value, direction: Direction) -> (String, Vec<Record>) {
        let mut taken = Taken::default();
        let mut types = Types::new(&mut taken);
        let ty = types.type_of(&schema, &schema, "Hint", direction);
        (ty.text(), types.into_records())
    }

    #[test]
    fn scalars_lists_optionals_and_unions() {
        let t = |s: Value| type_text(s, Direction::Output).0;
        assert_eq!(t(json!({"type": "string"})), "string");
        assert_eq!(t(json!({"type": ["integer", "null"]})), "int?");
        assert_eq!(t(json!({"type": ["integer", "number"]})), "float");
        assert_eq!(
            t(json!({"type": "array", "items": {"type": "boolean"}})),
            "bool[]"
        );
        assert_eq!(t(json!({"enum": ["low", "high"]})), "\"low\" | \"high\"");
        assert_eq!(
            t(json!({"type": "array", "items": {"enum": ["a", "b"]}})),
            "(\"a\" | \"b\")[]"
        );
        assert_eq!(
            t(json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
            "string?"
        );
        assert_eq!(
            t(json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}})),
            "(string?)[]"
        );
        assert_eq!(
            t(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})),
            "json"
        );
        // Several kinds, `null` among them, are still `json` (which holds `null`).
        assert_eq!(
            t(json!({"type": "array", "items": {"type": ["string", "object", "null"]}})),
            "json[]"
        );
        assert_eq!(
            t(json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})),
            "json"
        );
        assert_eq!(t(json!({"type": "object"})), "map<json>");
        assert_eq!(
            t(json!({"type": "object", "additionalProperties": {"type": "integer"}})),
            "map<int>"
        );
        assert_eq!(
            t(json!({"type": "string", "contentEncoding": "base64"})),
            "bytes"
        );
        assert_eq!(t(json!({})), "json");
        assert_eq!(t(json!(true)), "json");
        assert_eq!(
            t(json!({"type": "array", "items": [{"type": "string"}]})),
            "json[]"
        );
    }

    #[test]
    fn objects_become_records_and_refs_are_shared() {
        let schema = json!({
            "type": "object",
            "properties": {
                "owner": {"$ref": "#/$defs/Person"},
                "contacts": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
                "x-id": {"type": "string"},
                "note": {"type": "string", "description": "Free text."}
            },
            "required": ["owner", "contacts"],
            "$defs": {
                "Person": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "boss": {"$ref": "#/$defs/Person"}},
                    "required": ["name"]
                }
            }
        });
        let (ty, records) = type_text(schema.clone(), Direction::Output);
        assert_eq!(ty, "Hint");
        let names: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["Hint", "Person"]);
        let hint = &records[0];
        assert_eq!(hint.left_out, ["x-id"]);
        let fields: Vec<(String, String)> = hint
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.ty.text()))
            .collect();
        assert_eq!(
            fields,
            [
                ("contacts".to_string(), "Person[]".to_string()),
                ("note".to_string(), "string?".to_string()),
                ("owner".to_string(), "Person".to_string()),
            ]
        );
        let person = &records[1];
        assert_eq!(person.fields[0].name, "boss");
        assert_eq!(person.fields[0].ty.text(), "Person?");

        // Sent to the server, an object with a field pipec cannot name stays a map.
        let (ty, _) = type_text(schema, Direction::Input);
        assert_eq!(ty, "map<json>");
    }

    #[test]
    fn twins_are_declared_once_and_orphans_not_at_all() {
        let person = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "boss": {"$ref": "#/$defs/Person"}},
            "required": ["name"]
        });
        // Two schemas that define `Person` alike, one read and one sent, and a branch
        // of `anyOf` that makes a record before the whole becomes `json`.
        let a = json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/Person"}}, "$defs": {"Person": person.clone()}});
        let b = json!({"type": "object", "properties": {"q": {"$ref": "#/$defs/Person"}}, "required": ["q"], "$defs": {"Person": person}});
        let c = json!({"anyOf": [{"type": "object", "properties": {"code": {"type": "string"}}}, {"type": "string"}]});
        let mut taken = Taken::default();
        let mut types = Types::new(&mut taken);
        let ta = types.type_of(&a, &a, "A", Direction::Output);
        let tb = types.type_of(&b, &b, "B", Direction::Input);
        let tc = types.type_of(&c, &c, "C", Direction::Output);
        assert_eq!(tc.text(), "json");
        let declared = types.finish([&ta, &tb, &tc]);
        let names: Vec<&str> = declared.records.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["A", "Person", "B"]);
        let field =
            |record: usize, field: usize| declared.text(&declared.records[record].fields[field].ty);
        assert_eq!(field(2, 0), "Person");
        assert_eq!(field(1, 0), "Person?");

        // One name defined otherwise in another schema is another record, named as
        // if the twins and orphans had never been.
        let other = json!({"type": "object", "properties": {"lead": {"$ref": "#/$defs/Person"}}, "$defs": {"Person": {"type": "object", "properties": {"email": {"type": "string"}}}}});
        let mut taken = Taken::default();
        let mut types = Types::new(&mut taken);
        let ta = types.type_of(&a, &a, "A", Direction::Output);
        let tb = types.type_of(&b, &b, "B", Direction::Input);
        let to = types.type_of(&other, &other, "Other", Direction::Output);
        let declared = types.finish([&ta, &tb, &to]);
        let names: Vec<&str> = declared.records.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["A", "Person", "B", "Other", "Person2"]);
        assert_eq!(declared.text(&declared.records[3].fields[0].ty), "Person2?");
    }

    #[test]
    fn defaults_are_written_only_where_they_fit() {
        let int = PipeType::of(Shape::Int);
        assert_eq!(int.literal(&json!(3)).as_deref(), Some("3"));
        assert_eq!(int.literal(&json!("3")), None);
        let float = PipeType::of(Shape::Float);
        assert_eq!(float.literal(&json!(0.5)).as_deref(), Some("0.5"));
        assert_eq!(float.literal(&json!(1e300)), None);
        let union = PipeType::of(Shape::Literals(vec!["a".into(), "b".into()]));
        assert_eq!(union.literal(&json!("b")).as_deref(), Some("\"b\""));
        assert_eq!(union.literal(&json!("c")), None);
        let list = PipeType::of(Shape::List(Box::new(PipeType::of(Shape::String))));
        assert_eq!(
            list.literal(&json!(["x", "y\""])).as_deref(),
            Some("[\"x\", \"y\\\"\"]")
        );
        assert_eq!(
            PipeType::json().literal(&json!({"a-b": 1})).as_deref(),
            Some("{ \"a-b\": 1 }")
        );
    }
}
