//! Answers on one kept-alive HTTP connection: `pipec serve --http` writes an answer in
//! more than one write (the message, then the end of its chunked body), and without
//! `TCP_NODELAY` Nagle's algorithm held the last write until the client's delayed
//! acknowledgement, about 40 ms on Linux: every request on a connection took 40 ms or
//! more, whatever it asked. This is not a measure of speed (bench/serve_load.sh is): the
//! bound below is a quarter of what the stall alone costs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common;

use common::Project;
use common::serve_http::{authority, serve_http, status_of};

const TOKEN: &str = "keepalive-t0ken";

const SITE: &str = r#"serve {
  resource "file:///site/readme" {
    name = "readme"
    mime_type = "text/plain"
    text = "A small resource."
  }
}
"#;

/// Reads one HTTP answer from `reader`: its head, then its body (chunked, or of a
/// `content-length`), as text.
fn read_answer(reader: &mut BufReader<TcpStream>) -> (String, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("read") == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    let mut body = String::new();
    if head.contains("transfer-encoding: chunked") {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).expect("chunk size");
            let n = usize::from_str_radix(size.trim(), 16).expect("hex size");
            let mut chunk = vec![0u8; n + 2];
            reader.read_exact(&mut chunk).expect("chunk");
            if n == 0 {
                break;
            }
            body.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    } else {
        let n: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a length");
        let mut bytes = vec![0u8; n];
        reader.read_exact(&mut bytes).expect("body");
        body = String::from_utf8_lossy(&bytes).into_owned();
    }
    (head, body)
}

#[test]
fn answers_on_a_kept_alive_connection_do_not_wait_for_the_clients_acknowledgement() {
    let p = Project::new("serve-keepalive");
    p.write("site.pipe", SITE);
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], TOKEN);
    let host = authority(&url).to_string();
    let stream = TcpStream::connect(&host).expect("connect");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    const REQUESTS: u32 = 64;
    let started = Instant::now();
    for id in 0..REQUESTS {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/read","params":{{"uri":"file:///site/readme","_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{{"name":"raw","version":"1"}},"io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: resources/read\r\nmcp-name: file:///site/readme\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        writer.write_all(request.as_bytes()).expect("send");
        let (head, body) = read_answer(&mut reader);
        assert_eq!(status_of(&head), 200, "{head}{body}");
        assert!(body.contains("A small resource."), "{body}");
        assert!(body.contains(&format!("\"id\":{id}")), "{body}");
    }
    let took = started.elapsed();
    // With the stall, an answer takes 40 ms once the connection is past its first few
    // (while Linux acknowledges at once): 64 answers take well over 2 s.
    assert!(
        took < Duration::from_millis(10) * REQUESTS,
        "{REQUESTS} answers on one connection took {took:?}: each waited for the client's delayed acknowledgement"
    );
}
