//! MCP over stdin and stdout, with fault injection. The rmcp handler runs on one end of
//! an in-process pipe; this file reads each line the client sends, lets `intercept` judge
//! it, and either passes it down the pipe or answers in its place. One task writes
//! stdout, a whole line at a time, so an injected answer (garbage, a huge line) never
//! interleaves with the handler's.

use std::sync::Arc;

use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::crm::Crm;
use super::faults::Transport;
use super::intercept::{Verdict, intercept};
use super::server::CrmServer;

/// Room for the handler's answers in the pipe; the relay empties it as fast as stdout
/// takes them.
const PIPE_BYTES: usize = 1 << 20;

/// Serves until the client closes stdin, then lets the handler finish what it was given.
pub(crate) async fn serve(crm: Arc<Crm>) -> Result<(), String> {
    let (front, handler_end) = tokio::io::duplex(PIPE_BYTES);
    let (handler_read, handler_write) = tokio::io::split(handler_end);
    let (from_handler, mut to_handler) = tokio::io::split(front);
    let (lines, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();

    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outgoing.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });

    let relay_lines = lines.clone();
    let relay = tokio::spawn(async move {
        let mut reader = BufReader::new(from_handler);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if relay_lines.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });

    let handler = CrmServer::new(crm.clone());
    let service = tokio::spawn(async move {
        match handler.serve((handler_read, handler_write)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            // A client that closes stdin before it says anything has nothing to be told.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {}
            Err(e) => eprintln!("pipec-demo-crm: the MCP session did not start: {e}"),
        }
    });

    let mut stdin = BufReader::new(tokio::io::stdin());
    loop {
        let mut line = Vec::new();
        match stdin.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("pipec-demo-crm: reading stdin failed: {e}");
                break;
            }
        }
        match intercept(&crm, &line, Transport::Stdio) {
            Verdict::Forward => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if to_handler.write_all(&line).await.is_err() {
                    // The handler's session ended (it refused the handshake, say): nothing
                    // more can be answered.
                    break;
                }
            }
            Verdict::Answer(mut answer) => {
                answer.push('\n');
                let _ = lines.send(answer.into_bytes());
            }
            Verdict::Hang => {}
            Verdict::Exit => {
                eprintln!("pipec-demo-crm: exiting, as CRM_FAULT_FILE asks");
                std::process::exit(1);
            }
            // Faults of HTTP only never apply over stdio (`FaultLine::applies_to`).
            Verdict::Status(_) | Verdict::Cut(_) => {}
        }
    }
    // The end of stdin ends the handler's session; its last answers still go out.
    let _ = to_handler.shutdown().await;
    drop(to_handler);
    let _ = service.await;
    let _ = relay.await;
    drop(lines);
    let _ = writer.await;
    Ok(())
}
