//! `pipec graph`: the pipeline as a Mermaid or Graphviz diagram.
//!
//! Node kinds are drawn with different shapes (gates as diamonds), bindings as arrows
//! from producer to consumer, and resource bindings as dashed arrows from the server (a
//! URI) or from the node that produced the link.

use std::fmt::Write as _;

use crate::{NodeKind, Plan, Source};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    Mermaid,
    Dot,
}

struct Edge {
    from: String,
    to: String,
    label: String,
    style: EdgeStyle,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EdgeStyle {
    Data,
    Resource,
    Order,
}

fn node_id(name: &str) -> String {
    format!("n_{name}")
}

fn server_id(name: &str) -> String {
    format!("s_{}", name.replace('.', "_"))
}

fn input_id(name: &str) -> String {
    format!("i_{name}")
}

fn output_id(name: &str) -> String {
    format!("o_{name}")
}

fn edges(plan: &Plan) -> (Vec<Edge>, Vec<String>) {
    let mut out = Vec::new();
    let mut servers = Vec::new();
    for node in &plan.nodes {
        for p in &node.params {
            collect(
                &p.source,
                &node_id(&node.name),
                &p.name,
                &mut out,
                &mut servers,
            );
        }
        for dep in &node.deps {
            let from = node_id(dep);
            if !out
                .iter()
                .any(|e| e.from == from && e.to == node_id(&node.name))
            {
                out.push(Edge {
                    from,
                    to: node_id(&node.name),
                    label: "after".into(),
                    style: EdgeStyle::Order,
                });
            }
        }
    }
    for o in &plan.outputs {
        collect(&o.source, &output_id(&o.name), "", &mut out, &mut servers);
    }
    servers.sort();
    servers.dedup();
    (out, servers)
}

fn collect(src: &Source, to: &str, param: &str, out: &mut Vec<Edge>, servers: &mut Vec<String>) {
    match src {
        Source::Input { input, .. } => out.push(Edge {
            from: input_id(input),
            to: to.into(),
            label: param.into(),
            style: EdgeStyle::Data,
        }),
        Source::Node { node, .. } => out.push(Edge {
            from: node_id(node),
            to: to.into(),
            label: param.into(),
            style: EdgeStyle::Data,
        }),
        Source::Join { sides } | Source::List { items: sides } => sides
            .iter()
            .for_each(|s| collect(s, to, param, out, servers)),
        Source::Record { fields } => fields
            .values()
            .for_each(|s| collect(s, to, param, out, servers)),
        Source::Each { list, .. } => collect(list, to, &format!("each {param}"), out, servers),
        Source::Resource { server, .. } => {
            servers.push(server.clone());
            out.push(Edge {
                from: server_id(server),
                to: to.into(),
                label: param.into(),
                style: EdgeStyle::Resource,
            });
        }
        Source::Link {
            producer,
            link_kind,
            ..
        } => {
            out.push(Edge {
                from: node_id(producer),
                to: to.into(),
                label: format!("{param} (link {link_kind})"),
                style: EdgeStyle::Resource,
            });
        }
        _ => {}
    }
}

/// Draws the plan.
pub fn render(plan: &Plan, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(plan),
        GraphFormat::Dot => dot(plan),
    }
}

fn mermaid_label(s: &str) -> String {
    s.replace('"', "#quot;")
}

fn mermaid(plan: &Plan) -> String {
    let (edges, servers) = edges(plan);
    let mut s = String::from("flowchart TD\n");
    for i in &plan.inputs {
        let _ = writeln!(
            s,
            "  {}[/\"input {}\"/]",
            input_id(&i.name),
            mermaid_label(&i.name)
        );
    }
    for srv in &servers {
        let _ = writeln!(
            s,
            "  {}[(\"server {}\")]",
            server_id(srv),
            mermaid_label(srv)
        );
    }
    for n in &plan.nodes {
        let label = format!("{} {}", kind_word(n.kind), n.name);
        let shape = match n.kind {
            NodeKind::Node => format!("[\"{}\"]", mermaid_label(&label)),
            NodeKind::Think => format!("([\"{}\"])", mermaid_label(&label)),
            NodeKind::Agent => format!("[[\"{}\"]]", mermaid_label(&label)),
            NodeKind::Act => format!("{{{{\"{}\"}}}}", mermaid_label(&label)),
            NodeKind::Gate => format!("{{\"{}\"}}", mermaid_label(&label)),
        };
        let _ = writeln!(s, "  {}{}", node_id(&n.name), shape);
    }
    for o in &plan.outputs {
        let _ = writeln!(
            s,
            "  {}[\\\"output {}\"\\]",
            output_id(&o.name),
            mermaid_label(&o.name)
        );
    }
    for e in &edges {
        let arrow = match e.style {
            EdgeStyle::Data => "-->",
            EdgeStyle::Resource => "-.->",
            EdgeStyle::Order => "==>",
        };
        if e.label.is_empty() {
            let _ = writeln!(s, "  {} {arrow} {}", e.from, e.to);
        } else {
            let _ = writeln!(
                s,
                "  {} {arrow}|\"{}\"| {}",
                e.from,
                mermaid_label(&e.label),
                e.to
            );
        }
    }
    for n in plan.nodes.iter().filter(|n| n.kind == NodeKind::Gate) {
        let _ = writeln!(
            s,
            "  style {} stroke-width:3px,stroke-dasharray: 4",
            node_id(&n.name)
        );
    }
    s
}

fn dot_label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn dot(plan: &Plan) -> String {
    let (edges, servers) = edges(plan);
    let mut s = String::new();
    let _ = writeln!(s, "digraph \"{}\" {{", dot_label(&plan.name));
    s.push_str("  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n");
    for i in &plan.inputs {
        let _ = writeln!(
            s,
            "  {} [label=\"input {}\", shape=parallelogram];",
            input_id(&i.name),
            dot_label(&i.name)
        );
    }
    for srv in &servers {
        let _ = writeln!(
            s,
            "  {} [label=\"server {}\", shape=cylinder];",
            server_id(srv),
            dot_label(srv)
        );
    }
    for n in &plan.nodes {
        let shape = match n.kind {
            NodeKind::Node => "box",
            NodeKind::Think => "ellipse",
            NodeKind::Agent => "box3d",
            NodeKind::Act => "hexagon",
            NodeKind::Gate => "diamond",
        };
        let extra = if n.kind == NodeKind::Gate {
            ", style=bold, color=orange"
        } else if n.kind == NodeKind::Act {
            ", color=red"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  {} [label=\"{} {}\", shape={shape}{extra}];",
            node_id(&n.name),
            kind_word(n.kind),
            dot_label(&n.name)
        );
    }
    for o in &plan.outputs {
        let _ = writeln!(
            s,
            "  {} [label=\"output {}\", shape=note];",
            output_id(&o.name),
            dot_label(&o.name)
        );
    }
    for e in &edges {
        let style = match e.style {
            EdgeStyle::Data => "",
            EdgeStyle::Resource => ", style=dashed",
            EdgeStyle::Order => ", style=dotted",
        };
        let _ = writeln!(
            s,
            "  {} -> {} [label=\"{}\"{style}];",
            e.from,
            e.to,
            dot_label(&e.label)
        );
    }
    s.push_str("}\n");
    s
}

fn kind_word(k: NodeKind) -> &'static str {
    match k {
        NodeKind::Node => "node",
        NodeKind::Think => "think",
        NodeKind::Agent => "agent",
        NodeKind::Act => "act",
        NodeKind::Gate => "gate",
    }
}
