//! Noticing that a client has gone while nothing is read from it (its
//! request waits on a backend): its socket turns readable with the end of
//! the stream, or with an error. Bytes it sent (a pipelined request, a TLS
//! record) are left for their reader; then nothing more is watched.

use std::io;

use futures_lite::future;

use crate::net::sock::Sock;

/// Resolves once the client has closed its side or the connection broke;
/// never, once it has sent something more.
pub async fn client_gone(sock: &Sock) {
    let mut b = [0u8; 1];
    loop {
        if sock.stream.readable().await.is_err() {
            return;
        }
        match sock.stream.get_ref().peek(&mut b) {
            Ok(0) => return,
            Ok(_) => return future::pending().await,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}
