//! An upgraded connection (WebSocket, after the backend's 101): bytes go
//! both ways unchanged until either side closes, or until neither has sent
//! anything for the idle limit.

use std::cell::Cell;
use std::time::{Duration, Instant};

use futures_lite::future;

use crate::limits::PROXY_CHUNK;
use crate::net::deadline::Deadlines;
use crate::net::sock::{End, Sock};
use crate::proxy::backend::{Failed, Stream};

/// Bytes each way.
pub struct Carried {
    pub to_client: u64,
}

/// Runs the tunnel; `from_client` is what the client sent after its
/// request head.
pub async fn run(
    sock: &Sock,
    backend: &Stream,
    from_client: Vec<u8>,
    deadlines: &'static Deadlines,
    idle: Duration,
) -> Carried {
    let last = Cell::new(Instant::now());
    let to_client = Cell::new(0u64);
    // Past the idle limit only if the other way was quiet too.
    let idle_for_long = |at: Instant| at.saturating_duration_since(last.get()) >= idle;
    let up = async {
        if backend
            .write_all(&from_client, deadlines, Instant::now() + idle)
            .await
            .is_err()
        {
            return;
        }
        drop(from_client);
        let mut buf = vec![0u8; PROXY_CHUNK];
        loop {
            match sock.read_some(&mut buf, last.get() + idle).await {
                Ok(0) => {
                    // The client is done sending; the backend may still answer.
                    backend.shutdown_write();
                    return future::pending().await;
                }
                Ok(n) => {
                    last.set(Instant::now());
                    if backend
                        .write_all(&buf[..n], deadlines, Instant::now() + idle)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Err(End::Timeout) if !idle_for_long(Instant::now()) => {}
                Err(_) => return,
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; PROXY_CHUNK];
        loop {
            match backend
                .read_some(&mut buf, deadlines, last.get() + idle)
                .await
            {
                Ok(0) => return,
                Ok(n) => {
                    last.set(Instant::now());
                    if sock.send_all(&buf[..n]).await.is_err() {
                        return;
                    }
                    to_client.set(to_client.get() + n as u64);
                }
                Err(Failed::Timeout) if !idle_for_long(Instant::now()) => {}
                Err(_) => return,
            }
        }
    };
    future::or(up, down).await;
    Carried {
        to_client: to_client.get(),
    }
}
