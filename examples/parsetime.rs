fn main() {
    for n in [1000usize, 10000] {
        let text = pipec::synth::pipeline(n);
        let loader = pipec::source::MemoryLoader::new().with("b.pipe", text.clone());
        let (mut bp, mut ba, mut bc) = (
            std::time::Duration::MAX,
            std::time::Duration::MAX,
            std::time::Duration::MAX,
        );
        for _ in 0..7 {
            let t = std::time::Instant::now();
            let p = pipec::syntax::parse(pipec::source::FileId(0), &text);
            bp = bp.min(t.elapsed());
            std::hint::black_box(p);
            let t = std::time::Instant::now();
            let c = pipec::check::check(&loader, std::path::Path::new("b.pipe"), "b.pipe");
            bc = bc.min(t.elapsed());
            std::hint::black_box(c);
            let t = std::time::Instant::now();
            let a = pipec::analyze(&loader, std::path::Path::new("b.pipe"), "b.pipe");
            ba = ba.min(t.elapsed());
            std::hint::black_box(a);
        }
        println!("{n}: parse {:?} check {:?} analyze {:?}", bp, bc, ba);
    }
}
