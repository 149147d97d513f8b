//! The server side of SCRAM-SHA-256 / SCRAM-SHA-512, sans-io: checks a
//! client's proof against a password and proves the server knows it.
//!
//! Written apart from walfetch's client side so that each checks the
//! other (and librdkafka checks this one).
//!
//! # References
//! - RFC 5802 §3 (algorithm) and §5 (messages); RFC 7677.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Iterations the server asks for (Kafka's minimum).
const ITERATIONS: u32 = 4096;

/// SHA-256 or SHA-512.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            match <M as hmac::digest::KeyInit>::new_from_slice(key) {
                Ok(mut mac) => {
                    mac.update(data);
                    mac.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            }
        }
        match self {
            Self::Sha256 => run::<Hmac<Sha256>>(key, data),
            Self::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn salted(self, password: &[u8], salt: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, ITERATIONS, &mut out);
                out.to_vec()
            }
            Self::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, ITERATIONS, &mut out);
                out.to_vec()
            }
        }
    }
}

/// A SCRAM exchange after server-first: what client-final must prove.
#[derive(Debug)]
pub(crate) struct ScramServer {
    hash: Hash,
    salted: Vec<u8>,
    /// client-first-bare "," server-first.
    so_far: String,
    nonce: String,
}

fn attr(text: &str, key: char) -> Option<&str> {
    text.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(key) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

impl ScramServer {
    /// Reads client-first; `password` looks a username up. Returns the
    /// exchange and server-first, or why the client is refused.
    pub(crate) fn start(
        hash: Hash,
        client_first: &[u8],
        password: impl Fn(&str) -> Option<String>,
    ) -> Result<(Self, String), String> {
        let text = std::str::from_utf8(client_first).map_err(|_| "client-first is not UTF-8")?;
        let bare = text
            .strip_prefix("n,,")
            .ok_or("client-first must start with n,, (no channel binding, no authzid)")?;
        let user = attr(bare, 'n').ok_or("client-first has no n=")?;
        let user = user.replace("=2C", ",").replace("=3D", "=");
        let client_nonce = attr(bare, 'r').ok_or("client-first has no r=")?;
        let password = password(&user).ok_or_else(|| format!("unknown user {user:?}"))?;
        let salt: [u8; 16] = rand::random();
        let server_nonce: [u8; 18] = rand::random();
        let nonce = format!("{client_nonce}{}", BASE64.encode(server_nonce));
        let server_first = format!("r={nonce},s={},i={ITERATIONS}", BASE64.encode(salt));
        let exchange = Self {
            hash,
            salted: hash.salted(password.as_bytes(), &salt),
            so_far: format!("{bare},{server_first}"),
            nonce,
        };
        Ok((exchange, server_first))
    }

    /// Reads client-final and returns server-final, or why the proof is
    /// refused.
    pub(crate) fn finish(self, client_final: &[u8]) -> Result<String, String> {
        let text = std::str::from_utf8(client_final).map_err(|_| "client-final is not UTF-8")?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or("client-final has no proof")?;
        if attr(without_proof, 'c') != Some("biws") {
            return Err("client-final channel binding must be biws".to_owned());
        }
        if attr(without_proof, 'r') != Some(self.nonce.as_str()) {
            return Err("client-final nonce differs".to_owned());
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|e| format!("proof is not base64: {e}"))?;
        let h = self.hash;
        let auth_message = format!("{},{without_proof}", self.so_far);
        let client_key = h.hmac(&self.salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        let signature = h.hmac(&stored_key, auth_message.as_bytes());
        let presented: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if proof.len() != signature.len() || h.hash(&presented) != stored_key {
            return Err("invalid credentials".to_owned());
        }
        let server_key = h.hmac(&self.salted, b"Server Key");
        Ok(format!(
            "v={}",
            BASE64.encode(h.hmac(&server_key, auth_message.as_bytes()))
        ))
    }
}
