//! TLS for the live code: the client configuration of `live --url wss://`
//! (Mozilla's roots, plus a private CA from `--ca-cert`) and the server
//! configuration of `serve --tls-cert/--tls-key`, both from PEM files.
//!
//! rustls runs with the `ring` crypto provider, given explicitly to every
//! configuration built here and also installed as the process default
//! (rustls panics at connect when it has to pick a provider and none is
//! installed; nothing here leaves it to pick). Live code only: the
//! simulator never touches this module.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::Path;
use std::sync::Arc;

/// A PEM file that cannot be used: bad input, the message names the flag
/// and the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsFileError(pub String);

/// The `ring` provider, installed as the process default on first use.
fn provider() -> Arc<CryptoProvider> {
    let p = rustls::crypto::ring::default_provider();
    // Err means a default is already installed (by an earlier call): fine.
    let _ = p.clone().install_default();
    Arc::new(p)
}

/// What went wrong reading a PEM file, in words (the parser's own text
/// prints raw bytes).
fn pem_problem(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no END line".into(),
        pem::Error::IllegalSectionStart { .. } => "a malformed PEM BEGIN line".into(),
        pem::Error::Base64Decode(m) => format!("bad base64 in a PEM section ({m})"),
        pem::Error::NoItemsFound => "nothing usable found".into(),
        other => other.to_string(),
    }
}

/// Largest PEM file read (a CA bundle of every public root is about 200 KB).
pub const MAX_PEM_BYTES: u64 = 4 << 20;

/// A PEM file: a regular file (a FIFO or a device is refused before it is
/// read, so it cannot block: [`crate::files::read_input`]) of at most
/// [`MAX_PEM_BYTES`].
fn read(flag: &str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    crate::files::read_input(path, MAX_PEM_BYTES)
        .map_err(|e| TlsFileError(format!("{flag} {}: {e}", path.display())))
}

/// Every certificate of a PEM file (at least one).
fn certificates(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsFileError> {
    let bytes = read(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsFileError(format!("{flag} {}: {}", path.display(), pem_problem(&e))))?;
    if certs.is_empty() {
        return Err(TlsFileError(format!(
            "{flag} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        )));
    }
    Ok(certs)
}

/// The client configuration for `wss://`: Mozilla's root certificates
/// (the `webpki-roots` crate), plus every certificate of `ca_cert` (PEM)
/// as a trusted root.
pub fn client_config(ca_cert: Option<&Path>) -> Result<Arc<ClientConfig>, TlsFileError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_cert {
        for (i, cert) in certificates("--ca-cert", path)?.into_iter().enumerate() {
            roots.add(cert).map_err(|e| {
                TlsFileError(format!(
                    "--ca-cert {}: certificate {} is not a usable CA certificate: {e}",
                    path.display(),
                    i + 1
                ))
            })?;
        }
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsFileError(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The server configuration for `serve --tls-cert CERT --tls-key KEY`:
/// the certificate chain (PEM, the server's certificate first) and its
/// private key (PEM: PKCS#8, PKCS#1 or SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsFileError> {
    let chain = certificates("--tls-cert", cert)?;
    let key_bytes = read("--tls-key", key)?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| {
        let why = match e {
            pem::Error::NoItemsFound => {
                "no PEM private key (-----BEGIN PRIVATE KEY-----, RSA or EC) in it".into()
            }
            other => pem_problem(&other),
        };
        TlsFileError(format!("--tls-key {}: {why}", key.display()))
    })?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsFileError(format!("TLS setup: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            TlsFileError(format!(
                "--tls-key {} with --tls-cert {}: {e}",
                key.display(),
                cert.display()
            ))
        })?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/tls")
            .join(name)
    }

    #[test]
    fn the_test_ca_and_server_files_load() {
        assert!(client_config(None).is_ok());
        assert!(client_config(Some(&data("ca.pem"))).is_ok());
        assert!(server_config(&data("server.pem"), &data("server.key")).is_ok());
    }

    #[test]
    fn bad_files_name_the_flag_and_the_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").expect("write");
        let bad_b64 = dir.path().join("bad64.pem");
        std::fs::write(
            &bad_b64,
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let not_der = dir.path().join("notder.pem");
        std::fs::write(
            &not_der,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let missing = dir.path().join("missing.pem");
        for (f, what) in [
            (&garbage, "no PEM certificate"),
            (&bad_b64, "base64"),
            (&not_der, "not a usable CA certificate"),
            (&missing, "No such file"),
        ] {
            let e = client_config(Some(f)).expect_err("refused");
            assert!(e.0.starts_with("--ca-cert "), "{e}");
            assert!(e.0.contains(&f.display().to_string()), "{e}");
            assert!(e.0.contains(what), "{e}");
        }
        let e = server_config(&garbage, &data("server.key")).expect_err("refused");
        assert!(e.0.starts_with("--tls-cert "), "{e}");
        let e = server_config(&data("server.pem"), &garbage).expect_err("refused");
        assert!(
            e.0.starts_with("--tls-key ") && e.0.contains("private key"),
            "{e}"
        );
        // A key that is not the certificate's.
        let e = server_config(&data("server.pem"), &data("other.key")).expect_err("refused");
        assert!(
            e.0.contains("--tls-key") && e.0.contains("--tls-cert"),
            "{e}"
        );
    }
}
