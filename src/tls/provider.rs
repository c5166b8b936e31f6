//! The cryptography the server offers, chosen from ring's for size: what
//! browsers and curl negotiate, and nothing a server without client
//! certificates never runs. Measured on the aarch64 build in the README
//! (Dependencies).
//!
//! - Cipher suites: AES-GCM, with 128- and 256-bit keys (TLS 1.3, and TLS
//!   1.2 with ECDHE for ECDSA and RSA keys). AES-256 costs 1 KiB: ring's
//!   AES code serves both key sizes, and SHA-384 is there for P-384 keys
//!   already; a client whose policy allows only AES-256 connects. The
//!   server's order wins (`tls/acceptor.rs`), AES-128 first: the kernel
//!   (kTLS) takes AES-128 connections only.
//! - ChaCha20-Poly1305 on MIPS and 32-bit ARM only, the CPUs without AES
//!   instructions: there ring's AES-GCM is portable constant-time code (no
//!   MIPS assembly at all), and ChaCha20 costs a fraction of it. First when
//!   the records stay in user space; after AES-GCM when the kernel takes
//!   them (its AES-GCM costs no copy to user space). On those builds
//!   only: x86_64 and aarch64 have AES instructions, and the code is
//!   flash.
//! - Key exchange: X25519 and P-256, which every browser offers; not P-384.
//! - Keys: RSA and ECDSA (P-256, P-384), what certificate authorities
//!   issue; not Ed25519, which browsers do not accept in certificates.
//! - No signature verification algorithms: they check client certificates,
//!   which the server never asks for.

use std::sync::Arc;

use rustls::SupportedCipherSuite;
use rustls::crypto::ring::{cipher_suite, kx_group, sign};
use rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::sign::SigningKey;

/// `to_kernel`: the kernel takes the records of AES-128-GCM connections.
pub fn provider(to_kernel: bool) -> CryptoProvider {
    CryptoProvider {
        cipher_suites: suites(to_kernel),
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1],
        signature_verification_algorithms: WebPkiSupportedAlgorithms {
            all: &[],
            mapping: &[],
        },
        secure_random: &Random,
        key_provider: &Keys,
    }
}

fn aes_gcm() -> [SupportedCipherSuite; 6] {
    [
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        cipher_suite::TLS13_AES_256_GCM_SHA384,
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ]
}

/// The suites in the server's order.
#[cfg(not(any(target_arch = "mips", target_arch = "arm")))]
fn suites(_to_kernel: bool) -> Vec<SupportedCipherSuite> {
    aes_gcm().to_vec()
}

#[cfg(any(target_arch = "mips", target_arch = "arm"))]
fn suites(to_kernel: bool) -> Vec<SupportedCipherSuite> {
    let chacha = [
        cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    if to_kernel {
        [&aes_gcm()[..], &chacha].concat()
    } else {
        [&chacha[..], &aes_gcm()].concat()
    }
}

#[derive(Debug)]
struct Random;

impl SecureRandom for Random {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), buf)
            .map_err(|_| GetRandomFailed)
    }
}

#[derive(Debug)]
struct Keys;

impl KeyProvider for Keys {
    fn load_private_key(
        &self,
        der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        load(&der)
    }
}

/// An RSA or ECDSA key, as PKCS#1, SEC1 or PKCS#8.
pub fn load(der: &PrivateKeyDer<'_>) -> Result<Arc<dyn SigningKey>, rustls::Error> {
    if let Ok(rsa) = sign::RsaSigningKey::new(der) {
        return Ok(Arc::new(rsa));
    }
    sign::any_ecdsa_type(der)
}
