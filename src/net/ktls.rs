//! Kernel TLS (kTLS): once rustls has made a handshake, the kernel takes
//! the connection's records, so reads and writes are plain socket calls
//! and a file body goes out with sendfile(2), as over plain HTTP.
//!
//! What the kernel can take is probed once per process on a throwaway
//! loopback connection, before any connection's keys leave rustls: keys
//! taken out cannot go back, so a kernel that refused them would cost the
//! connection. Started as root, the probe also lets the kernel load its
//! `tls` module (TCP_ULP loads it only for CAP_NET_ADMIN).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::libc;
use nix::sys::socket::{setsockopt, sockopt};
use rustls::{ConnectionTrafficSecrets, ExtractedSecrets, ProtocolVersion};

/// The TLS versions whose records the kernel takes in both directions
/// (TLS 1.2 since Linux 4.17, TLS 1.3 since 5.1), for AES-128-GCM.
#[derive(Clone, Copy)]
pub struct Support {
    tls12: bool,
    tls13: bool,
}

impl Support {
    pub const NONE: Support = Support {
        tls12: false,
        tls13: false,
    };

    pub fn any(self) -> bool {
        self.tls12 || self.tls13
    }

    pub fn covers(self, version: ProtocolVersion) -> bool {
        match version {
            ProtocolVersion::TLSv1_2 => self.tls12,
            ProtocolVersion::TLSv1_3 => self.tls13,
            _ => false,
        }
    }
}

/// Whether the kernel is given the keys of `suite`: AES-128-GCM's, the
/// cipher the probe tried. A connection on AES-256-GCM stays with rustls.
pub fn takes(suite: rustls::CipherSuite) -> bool {
    use rustls::CipherSuite as S;
    matches!(
        suite,
        S::TLS13_AES_128_GCM_SHA256
            | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    )
}

static SUPPORT: OnceLock<Support> = OnceLock::new();

/// What this kernel takes, probed and logged the first time it is asked.
pub fn support() -> Support {
    *SUPPORT.get_or_init(|| match probe() {
        Ok(s) => {
            let versions = match (s.tls12, s.tls13) {
                (true, true) => "TLS 1.2 and 1.3",
                (true, false) => "TLS 1.2 (TLS 1.3 in user space)",
                _ => "TLS 1.3 (TLS 1.2 in user space)",
            };
            log::info!("TLS: records in the kernel (kTLS) for {versions}");
            s
        }
        Err(why) => {
            log::info!("TLS: records in user space: no kernel TLS ({why})");
            Support::NONE
        }
    })
}

/// Tries the TLS layer and both versions' keys on a loopback connection;
/// `Err` says why the kernel takes neither.
fn probe() -> Result<Support, String> {
    let io = |e: std::io::Error| format!("loopback: {e}");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(io)?;
    let ours = TcpStream::connect(listener.local_addr().map_err(io)?).map_err(io)?;
    let (theirs, _) = listener.accept().map_err(io)?;
    let zero = Keys {
        key: [0; 16],
        iv: [0; 12],
        seq: 0,
    };
    let mut support = Support::NONE;
    let mut refused = Errno::UnknownErrno;
    for (sock, version) in [
        (&ours, ProtocolVersion::TLSv1_3),
        (&theirs, ProtocolVersion::TLSv1_2),
    ] {
        attach(sock).map_err(|e| format!("TCP_ULP tls: {e}"))?;
        let tx = zero.info(version, Direction::Send);
        let rx = zero.info(version, Direction::Receive);
        let both = setsockopt(sock, sockopt::TcpTlsTx, &tx)
            .and_then(|()| setsockopt(sock, sockopt::TcpTlsRx, &rx));
        match (both, version) {
            (Err(e), _) => refused = e,
            (Ok(()), ProtocolVersion::TLSv1_3) => support.tls13 = true,
            (Ok(()), _) => support.tls12 = true,
        }
    }
    if support.any() {
        Ok(support)
    } else {
        Err(format!("TLS_TX/TLS_RX: {refused}"))
    }
}

/// Puts the kernel's TLS layer on the socket. Until it has keys it passes
/// bytes through unchanged, so after a failure here, or before the keys,
/// rustls still owns the connection.
pub fn attach(stream: &TcpStream) -> nix::Result<()> {
    setsockopt(stream, sockopt::TcpUlp::default(), b"tls")
}

/// Gives the kernel both directions' keys and sequence numbers (after
/// `attach`). An error leaves the connection without usable keys: close it.
pub fn give_keys(
    stream: &TcpStream,
    version: ProtocolVersion,
    secrets: ExtractedSecrets,
) -> nix::Result<()> {
    let (tx_seq, tx) = secrets.tx;
    let (rx_seq, rx) = secrets.rx;
    // Wiped on every way out, the early returns too.
    let tx = Given(Keys::from_rustls(&tx, tx_seq)?.info(version, Direction::Send));
    let rx = Given(Keys::from_rustls(&rx, rx_seq)?.info(version, Direction::Receive));
    setsockopt(stream, sockopt::TcpTlsTx, &tx.0)
        .and_then(|()| setsockopt(stream, sockopt::TcpTlsRx, &rx.0))
}

/// A copy of a key for the kernel, cleared when dropped.
struct Given(sockopt::TlsCryptoInfo);

impl Drop for Given {
    fn drop(&mut self) {
        if let sockopt::TlsCryptoInfo::Aes128Gcm(c) = &mut self.0 {
            wipe(&mut c.key);
            wipe(&mut c.salt);
            wipe(&mut c.iv);
        }
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Send,
    Receive,
}

/// One direction's AES-128-GCM key, its 12-byte IV and the sequence
/// number of its next record.
struct Keys {
    key: [u8; 16],
    iv: [u8; 12],
    seq: u64,
}

impl Keys {
    fn from_rustls(secrets: &ConnectionTrafficSecrets, seq: u64) -> nix::Result<Keys> {
        let ConnectionTrafficSecrets::Aes128Gcm { key, iv } = secrets else {
            return Err(Errno::EINVAL);
        };
        Ok(Keys {
            key: key.as_ref().try_into().map_err(|_| Errno::EINVAL)?,
            iv: iv.as_ref().try_into().map_err(|_| Errno::EINVAL)?,
            seq,
        })
    }

    fn info(&self, version: ProtocolVersion, direction: Direction) -> sockopt::TlsCryptoInfo {
        let (version, explicit) = match version {
            ProtocolVersion::TLSv1_2 => (
                libc::TLS_1_2_VERSION,
                tls12_explicit(&self.iv, self.seq, direction),
            ),
            _ => (libc::TLS_1_3_VERSION, tail(&self.iv)),
        };
        let mut salt = [0; 4];
        salt.copy_from_slice(&self.iv[..4]);
        sockopt::TlsCryptoInfo::Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128 {
            info: libc::tls_crypto_info {
                version,
                cipher_type: libc::TLS_CIPHER_AES_GCM_128,
            },
            iv: explicit,
            key: self.key,
            salt,
            rec_seq: self.seq.to_be_bytes(),
        })
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        wipe(&mut self.key);
        wipe(&mut self.iv);
    }
}

/// Clears key material about to be freed; volatile so that the write is
/// not optimised away.
fn wipe<const N: usize>(bytes: &mut [u8; N]) {
    // SAFETY: a valid, exclusively borrowed byte array.
    unsafe { std::ptr::write_volatile(bytes, [0; N]) };
}

fn tail(iv: &[u8; 12]) -> [u8; 8] {
    let mut t = [0; 8];
    t.copy_from_slice(&iv[4..]);
    t
}

/// TLS 1.2 GCM sends each record's nonce (after the 4-byte salt) in the
/// record. rustls's was the IV's last 8 bytes XOR the sequence number; the
/// kernel's starts from what it is given and adds one per record. Started
/// at those bytes plus the next sequence number, the kernel never repeats
/// a nonce rustls used under the key: `x ^ j` lies within `j` of `x`. The
/// receiver reads each nonce from the record, so receiving needs none.
fn tls12_explicit(iv: &[u8; 12], seq: u64, direction: Direction) -> [u8; 8] {
    match direction {
        Direction::Send => u64::from_be_bytes(tail(iv)).wrapping_add(seq).to_be_bytes(),
        Direction::Receive => tail(iv),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_aes_128_gcm_keys_go_to_the_kernel() {
        use rustls::CipherSuite as S;
        assert!(takes(S::TLS13_AES_128_GCM_SHA256));
        assert!(takes(S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
        assert!(!takes(S::TLS13_AES_256_GCM_SHA384));
        assert!(!takes(S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384));
    }

    fn nonce(explicit: [u8; 8]) -> u64 {
        u64::from_be_bytes(explicit)
    }

    #[test]
    fn the_kernel_never_repeats_a_tls12_nonce_rustls_used() {
        for start in [
            0u64,
            1,
            7,
            0xff,
            0x1234_5678_9abc_def0,
            u64::MAX - 3,
            u64::MAX,
        ] {
            let mut iv = [0u8; 12];
            iv[4..].copy_from_slice(&start.to_be_bytes());
            for sent in 0..40u64 {
                let used: Vec<u64> = (0..sent).map(|j| start ^ j).collect();
                let first = nonce(tls12_explicit(&iv, sent, Direction::Send));
                for k in 0..200u64 {
                    let kernel = first.wrapping_add(k);
                    assert!(
                        !used.contains(&kernel),
                        "start {start:#x}, {sent} sent: record {k} repeats {kernel:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn key_salt_and_sequence_go_where_the_kernel_reads_them() {
        let keys = Keys {
            key: [7; 16],
            iv: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            seq: 0x0102,
        };
        let sockopt::TlsCryptoInfo::Aes128Gcm(c) =
            keys.info(ProtocolVersion::TLSv1_3, Direction::Send)
        else {
            panic!("not AES-128-GCM");
        };
        assert_eq!(c.info.version, 0x0304);
        assert_eq!(c.info.cipher_type, 51);
        assert_eq!(c.salt, [1, 2, 3, 4]);
        assert_eq!(c.iv, [5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(c.key, [7; 16]);
        assert_eq!(c.rec_seq, [0, 0, 0, 0, 0, 0, 1, 2]);
        let sockopt::TlsCryptoInfo::Aes128Gcm(c) =
            keys.info(ProtocolVersion::TLSv1_2, Direction::Send)
        else {
            panic!("not AES-128-GCM");
        };
        assert_eq!(c.info.version, 0x0303);
        assert_eq!(c.iv, [5, 6, 7, 8, 9, 10, 12, 14]);
        let sockopt::TlsCryptoInfo::Aes128Gcm(c) =
            keys.info(ProtocolVersion::TLSv1_2, Direction::Receive)
        else {
            panic!("not AES-128-GCM");
        };
        assert_eq!(c.iv, [5, 6, 7, 8, 9, 10, 11, 12]);
    }
}
