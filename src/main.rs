fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    let t = std::time::Instant::now();
    let checked = pipec::check::check(&pipec::source::FsLoader, std::path::Path::new(&arg), &arg);
    eprintln!("{:?}", t.elapsed());
    for d in &checked.diagnostics {
        let loc = d.primary.as_ref().map(|p| { let f = checked.db.get(p.file); let (l,c)=f.line_col(p.span.start); format!("{}:{}:{} `{}`", f.name, l, c, f.slice(p.span)) }).unwrap_or_default();
        println!("{} {} {} [{}] {:?}", d.rule.code, loc, d.message, d.primary.as_ref().map(|p| p.message.clone()).unwrap_or_default(), d.help);
    }
}
