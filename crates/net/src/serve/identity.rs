//! agentchat identities: IDENTIFY names, Ed25519 public keys (SPKI PEM, as
//! agentchat's Node client exports them), the agent id derived from a key
//! and the challenge a keyed agent signs.
//!
//! All of it as the public agentchat server does it:
//! - a name is 1 to 32 of `[A-Za-z0-9_-]`;
//! - the agent id of a key is the first 16 hex digits of the SHA-256 of
//!   the PEM text exactly as the client sent it (so the same key sent with
//!   other line endings is another id, as on agentchat);
//! - the client signs `AGENTCHAT_AUTH|<nonce>|<challenge_id>|<timestamp>`
//!   with its key and sends the signature in base64.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

/// agentchat's `isValidName`: 1 to 32 characters of `[A-Za-z0-9_-]`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// 16 lowercase hex digits: the shape of a key-derived id. Names of that
/// shape are refused to key-less agents so that they cannot take a keyed
/// agent's id.
pub fn looks_like_key_id(s: &str) -> bool {
    s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The agent id of a public key: the first 16 hex digits of
/// SHA-256(pem), `pem` as sent.
pub fn agent_id_of_pubkey(pem: &str) -> String {
    let digest = Sha256::digest(pem.as_bytes());
    let mut hex = String::with_capacity(16);
    for b in digest.iter().take(8) {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// The DER of an Ed25519 SubjectPublicKeyInfo (RFC 8410) before its 32
/// key bytes: SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING (0 unused) }.
const SPKI_ED25519_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Parse an Ed25519 public key in SPKI PEM form (`-----BEGIN PUBLIC
/// KEY-----`, base64 of the 44-byte DER, `-----END PUBLIC KEY-----`; any
/// line wrapping or line endings). The DER of such a key is fixed, so it
/// is checked byte for byte rather than parsed.
pub fn parse_pubkey(pem: &str) -> Option<VerifyingKey> {
    let body = pem
        .trim()
        .strip_prefix("-----BEGIN PUBLIC KEY-----")?
        .strip_suffix("-----END PUBLIC KEY-----")?;
    let b64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let der = BASE64.decode(b64).ok()?;
    let key = der.strip_prefix(&SPKI_ED25519_PREFIX[..])?;
    let key: &[u8; 32] = key.try_into().ok()?;
    VerifyingKey::from_bytes(key).ok()
}

/// The text a keyed agent signs to answer a CHALLENGE.
pub fn signing_content(nonce: &str, challenge_id: &str, timestamp: &str) -> String {
    format!("AGENTCHAT_AUTH|{nonce}|{challenge_id}|{timestamp}")
}

/// Whether `signature_b64` (base64 of 64 bytes) is `key`'s signature of
/// `content`. Strict verification (no malleable or small-order forms).
pub fn verify(key: &VerifyingKey, content: &str, signature_b64: &str) -> bool {
    let Ok(bytes) = BASE64.decode(signature_b64.trim()) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(&bytes) else {
        return false;
    };
    key.verify_strict(content.as_bytes(), &sig).is_ok()
}

/// A fresh random nonce: 32 hex digits, as agentchat's.
pub fn new_nonce() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::pkcs8::EncodePublicKey;
    use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
    use ed25519_dalek::{Signer, SigningKey};

    #[test]
    fn names() {
        for ok in ["a", "agent-1", "A_b", &"x".repeat(32)] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "a b", "é", "#a", "@a", &"x".repeat(33)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
        assert!(looks_like_key_id("0123456789abcdef"));
        assert!(!looks_like_key_id("0123456789abcdeF"));
        assert!(!looks_like_key_id("0123456789abcde"));
    }

    #[test]
    fn id_is_sha256_prefix_of_the_pem_text() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(agent_id_of_pubkey("abc"), "ba7816bf8f01cfea");
    }

    #[test]
    fn pem_roundtrip_and_signature() {
        let sk = SigningKey::from_bytes(&[7u8; 32]);
        let pem = sk
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap_or_default();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{pem}");
        let key = parse_pubkey(&pem);
        assert_eq!(key, Some(sk.verifying_key()));
        let content = signing_content("n", "chal_1", "17");
        let sig = BASE64.encode(sk.sign(content.as_bytes()).to_bytes());
        let key = key.unwrap_or(sk.verifying_key());
        assert!(verify(&key, &content, &sig));
        assert!(!verify(&key, &signing_content("n", "chal_1", "18"), &sig));
        assert!(!verify(&key, &content, "not base64!"));
        assert!(!verify(&key, &content, "AAAA"));
        // Other line endings and wrapping are the same key.
        let crlf = pem.replace('\n', "\r\n");
        assert_eq!(parse_pubkey(&crlf), Some(sk.verifying_key()));
        for bad in [
            "",
            "-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----\n",
            // OID 1.3.101.113 (Ed448), not Ed25519.
            "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VxAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n",
            // Too short.
            "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n",
            "-----BEGIN PRIVATE KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PRIVATE KEY-----\n",
        ] {
            assert_eq!(parse_pubkey(bad), None, "{bad}");
        }
        // The example key of ed25519-dalek's documentation.
        let doc = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----";
        assert!(parse_pubkey(doc).is_some());
        assert_eq!(new_nonce().len(), 32);
    }
}
