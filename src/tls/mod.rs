//! HTTPS without the sockets: the certificate and key (read from PEM, or
//! made at first start), and the rustls settings every TLS connection of a
//! worker shares. Built only with the `tls` feature.

pub(crate) mod acceptor;
pub(crate) mod damage;
pub(crate) mod der;
pub(crate) mod keys;
pub(crate) mod provider;
pub(crate) mod self_signed;
pub(crate) mod tickets;
